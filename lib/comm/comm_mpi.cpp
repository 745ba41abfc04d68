// comm_mpi.cpp: the MPI communicator (CPU ranks over OpenMPI), built only when CMake finds MPI.
//
// Run under `mpirun -np R prophet ...`. Every call goes through its non-blocking MPI form plus one wait: MPI_Wait
// when no timeout is set, else MPI_Test polling against the deadline, so a hung peer ends the job with exit 6
// instead of hanging it. Errors come back (MPI_ERRORS_RETURN) and become prophet::Error naming rank, host, the
// MPI call, MPI_Error_string and file:line. Sizes are bytes with MPI_BYTE and must fit MPI's int counts (checked,
// exit 4): the buffers of this project are far below 2 GiB. float/double sums are deterministic and identical on
// every rank (the standard does not promise that of MPI_Allreduce): a reduce-scatter by MPI_Ialltoallv, a sum
// in ascending rank order over each rank's chunk, then MPI_Iallgatherv; that is also the bandwidth of a ring.
// Threading: MPI_THREAD_MULTIPLE is requested; whatever level is provided is recorded (mpi_thread_level). No
// MPI call is made from a thread of this file's own (async ops progress inside wait()/test()), so FUNNELED or
// SERIALIZED is safe as long as one thread (for FUNNELED, the main thread) uses the communicators. The block-wise
// scheduler's communication thread and an emulated link's wire thread are second threads: prophet train checks for
// MPI_THREAD_MULTIPLE before it starts either.
// the C API only: mpi.h otherwise pulls in the deprecated C++ bindings, which MPI::MPI_C does not link
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/comm.h"
#include "comm/scratch_pool.h"
#include "core/error.h"

namespace prophet {
namespace {

struct MpiProcess {
    std::mutex mutex;
    int provided = -1;     // thread level from MPI_Init_thread / MPI_Query_thread
    int world_rank = -1;
    std::string host;
};
MpiProcess g_mpi;

std::string where() {
    return "rank " + (g_mpi.world_rank >= 0 ? std::to_string(g_mpi.world_rank) : std::string("?")) + " on host " +
           (g_mpi.host.empty() ? std::string("?") : g_mpi.host);
}

// context: what the failing call was doing, e.g. the operation an MPI_Wait completes ("" for none)
[[noreturn]] void throw_mpi_error(int code, const char* statement, const char* file, int line,
                                  const std::string& context = "") {
    char text[MPI_MAX_ERROR_STRING] = {0};
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error code %d", code);
    std::string call(statement);
    call = call.substr(0, call.find('('));
    std::string path(file);
    if (const size_t lib = path.rfind("lib/"); lib != std::string::npos) path = path.substr(lib);
    throw Error(kExitDistributed,
                where() + ": " + call + " failed: " + text + (context.empty() ? "" : " (" + context + ")") +
                    " at " + path + ":" + std::to_string(line));
}

}  // namespace
}  // namespace prophet

