// comm_local.cpp: LocalGroup, N ranks as threads of one process sharing memory (make_local_group).
//
// The slow, obvious oracle the MPI and NCCL communicators are tested against, and the 1-rank communicator of a
// run without mpirun. Collectives rendezvous in a shared table keyed by call number (every rank calls
// collectives in the same order, so the k-th call of each rank is the same collective); each rank copies its
// contribution in at post time and reads the others' once all have posted. Reductions sum in ascending rank
// order, so every rank gets identical bytes. Point-to-point follows MPI matching: per (src, dst, tag), sends
// and receives pair in posting order. A blocking wait past set_timeout_s throws (exit 6) and aborts the group:
// every later or pending wait on any rank then fails at once instead of waiting out its own deadline.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include "comm/comm.h"
#include "core/error.h"
#include "core/join.h"

namespace prophet {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::byte>;

// One collective call, shared by all ranks until the last one has read its result.
struct CollectiveOp {
    std::string call;                 // name of the first poster's call; the others must match
    std::string signature;            // e.g. "bytes=64 root=2"; must match across ranks where non-empty
    int signature_rank = -1;          // who set it, for the mismatch message
    std::vector<uint8_t> posted;      // [R] 1 once rank r has posted
    int num_posted = 0;
    int num_done = 0;                 // ranks that have read their result; the last one erases the op
    std::vector<Bytes> data;          // [R] rank r's contribution
    std::vector<std::vector<size_t>> piece_begin;  // all_to_all_v: [R][R+1] prefix offsets into data[src] by dst
};

struct PendingRecv {
    void* data = nullptr;
    size_t bytes = 0;
    bool done = false;
    std::string error;  // set instead of copying when the matched send has a different size
};

struct Mailbox {
    std::deque<Bytes> unexpected;                      // sends that found no posted irecv, in send order
    std::deque<std::shared_ptr<PendingRecv>> pending;  // irecvs waiting for a send, in post order
};

struct GroupState {
    explicit GroupState(int n) : num_ranks(n) {}
    const int num_ranks;
    std::mutex mutex;
    std::condition_variable cv;
    std::map<uint64_t, CollectiveOp> ops;                     // by call number
    std::map<std::tuple<int, int, int>, Mailbox> mailboxes;  // by (src, dst, tag)
    std::string abort_reason;                                 // non-empty once a rank failed: the group is dead
};

class DoneRequest final : public CommRequest {
  public:
    void wait() override {}
    bool test() override { return true; }
};

class LocalComm;

class LocalA2aRequest final : public CommRequest {
  public:
    LocalA2aRequest(LocalComm* comm, uint64_t seq, void* recv, std::vector<size_t> recv_bytes,
                    std::vector<size_t> recv_offsets)
        : comm_(comm), seq_(seq), recv_(recv), recv_bytes_(std::move(recv_bytes)),
          recv_offsets_(std::move(recv_offsets)) {}
    ~LocalA2aRequest() override;
    void wait() override;
    bool test() override;

  private:
    LocalComm* comm_;
    uint64_t seq_;
    void* recv_;
    std::vector<size_t> recv_bytes_, recv_offsets_;  // [R]
    bool done_ = false;
};

class LocalRecvRequest final : public CommRequest {
  public:
    LocalRecvRequest(LocalComm* comm, std::shared_ptr<PendingRecv> pending, int src, int tag)
        : comm_(comm), pending_(std::move(pending)), src_(src), tag_(tag) {}
    ~LocalRecvRequest() override;
    void wait() override;
    bool test() override;

  private:
    LocalComm* comm_;
    std::shared_ptr<PendingRecv> pending_;
    int src_, tag_;
    bool finished_ = false;  // completed, or cancelled after a failed wait
};

class LocalComm final : public Communicator {
  public:
    LocalComm(std::shared_ptr<GroupState> group, int rank) : group_(std::move(group)), rank_(rank) {}

    int rank() const override { return rank_; }
    int size() const override { return group_->num_ranks; }
    const char* name() const override { return "local"; }

    void barrier() override {
        const uint64_t seq = post("barrier", "", {});
        std::unique_lock lock(group_->mutex);
        wait_all_posted(lock, seq, "barrier");
        finish(lock, seq);
    }

    void all_reduce_sum(float* data, size_t count) override { reduce(data, count, "all_reduce_sum(float)", false); }
    void all_reduce_sum(double* data, size_t count) override {
        reduce(data, count, "all_reduce_sum(double)", false);
    }
    void all_reduce_sum(int64_t* data, size_t count) override {
        reduce(data, count, "all_reduce_sum(int64)", false);
    }
    void all_reduce_max(double* data, size_t count) override { reduce(data, count, "all_reduce_max(double)", true); }

