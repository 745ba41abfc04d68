// comm_paced.cpp: PacedCommunicator (see comm_paced.h): an egress queue per rank drained by a sleeping wire
// thread, in front of any communicator.
#include "comm/comm_paced.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "comm/comm_forward.h"
#include "core/error.h"

namespace prophet {
namespace {

using Clock = std::chrono::steady_clock;

// NOTE: the all-to-all-v's messages; below 32767 (MPI's least tag bound) and above every tag prophet uses for
// Trans/Agg (8192 + E, 16384 + E with E <= 8192).
constexpr int kTagAllToAll = 32766;

// One queued send: posted to the inner communicator by the wire thread at `release`.
struct PacedSend {
    const void* data = nullptr;
    size_t bytes = 0;
    int dst = 0, tag = 0;
    Clock::time_point release;
    std::mutex mutex;
    std::condition_variable cv;
    bool posted = false;
    CommHandle inner;
    std::exception_ptr error;
};

// The egress queue, shared by the communicator, its wire thread and the send requests (which may outlive neither
// but may be destroyed during an exception's unwinding in any order).
struct Wire {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::shared_ptr<PacedSend>> queue;
    bool stopping = false;

    // Takes `send` off the queue if the wire thread has not taken it yet; false when it has (it is posted, or
    // being posted). The wire thread is woken: the send it sleeps for may be this one.
    bool withdraw(const std::shared_ptr<PacedSend>& send) {
        bool withdrawn = false;
        {
            std::lock_guard lock(mutex);
            const auto it = std::find(queue.begin(), queue.end(), send);
            if (it != queue.end()) {
                queue.erase(it);
                withdrawn = true;
            }
        }
        cv.notify_all();
        return withdrawn;
    }
};

class PacedSendRequest final : public CommRequest {
  public:
    PacedSendRequest(std::shared_ptr<PacedSend> send, std::shared_ptr<Wire> wire, int rank, double timeout_s)
        : send_(std::move(send)), wire_(std::move(wire)), rank_(rank), timeout_s_(timeout_s) {}
    // Never waits for a send still queued (its release may be hours away on a slow link, and the destruction
    // happens while an error unwinds): it is withdrawn. A posted one is waited for, as the inner request needs.
    ~PacedSendRequest() override {
        if (done_ || wire_->withdraw(send_)) return;
        wait_quietly(*this);
    }
    // Bounded by comm.timeout_s (0 = none), like every blocking call: a send the emulated link cannot release in
    // time is withdrawn and the wait throws the timeout error (exit 6).
    void wait() override {
        if (done_) return;
        done_ = true;
        std::unique_lock lock(send_->mutex);
        const auto posted = [&] { return send_->posted; };
        if (timeout_s_ <= 0) {
            send_->cv.wait(lock, posted);
        } else if (!send_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s_), posted)) {
            lock.unlock();
            if (wire_->withdraw(send_)) throw timeout_error();
            lock.lock();
            send_->cv.wait(lock, posted);  // the wire thread took it meanwhile: it posts it now
        }
        if (send_->error) std::rethrow_exception(send_->error);
        CommHandle inner = std::move(send_->inner);
        lock.unlock();
        if (inner) inner->wait();
    }
    bool test() override {
        if (done_) return true;
        {
            std::lock_guard lock(send_->mutex);
            if (!send_->posted) return false;
            if (!send_->error && send_->inner && !send_->inner->test()) return false;
        }
        wait();
        return true;
    }

  private:
    Error timeout_error() const {
        return comm_detail::timeout_error(rank_, "isend", timeout_s_,
                                          " waiting for the emulated link to send " + std::to_string(send_->bytes) +
                                              " bytes to rank " + std::to_string(send_->dst) +
                                              " (comm.link_gbps is too slow for comm.timeout_s)");
    }

    std::shared_ptr<PacedSend> send_;
    std::shared_ptr<Wire> wire_;
    int rank_ = 0;
    double timeout_s_ = 0;
    bool done_ = false;
};

class PacedComm final : public ForwardingCommunicator {
  public:
    PacedComm(Communicator* inner, LinkEmulation link)
        : ForwardingCommunicator(inner), link_(link), wire_(std::make_shared<Wire>()) {
        PROPHET_ASSERT(inner != nullptr);
        PROPHET_ASSERT_MSG(link.bytes_per_s > 0 && link.latency_s >= 0 && link.timeout_s >= 0,
                           "link emulation needs a rate > 0 bytes/s, a latency >= 0 s and a timeout >= 0 s");
        wire_thread_ = std::thread([this] { wire_loop(); });
    }
    ~PacedComm() override {
        {
            std::lock_guard lock(wire_->mutex);
            wire_->stopping = true;
        }
        wire_->cv.notify_all();
        wire_thread_.join();
    }

    // rank .. broadcast: forwarded (the small collectives are not paced)