// Every MPI call: MPI_ERRORS_RETURN makes failures return here instead of aborting inside MPI.
#define PROPHET_MPI_CHECK_CONTEXT(statement, context)                                             \
    do {                                                                                           \
        const int prophet_mpi_rc_ = (statement);                                                   \
        if (prophet_mpi_rc_ != MPI_SUCCESS)                                                        \
            ::prophet::throw_mpi_error(prophet_mpi_rc_, #statement, __FILE__, __LINE__, (context)); \
    } while (0)
#define PROPHET_MPI_CHECK(statement) PROPHET_MPI_CHECK_CONTEXT(statement, "")

namespace prophet {
namespace {

using Clock = std::chrono::steady_clock;

// MPI counts and displacements are int.
int to_int(size_t value, const char* call) {
    if (value > static_cast<size_t>(INT_MAX)) {
        throw Error(kExitResource, where() + ": " + call + ": " + std::to_string(value) +
                                       " bytes exceed MPI's int count (2^31-1)\nHINT: split the buffer (fewer "
                                       "tokens per step or rank)");
    }
    return static_cast<int>(value);
}

class MpiComm;

// One MPI request plus what must outlive it (count arrays, scratch) and what runs after it completes.
class MpiRequest final : public CommRequest {
  public:
    // call: the Communicator method ("all_to_all_v"); operation: the MPI side ("MPI_Ialltoallv", peer, tag)
    MpiRequest(const MpiComm* comm, const char* call, std::string operation)
        : comm_(comm), call_(call), operation_(std::move(operation)) {}
    ~MpiRequest() override;
    void wait() override;
    bool test() override;

    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<int> counts;                          // send counts, send displs, recv counts, recv displs
    ScratchPool::Lease scratch;                       // receive buffer of a reduce-scatter (comm/scratch_pool.h)
    std::function<void(const MPI_Status&)> on_complete;
    bool cancel_on_timeout = false;                   // receives: cancel so MPI lets go of the buffer

  private:
    void complete(const MPI_Status& status) {
        if (on_complete) on_complete(status);
    }
    std::string context() const { return "completing " + std::string(call_) + ": " + operation_; }
    const MpiComm* comm_;
    const char* call_;
    std::string operation_;
    bool done_ = false;
};

class MpiComm final : public Communicator {
  public:
    MpiComm() {
        // NOTE: a private duplicate, so prophet's traffic never matches anyone else's on MPI_COMM_WORLD.
        PROPHET_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
        PROPHET_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
        PROPHET_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
        PROPHET_MPI_CHECK(MPI_Comm_size(comm_, &size_));
        int* tag_ub = nullptr;
        int found = 0;
        PROPHET_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found));
        tag_ub_ = found && tag_ub ? *tag_ub : 32767;  // 32767 is the least the standard allows
    }
    ~MpiComm() override {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&comm_);
    }

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    const char* name() const override { return "mpi"; }
    double timeout_s() const { return timeout_s_; }

    void barrier() override {
        auto request = make_request("barrier", "MPI_Ibarrier");
        PROPHET_MPI_CHECK(MPI_Ibarrier(comm_, &request->request));
        request->wait();
    }

    void all_reduce_sum(float* data, size_t count) override { sum_deterministic(data, count, "all_reduce_sum"); }
    void all_reduce_sum(double* data, size_t count) override { sum_deterministic(data, count, "all_reduce_sum"); }
    void all_reduce_sum(int64_t* data, size_t count) override {
        // integer sums are exact in any order, so MPI's own reduction gives identical bytes
        reduce_in_place(data, count, MPI_INT64_T, MPI_SUM, "all_reduce_sum");
    }
    void all_reduce_max(double* data, size_t count) override {
        reduce_in_place(data, count, MPI_DOUBLE, MPI_MAX, "all_reduce_max");
    }

    void all_gather(const void* send, size_t bytes, void* recv) override {
        const int n = to_int(bytes, "MPI_Iallgather");
        to_int(bytes * size_, "MPI_Iallgather");
        auto request = make_request("all_gather", "MPI_Iallgather");
        // the caller's own slot as send buffer is aliasing to MPI; it is what MPI_IN_PLACE means
        const bool in_place = send == static_cast<const std::byte*>(recv) + rank_ * bytes;
        PROPHET_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_,
                                         &request->request));
        request->wait();
    }

    void broadcast(void* data, size_t bytes, int root) override {
        check_peer(root, "broadcast root");
        auto request = make_request("broadcast", "MPI_Ibcast");
        PROPHET_MPI_CHECK(MPI_Ibcast(data, to_int(bytes, "MPI_Ibcast"), MPI_BYTE, root, comm_, &request->request));
        request->wait();
    }

    void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                      const size_t* recv_bytes, const size_t* recv_offsets) override {
        all_to_all_v_async(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets)->wait();
    }

    CommHandle all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets,
                                  void* recv, const size_t* recv_bytes, const size_t* recv_offsets) override {
        auto request = make_request("all_to_all_v", "MPI_Ialltoallv");
        const int n = size_;
        // NOTE: MPI-3 non-blocking collectives read the count arrays until completion, so they live in the request.
        request->counts.resize(4 * n);
        int* sc = request->counts.data();
        int *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
        for (int r = 0; r < n; ++r) {
            sc[r] = to_int(send_bytes[r], "MPI_Ialltoallv");
            sd[r] = to_int(send_offsets[r], "MPI_Ialltoallv");
            to_int(send_offsets[r] + send_bytes[r], "MPI_Ialltoallv");
            rc[r] = to_int(recv_bytes[r], "MPI_Ialltoallv");
            rd[r] = to_int(recv_offsets[r], "MPI_Ialltoallv");
            to_int(recv_offsets[r] + recv_bytes[r], "MPI_Ialltoallv");
        }
        PROPHET_MPI_CHECK(
            MPI_Ialltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, comm_, &request->request));
        return request;
    }

    CommHandle isend(const void* data, size_t bytes, int dst, int tag) override {
        check_peer(dst, "isend destination");
        check_tag(tag, "isend");
        auto request =
            make_request("isend", "MPI_Isend to rank " + std::to_string(dst) + ", tag " + std::to_string(tag));
        PROPHET_MPI_CHECK(
            MPI_Isend(data, to_int(bytes, "MPI_Isend"), MPI_BYTE, dst, tag, comm_, &request->request));
        return request;
    }

    CommHandle irecv(void* data, size_t bytes, int src, int tag) override {
        check_peer(src, "irecv source");
        check_tag(tag, "irecv");
        auto request = make_request("irecv", "MPI_Irecv from rank " + std::to_string(src) + ", tag " +
                                                 std::to_string(tag) + ", " + std::to_string(bytes) + " bytes");
        PROPHET_MPI_CHECK(MPI_Irecv(data, to_int(bytes, "MPI_Irecv"), MPI_BYTE, src, tag, comm_, &request->request));
        request->cancel_on_timeout = true;
        // a longer message fails in MPI (MPI_ERR_TRUNCATE); a shorter one is accepted by MPI but is a bug here
        request->on_complete = [this, bytes, src, tag](const MPI_Status& status) {
            int received = 0;
            PROPHET_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &received));
            if (static_cast<size_t>(received) != bytes) {
                throw Error(kExitDistributed, where() + ": irecv from rank " + std::to_string(src) + " tag " +
                                                  std::to_string(tag) + ": expected " + std::to_string(bytes) +
                                                  " bytes, got " + std::to_string(received) + " bytes");
            }
        };
        return request;
    }

    void set_timeout_s(double seconds) override {
        PROPHET_ASSERT_MSG(seconds >= 0.0, "comm timeout must be >= 0 s (0 = none)");
        timeout_s_ = seconds;
    }

  private:
    std::unique_ptr<MpiRequest> make_request(const char* call, const std::string& mpi_call) {
        return std::make_unique<MpiRequest>(this, call, mpi_call);
    }

    // data[0, count) reduced by MPI's own `op` across ranks, in place (only where any order gives the same bytes)
    template <typename T>
    void reduce_in_place(T* data, size_t count, MPI_Datatype type, MPI_Op op, const char* call) {
        auto request = make_request(call, "MPI_Iallreduce");
        to_int(count * sizeof(T), "MPI_Iallreduce");
        PROPHET_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, comm_, &request->request));
        request->wait();
    }

    // Deterministic sum, identical bytes on every rank: rank r owns elements [begin(r), begin(r+1)) of data;
    // MPI_Ialltoallv brings it every rank's copy of that chunk ([R][len] in rank order), it sums them
    // x_0 + x_1 + ... in ascending rank order (as LocalGroup does) and MPI_Iallgatherv returns the chunks.
    template <typename T>
    void sum_deterministic(T* data, size_t count, const char* call) {
        const int n = size_;
        to_int(count * sizeof(T), "MPI_Ialltoallv");
        if (n == 1 || count == 0) return;
        auto begin = [&](int r) { return count * static_cast<size_t>(r) / static_cast<size_t>(n); };
        const size_t my_len = begin(rank_ + 1) - begin(rank_);
        auto scatter = make_request(call, "MPI_Ialltoallv");
        scatter->counts.resize(4 * n);
        int* sc = scatter->counts.data();
        int *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
        for (int r = 0; r < n; ++r) {
            sc[r] = static_cast<int>((begin(r + 1) - begin(r)) * sizeof(T));
            sd[r] = static_cast<int>(begin(r) * sizeof(T));
            rc[r] = static_cast<int>(my_len * sizeof(T));
            rd[r] = static_cast<int>(r * my_len * sizeof(T));
        }
        // from the pool, not allocated per call: fresh pages every call page-fault on first touch
        scatter->scratch = comm_scratch_pool().acquire(n * my_len * sizeof(T));
        const T* chunks = scatter->scratch.as<const T>();  // [R][my_len]
        PROPHET_MPI_CHECK(MPI_Ialltoallv(data, sc, sd, MPI_BYTE, scatter->scratch.data(), rc, rd, MPI_BYTE, comm_,
                                         &scatter->request));
        scatter->wait();
        T* mine = data + begin(rank_);
        for (size_t k = 0; k < my_len; ++k) mine[k] = chunks[k];
        for (int r = 1; r < n; ++r) {
            const T* x = chunks + r * my_len;
            for (size_t k = 0; k < my_len; ++k) mine[k] += x[k];
        }
        auto gather = make_request(call, "MPI_Iallgatherv");
        gather->counts.assign(sc, sc + 2 * n);  // the chunk sizes and offsets again: [R] counts, [R] displs
        PROPHET_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, gather->counts.data(),
                                          gather->counts.data() + n, MPI_BYTE, comm_, &gather->request));
        gather->wait();
    }

    void check_peer(int peer, const char* what) const {
        if (peer < 0 || peer >= size_) {
            throw Error(kExitDistributed, where() + ": " + what + " " + std::to_string(peer) + " is outside [0, " +
                                              std::to_string(size_) + ")");
        }
    }
    void check_tag(int tag, const char* call) const {
        if (tag < 0 || tag > tag_ub_) {
            throw Error(kExitDistributed, where() + ": " + call + ": tag " + std::to_string(tag) + " outside [0, " +
                                              std::to_string(tag_ub_) + "] (MPI_TAG_UB)");
        }
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 1, tag_ub_ = 32767;
    double timeout_s_ = 0.0;
};