    void all_gather(const void* send, size_t bytes, void* recv) override {
        const auto* src = static_cast<const std::byte*>(send);
        const uint64_t seq = post("all_gather", "bytes=" + std::to_string(bytes), Bytes(src, src + bytes));
        CollectiveOp& op = wait_op(seq, "all_gather");
        for (int r = 0; r < size(); ++r) {
            if (bytes) std::memcpy(static_cast<std::byte*>(recv) + r * bytes, op.data[r].data(), bytes);
        }
        std::unique_lock lock(group_->mutex);
        finish(lock, seq);
    }

    void broadcast(void* data, size_t bytes, int root) override {
        check_peer(root, "broadcast root");
        auto* bytes_ptr = static_cast<std::byte*>(data);
        const std::string signature = "bytes=" + std::to_string(bytes) + " root=" + std::to_string(root);
        const uint64_t seq =
            post("broadcast", signature, rank_ == root ? Bytes(bytes_ptr, bytes_ptr + bytes) : Bytes());
        CollectiveOp& op = wait_op(seq, "broadcast");
        if (rank_ != root && bytes) std::memcpy(data, op.data[root].data(), bytes);
        std::unique_lock lock(group_->mutex);
        finish(lock, seq);
    }

    void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                      const size_t* recv_bytes, const size_t* recv_offsets) override {
        all_to_all_v_async(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets)->wait();
    }