    void set_timeout_s(double seconds) override {
        inner_->set_timeout_s(seconds);
        link_.timeout_s = seconds;  // for the sends posted from now on
    }

    void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                      const size_t* recv_bytes, const size_t* recv_offsets) override {
        all_to_all_v_async(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets)->wait();
    }

    // Every peer's part is a paced message, sent in rank order starting after this rank (so the ranks' queues
    // do not all aim at rank 0 first); the part to self is a copy.
    CommHandle all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets,
                                  void* recv, const size_t* recv_bytes, const size_t* recv_offsets) override {
        const int D = size(), r = rank();
        std::vector<CommHandle> parts;
        const char* in = static_cast<const char*>(send);
        char* out = static_cast<char*>(recv);
        for (int i = 1; i < D; i++) {
            const int src = (r - i + D) % D;
            if (recv_bytes[src] > 0)
                parts.push_back(inner_->irecv(out + recv_offsets[src], recv_bytes[src], src, kTagAllToAll));
        }
        for (int i = 1; i < D; i++) {
            const int dst = (r + i) % D;
            if (send_bytes[dst] > 0)
                parts.push_back(isend(in + send_offsets[dst], send_bytes[dst], dst, kTagAllToAll));
        }
        PROPHET_ASSERT_MSG(send_bytes[r] == recv_bytes[r], "all_to_all_v: this rank's part to itself differs in size");
        if (send_bytes[r] > 0) std::memcpy(out + recv_offsets[r], in + send_offsets[r], send_bytes[r]);
        return comm_detail::join_requests(std::move(parts));
    }

    CommHandle isend(const void* data, size_t bytes, int dst, int tag) override {
        if (dst == rank()) return inner_->isend(data, bytes, dst, tag);
        auto send = std::make_shared<PacedSend>();
        send->data = data;
        send->bytes = bytes;
        send->dst = dst;
        send->tag = tag;
        {
            std::lock_guard lock(wire_->mutex);
            const Clock::time_point now = Clock::now();
            const auto wire = std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>((double)bytes / link_.bytes_per_s));
            const auto latency =
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(link_.latency_s));
            egress_free_ = std::max(egress_free_, now) + wire;
            send->release = egress_free_ + latency;
            wire_->queue.push_back(send);
        }
        wire_->cv.notify_all();
        return std::make_unique<PacedSendRequest>(std::move(send), wire_, rank(), link_.timeout_s);
    }

    CommHandle broadcast_subset_async(void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                      int tag) override {
        return comm_detail::broadcast_subset_p2p(*this, data, bytes, root, ranks, tag);
    }
    CommHandle reduce_sum_subset_async(float* data, size_t count, int root, const std::vector<int>& ranks,
                                       int tag) override {
        return comm_detail::reduce_sum_subset_p2p(*this, data, count, root, ranks, tag);
    }

  private:
    // Sleeps until the head of the queue is due, then posts it to the inner communicator. A send withdrawn while
    // it sleeps wakes it for the next head; on stopping, the sends still queued fail instead of being sent.
    void wire_loop() {
        Wire& w = *wire_;
        std::unique_lock lock(w.mutex);
        for (;;) {
            w.cv.wait(lock, [&] { return w.stopping || !w.queue.empty(); });
            if (w.stopping) {
                fail_queued(w);
                return;
            }
            std::shared_ptr<PacedSend> send = w.queue.front();
            const auto head_changed = [&] { return w.stopping || w.queue.empty() || w.queue.front() != send; };
            if (w.cv.wait_until(lock, send->release, head_changed)) continue;
            w.queue.pop_front();
            lock.unlock();
            CommHandle inner;
            std::exception_ptr error;
            try {
                inner = inner_->isend(send->data, send->bytes, send->dst, send->tag);
            } catch (...) {
                error = std::current_exception();
            }
            settle(*send, std::move(inner), error);
            lock.lock();
        }
    }

    static void settle(PacedSend& send, CommHandle inner, std::exception_ptr error) {
        {
            std::lock_guard send_lock(send.mutex);
            send.inner = std::move(inner);
            send.error = error;
            send.posted = true;
        }
        send.cv.notify_all();
    }

    // w.mutex held
    static void fail_queued(Wire& w) {
        const auto closed = std::make_exception_ptr(
            Error(kExitDistributed, "the emulated link was closed before this send left (its communicator ended)"));
        for (const std::shared_ptr<PacedSend>& send : w.queue) settle(*send, nullptr, closed);
        w.queue.clear();
    }

    LinkEmulation link_;
    std::shared_ptr<Wire> wire_;
    Clock::time_point egress_free_{};  // guarded by wire_->mutex
    std::thread wire_thread_;
};

}  // namespace

std::unique_ptr<Communicator> make_paced_communicator(Communicator* inner, LinkEmulation link) {
    return std::make_unique<PacedComm>(inner, link);
}

}  // namespace prophet
