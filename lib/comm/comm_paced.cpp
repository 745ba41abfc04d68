// comm_paced.cpp: PacedCommunicator (see comm_paced.h): an egress queue per rank drained by a sleeping wire
// thread, in front of any communicator.
#include "comm/comm_paced.h"

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

class PacedSendRequest final : public CommRequest {
  public:
    explicit PacedSendRequest(std::shared_ptr<PacedSend> send) : send_(std::move(send)) {}
    ~PacedSendRequest() override {
        try {
            wait();
        } catch (...) {
            // a destructor must not throw; wait() reported the failure to whoever called it
        }
    }
    void wait() override {
        if (done_) return;
        done_ = true;
        std::unique_lock lock(send_->mutex);
        send_->cv.wait(lock, [&] { return send_->posted; });
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
    std::shared_ptr<PacedSend> send_;
    bool done_ = false;
};

class PacedComm final : public ForwardingCommunicator {
  public:
    PacedComm(Communicator* inner, LinkEmulation link) : ForwardingCommunicator(inner), link_(link) {
        PROPHET_ASSERT(inner != nullptr);
        PROPHET_ASSERT_MSG(link.bytes_per_s > 0 && link.latency_s >= 0,
                           "link emulation needs a rate > 0 bytes/s and a latency >= 0 s");
        wire_ = std::thread([this] { wire_loop(); });
    }
    ~PacedComm() override {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        cv_.notify_all();
        wire_.join();
    }

    // rank .. broadcast, set_timeout_s: forwarded (the small collectives are not paced)

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
            std::lock_guard lock(mutex_);
            const Clock::time_point now = Clock::now();
            const auto wire = std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>((double)bytes / link_.bytes_per_s));
            const auto latency =
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(link_.latency_s));
            egress_free_ = std::max(egress_free_, now) + wire;
            send->release = egress_free_ + latency;
            queue_.push_back(send);
        }
        cv_.notify_all();
        return std::make_unique<PacedSendRequest>(std::move(send));
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
    // Sleeps until the head of the queue is due, then posts it to the inner communicator.
    void wire_loop() {
        std::unique_lock lock(mutex_);
        for (;;) {
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping and drained
            std::shared_ptr<PacedSend> send = queue_.front();
            if (cv_.wait_until(lock, send->release, [&] { return false; })) continue;
            queue_.pop_front();
            lock.unlock();
            CommHandle inner;
            std::exception_ptr error;
            try {
                inner = inner_->isend(send->data, send->bytes, send->dst, send->tag);
            } catch (...) {
                error = std::current_exception();
            }
            {
                std::lock_guard send_lock(send->mutex);
                send->inner = std::move(inner);
                send->error = error;
                send->posted = true;
            }
            send->cv.notify_all();
            lock.lock();
        }
    }

    LinkEmulation link_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<PacedSend>> queue_;
    Clock::time_point egress_free_{};
    bool stopping_ = false;
    std::thread wire_;
};

}  // namespace

std::unique_ptr<Communicator> make_paced_communicator(Communicator* inner, LinkEmulation link) {
    return std::make_unique<PacedComm>(inner, link);
}

}  // namespace prophet