    CommHandle all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets,
                                  void* recv, const size_t* recv_bytes, const size_t* recv_offsets) override {
        const int n = size();
        // pack the pieces for every destination: [sum send_bytes] with prefix offsets [R+1]
        std::vector<size_t> begin(n + 1, 0);
        for (int d = 0; d < n; ++d) begin[d + 1] = begin[d] + send_bytes[d];
        Bytes packed(begin[n]);
        for (int d = 0; d < n; ++d) {
            if (send_bytes[d]) {
                std::memcpy(packed.data() + begin[d], static_cast<const std::byte*>(send) + send_offsets[d],
                            send_bytes[d]);
            }
        }
        const uint64_t seq = post("all_to_all_v", "", std::move(packed), std::move(begin));
        return std::make_unique<LocalA2aRequest>(this, seq, recv, std::vector<size_t>(recv_bytes, recv_bytes + n),
                                                 std::vector<size_t>(recv_offsets, recv_offsets + n));
    }

    // Completes the all_to_all_v with call number seq; false when blocking is false and a rank has not posted.
    bool complete_all_to_all_v(uint64_t seq, void* recv, const std::vector<size_t>& recv_bytes,
                               const std::vector<size_t>& recv_offsets, bool blocking) {
        std::unique_lock lock(group_->mutex);
        if (!blocking && group_->ops.at(seq).num_posted < size()) {
            throw_if_aborted("all_to_all_v");
            return false;
        }
        wait_all_posted(lock, seq, "all_to_all_v");
        CollectiveOp& op = group_->ops.at(seq);
        lock.unlock();
        // NOTE: contributions are immutable once all have posted and the op lives until every rank finished,
        // so the copies need no lock.
        std::string error;
        for (int s = 0; s < size(); ++s) {
            const size_t piece = op.piece_begin[s][rank_ + 1] - op.piece_begin[s][rank_];
            if (piece != recv_bytes[s]) {
                error = "rank " + std::to_string(rank_) + ": all_to_all_v: rank " + std::to_string(s) + " sends " +
                        std::to_string(piece) + " bytes to this rank but recv_bytes[" + std::to_string(s) +
                        "] = " + std::to_string(recv_bytes[s]);
                break;
            }
            if (piece) {
                std::memcpy(static_cast<std::byte*>(recv) + recv_offsets[s],
                            op.data[s].data() + op.piece_begin[s][rank_], piece);
            }
        }
        lock.lock();
        finish(lock, seq);
        if (!error.empty()) throw Error(kExitDistributed, error);
        return true;
    }

    CommHandle isend(const void* data, size_t bytes, int dst, int tag) override {
        check_peer(dst, "isend destination");
        check_tag(tag, "isend");
        std::unique_lock lock(group_->mutex);
        throw_if_aborted("isend");
        Mailbox& box = group_->mailboxes[{rank_, dst, tag}];
        if (!box.pending.empty()) {
            std::shared_ptr<PendingRecv> recv = std::move(box.pending.front());
            box.pending.pop_front();
            if (recv->bytes != bytes) {
                recv->error = "rank " + std::to_string(dst) + ": irecv from rank " + std::to_string(rank_) +
                              " tag " + std::to_string(tag) + ": expected " + std::to_string(recv->bytes) +
                              " bytes, got " + std::to_string(bytes) + " bytes";
            } else if (bytes) {
                std::memcpy(recv->data, data, bytes);
            }
            recv->done = true;
            group_->cv.notify_all();
        } else {
            const auto* src = static_cast<const std::byte*>(data);
            box.unexpected.emplace_back(src, src + bytes);
        }
        // the data was copied (or delivered), so the send is complete
        return std::make_unique<DoneRequest>();
    }

    CommHandle irecv(void* data, size_t bytes, int src, int tag) override {
        check_peer(src, "irecv source");
        check_tag(tag, "irecv");
        auto recv = std::make_shared<PendingRecv>();
        recv->data = data;
        recv->bytes = bytes;
        std::unique_lock lock(group_->mutex);
        throw_if_aborted("irecv");
        Mailbox& box = group_->mailboxes[{src, rank_, tag}];
        if (!box.unexpected.empty()) {
            Bytes message = std::move(box.unexpected.front());
            box.unexpected.pop_front();
            if (message.size() != bytes) {
                recv->error = "rank " + std::to_string(rank_) + ": irecv from rank " + std::to_string(src) +
                              " tag " + std::to_string(tag) + ": expected " + std::to_string(bytes) +
                              " bytes, got " + std::to_string(message.size()) + " bytes";
            } else if (bytes) {
                std::memcpy(data, message.data(), bytes);
            }
            recv->done = true;
        } else {
            box.pending.push_back(recv);
        }
        return std::make_unique<LocalRecvRequest>(this, std::move(recv), src, tag);
    }

    // Waits for a posted irecv; on timeout or abort it is withdrawn from its mailbox so no late send writes into
    // a buffer the caller has given up on.
    bool wait_recv(const std::shared_ptr<PendingRecv>& recv, int src, int tag, bool blocking) {
        std::unique_lock lock(group_->mutex);
        if (!blocking && !recv->done) {
            throw_if_aborted("irecv");
            return false;
        }
        try {
            const std::string detail = " (irecv from rank " + std::to_string(src) + ", tag " + std::to_string(tag) +
                                       ", " + std::to_string(recv->bytes) + " bytes)";
            wait_locked(lock, "irecv", [&] { return recv->done; }, [&] { return detail; });
        } catch (...) {
            auto& pending = group_->mailboxes[{src, rank_, tag}].pending;
            pending.erase(std::remove(pending.begin(), pending.end(), recv), pending.end());
            throw;
        }
        if (!recv->error.empty()) throw Error(kExitDistributed, recv->error);
        return true;
    }

    void set_timeout_s(double seconds) override {
        PROPHET_ASSERT_MSG(seconds >= 0.0, "comm timeout must be >= 0 s (0 = none)");
        timeout_s_ = seconds;
    }

  private:
    template <typename T>
    void reduce(T* data, size_t count, const char* call, bool take_max) {
        const auto* bytes_ptr = reinterpret_cast<const std::byte*>(data);
        const uint64_t seq =
            post(call, "count=" + std::to_string(count), Bytes(bytes_ptr, bytes_ptr + count * sizeof(T)));
        CollectiveOp& op = wait_op(seq, call);
        // every rank runs this same loop over the same copies: acc = x_0, then acc op= x_1, x_2, ... in rank order
        std::vector<T> acc(count), next(count);
        if (count) std::memcpy(acc.data(), op.data[0].data(), count * sizeof(T));
        for (int r = 1; r < size(); ++r) {
            if (count) std::memcpy(next.data(), op.data[r].data(), count * sizeof(T));
            for (size_t i = 0; i < count; ++i) acc[i] = take_max ? std::max(acc[i], next[i]) : acc[i] + next[i];
        }
        if (count) std::memcpy(data, acc.data(), count * sizeof(T));
        std::unique_lock lock(group_->mutex);
        finish(lock, seq);
    }

    // Adds this rank's contribution to its next collective and returns the call number.
    uint64_t post(const char* call, const std::string& signature, Bytes data, std::vector<size_t> piece_begin = {}) {
        const uint64_t seq = next_seq_++;
        std::unique_lock lock(group_->mutex);
        throw_if_aborted(call);
        CollectiveOp& op = group_->ops[seq];
        if (op.posted.empty()) {
            op.call = call;
            op.posted.assign(size(), 0);
            op.data.resize(size());
            op.piece_begin.resize(size());
        }
        if (op.call != call) {
            abort_group("rank " + std::to_string(rank_) + ": collective mismatch: this rank calls " + call +
                        " as collective #" + std::to_string(seq) + " but another rank called " + op.call);
        }
        if (!signature.empty()) {
            if (op.signature.empty()) {
                op.signature = signature;
                op.signature_rank = rank_;
            } else if (op.signature != signature) {
                abort_group("rank " + std::to_string(rank_) + ": " + call +
                            " arguments differ across ranks: this rank " + signature + ", rank " +
                            std::to_string(op.signature_rank) + " " + op.signature);
            }
        }
        op.data[rank_] = std::move(data);
        op.piece_begin[rank_] = std::move(piece_begin);
        op.posted[rank_] = 1;
        if (++op.num_posted == size()) group_->cv.notify_all();
        return seq;
    }

    // Blocks until every rank posted collective seq; returns it (stable until this rank calls finish).
    CollectiveOp& wait_op(uint64_t seq, const char* call) {
        std::unique_lock lock(group_->mutex);
        wait_all_posted(lock, seq, call);
        return group_->ops.at(seq);
    }

    void wait_all_posted(std::unique_lock<std::mutex>& lock, uint64_t seq, const char* call) {
        CollectiveOp& op = group_->ops.at(seq);
        wait_locked(lock, call, [&] { return op.num_posted == size(); },
                    [&] {
                        std::vector<int> missing;
                        for (int r = 0; r < size(); ++r) {
                            if (!op.posted[r]) missing.push_back(r);
                        }
                        return " (collective #" + std::to_string(seq) +
                               "; ranks not arrived: " + join_ints(missing, ", ") + ")";
                    });
    }

    void finish(std::unique_lock<std::mutex>& lock, uint64_t seq) {
        auto it = group_->ops.find(seq);
        if (++it->second.num_done == size()) group_->ops.erase(it);
    }

    // Waits on the group's condition variable until ready(); throws on this rank's deadline (aborting the
    // group) or when another rank aborted it.
    template <typename Ready, typename Detail>
    void wait_locked(std::unique_lock<std::mutex>& lock, const char* call, Ready ready, Detail detail) {
        const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(timeout_s_));
        while (!ready()) {
            throw_if_aborted(call);
            if (timeout_s_ <= 0.0) {
                group_->cv.wait(lock);
            } else if (group_->cv.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
                const Error error = comm_detail::timeout_error(rank_, call, timeout_s_, detail());
                group_->abort_reason = error.what();
                group_->cv.notify_all();
                throw error;
            }
        }
    }

    void throw_if_aborted(const char* call) {
        if (!group_->abort_reason.empty()) {
            throw Error(kExitDistributed, "rank " + std::to_string(rank_) + ": " + call +
                                              " failed: the group was aborted: " + group_->abort_reason);
        }
    }

    // Under the lock: marks the group dead and throws the reason.
    [[noreturn]] void abort_group(const std::string& reason) {
        group_->abort_reason = reason;
        group_->cv.notify_all();
        throw Error(kExitDistributed, reason);
    }

    void check_peer(int peer, const char* what) const {
        if (peer < 0 || peer >= size()) {
            throw Error(kExitDistributed, "rank " + std::to_string(rank_) + ": " + what + " " + std::to_string(peer) +
                                              " is outside [0, " + std::to_string(size()) + ")");
        }
    }
    void check_tag(int tag, const char* call) const {
        if (tag < 0) {
            throw Error(kExitDistributed,
                        "rank " + std::to_string(rank_) + ": " + call + ": tag " + std::to_string(tag) + " < 0");
        }
    }

    std::shared_ptr<GroupState> group_;
    const int rank_;
    uint64_t next_seq_ = 0;  // this rank's collective call count
    double timeout_s_ = 0.0;
};