MpiRequest::~MpiRequest() {
    if (done_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) wait_quietly(*this);
}

void MpiRequest::wait() {
    if (done_) return;
    done_ = true;  // never wait twice, also after a failure
    MPI_Status status;
    const double timeout_s = comm_->timeout_s();
    if (timeout_s <= 0.0) {
        PROPHET_MPI_CHECK_CONTEXT(MPI_Wait(&request, &status), context());
    } else {
        const auto deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
        int flag = 0;
        for (int polls = 0;; ++polls) {
            PROPHET_MPI_CHECK_CONTEXT(MPI_Test(&request, &flag, &status), context());
            if (flag) break;
            if (Clock::now() > deadline) {
                if (cancel_on_timeout) {
                    MPI_Cancel(&request);
                    MPI_Wait(&request, MPI_STATUS_IGNORE);
                } else {
                    // NOTE: a timed-out collective or send stays with MPI (MPI_Request_free on a non-blocking
                    // collective is erroneous) and may still touch the arrays it was given, so those are leaked
                    // on purpose; the job is about to end with exit 6 anyway.
                    new std::vector<int>(std::move(counts));
                    new ScratchPool::Lease(std::move(scratch));
                }
                throw comm_detail::timeout_error(comm_->rank(), call_, timeout_s,
                                                 " on host " + g_mpi.host + " (" + operation_ + ")");
            }
            // Ranks may oversubscribe the cores, and other threads of this rank (a communication stream, an
            // emulated link's wire thread) need the CPU and MPI's lock: yield at first, then back off to sleeps of
            // up to 100 us (a wait that long is far from latency-bound).
            if (polls < 64)
                std::this_thread::yield();
            else
                std::this_thread::sleep_for(std::chrono::microseconds(std::min(100, (polls - 63) * 2)));
        }
    }
    complete(status);
}