LocalA2aRequest::~LocalA2aRequest() {
    if (!done_) wait_quietly(*this);
}

void LocalA2aRequest::wait() {
    if (done_) return;
    done_ = true;  // even on failure: the op was finished (or the group aborted), never wait twice
    comm_->complete_all_to_all_v(seq_, recv_, recv_bytes_, recv_offsets_, true);
}

bool LocalA2aRequest::test() {
    if (done_) return true;
    try {
        done_ = comm_->complete_all_to_all_v(seq_, recv_, recv_bytes_, recv_offsets_, false);
    } catch (...) {
        done_ = true;
        throw;
    }
    return done_;
}

LocalRecvRequest::~LocalRecvRequest() {
    if (!finished_) wait_quietly(*this);
}

void LocalRecvRequest::wait() {
    if (finished_) return;
    finished_ = true;  // after a failed wait the recv was withdrawn from the mailbox
    comm_->wait_recv(pending_, src_, tag_, true);
}

bool LocalRecvRequest::test() {
    if (finished_) return true;
    try {
        finished_ = comm_->wait_recv(pending_, src_, tag_, false);
    } catch (...) {
        finished_ = true;
        throw;
    }
    return finished_;
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_group(int num_ranks) {
    PROPHET_ASSERT_MSG(num_ranks >= 1, "a local group needs at least one rank");
    auto group = std::make_shared<GroupState>(num_ranks);
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int r = 0; r < num_ranks; ++r) comms.push_back(std::make_unique<LocalComm>(group, r));
    return comms;
}

}  // namespace prophet