bool MpiRequest::test() {
    if (done_) return true;
    MPI_Status status;
    int flag = 0;
    PROPHET_MPI_CHECK_CONTEXT(MPI_Test(&request, &flag, &status), context());
    if (!flag) return false;
    done_ = true;
    complete(status);
    return true;
}

const char* thread_level_name(int level) {
    switch (level) {
        case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
        case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
        case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
        case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
        default: return "";
    }
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(int* argc, char*** argv) {
    {
        std::lock_guard lock(g_mpi.mutex);
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (finalized) throw Error(kExitDistributed, where() + ": make_mpi_communicator after MPI_Finalize");
        if (!initialized) {
            int provided = MPI_THREAD_SINGLE;
            const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
            if (rc != MPI_SUCCESS) throw_mpi_error(rc, "MPI_Init_thread", __FILE__, __LINE__);
            g_mpi.provided = provided;
        } else {
            PROPHET_MPI_CHECK(MPI_Query_thread(&g_mpi.provided));
        }
        char host[256] = {0};
        if (gethostname(host, sizeof host - 1) == 0) g_mpi.host = host;
        PROPHET_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        PROPHET_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_mpi.world_rank));
    }
    return std::make_unique<MpiComm>();
}

void finalize_mpi() {
    std::lock_guard lock(g_mpi.mutex);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) PROPHET_MPI_CHECK(MPI_Finalize());
}

std::string mpi_thread_level() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized ? thread_level_name(g_mpi.provided) : "";
}

void abort_mpi(int exit_code) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace prophet
