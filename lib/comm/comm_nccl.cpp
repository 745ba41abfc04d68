// comm_nccl.cpp: the NCCL communicator (comm_nccl.h). One NCCL communicator over all ranks, one CUDA stream for
// its work; host buffers are staged through device memory on that stream.
//
// Requests: every operation ends by recording a CUDA event after its NCCL calls; wait() polls that event
// (cudaEventQuery) against the timeout, checking ncclCommGetAsyncError meanwhile, so a dead peer ends the job
// with exit 6 instead of hanging it; then it copies staged results back to host buffers (a device-to-host
// cudaMemcpyAsync into pageable memory would block the caller when it is enqueued). isend/irecv are queued (see
// comm_nccl.h) and launched as one group by flush_p2p(), which every other entry point calls first, so
// operations reach NCCL in the order the caller issued them. Staging buffers come from the stream-ordered
// allocator (cudaMallocAsync/cudaFreeAsync on the communicator's stream): a plain cudaFree would synchronize the
// whole device, compute included.
#include "comm/comm_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace prophet {
namespace {

using Clock = std::chrono::steady_clock;

// An owned device allocation of raw bytes (staging for host buffers), ordered on one stream: freed after
// everything enqueued on that stream before the destructor runs.
class DeviceBytes {
  public:
    DeviceBytes(size_t bytes, cudaStream_t stream) : bytes_(bytes), stream_(stream) {
        if (bytes > 0) PROPHET_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream));
    }
    ~DeviceBytes() {
        if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
    }
    DeviceBytes(DeviceBytes&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_), stream_(o.stream_) {
        o.ptr_ = nullptr, o.bytes_ = 0;
    }
    DeviceBytes(const DeviceBytes&) = delete;
    DeviceBytes& operator=(const DeviceBytes&) = delete;
    DeviceBytes& operator=(DeviceBytes&&) = delete;
    std::byte* data() const { return static_cast<std::byte*>(ptr_); }

  private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
    cudaStream_t stream_ = nullptr;
};

bool is_device_pointer(const void* p) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
        cudaGetLastError();  // an unregistered host pointer may report an error on old drivers: not ours to keep
        return false;
    }
    return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

// What every rank tells the others before NCCL starts (all_gather over the bootstrap communicator).
struct RankInfo {
    char host[64];
    int num_devices;    // visible CUDA devices (0: none or no driver)
    int device;         // the device this rank would use, -1 if it has none
    int local_rank;     // index among the ranks on this host
    int local_size;     // ranks on this host
    unsigned char uuid[16];
};

std::string uuid_string(const unsigned char* u) {
    char s[48];  // "GPU-" + 32 hex digits + 4 dashes + NUL = 41
    std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                  u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return s;
}

class NcclComm;

// One operation in flight: its completion event, the staging it owns and the copies back to host buffers.
class NcclRequest final : public CommRequest {
  public:
    NcclRequest(NcclComm* comm, const char* call) : comm_(comm), call_(call) {}
    ~NcclRequest() override;
    void wait() override;
    bool test() override;

    struct CopyBack {
        void* host;
        const std::byte* device;
        size_t bytes;
    };
    std::vector<DeviceBytes> staging;
    std::vector<CopyBack> copy_back;
    cudaEvent_t event = nullptr;  // recorded once the operation is enqueued (queued p2p: at the flush)

  private:
    void finish();
    NcclComm* comm_;
    const char* call_;
    bool done_ = false;
};

class NcclComm final : public Communicator {
  public:
    explicit NcclComm(std::unique_ptr<Communicator> bootstrap);
    ~NcclComm() override;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    const char* name() const override { return "nccl"; }
    void barrier() override;

    // float/double: the contract's ascending-rank-order sum (NCCL's ring or tree order would differ in the last
    // bits from the other communicators); integer sums and max do not depend on the order: NCCL's own.
    void all_reduce_sum(float* data, size_t count) override { all_reduce_sum_ordered(data, count); }
    void all_reduce_sum(double* data, size_t count) override { all_reduce_sum_ordered(data, count); }
    void all_reduce_sum(int64_t* data, size_t count) override { all_reduce(data, count, ncclInt64, ncclSum, 8); }
    void all_reduce_max(double* data, size_t count) override { all_reduce(data, count, ncclFloat64, ncclMax, 8); }
    void all_gather(const void* send, size_t bytes, void* recv) override;
    void broadcast(void* data, size_t bytes, int root) override;
    void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                      const size_t* recv_bytes, const size_t* recv_offsets) override {
        all_to_all_v_async(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets)->wait();
    }
    CommHandle all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                                  const size_t* recv_bytes, const size_t* recv_offsets) override;
    CommHandle isend(const void* data, size_t bytes, int dst, int tag) override;
    CommHandle irecv(void* data, size_t bytes, int src, int tag) override;
    void set_timeout_s(double seconds) override {
        timeout_s_ = seconds;
        bootstrap_->set_timeout_s(seconds);
    }

    // ---- for NcclRequest ----
    void flush_p2p();
    // Polls the event until done, the timeout or an asynchronous NCCL error.
    void wait_event(cudaEvent_t event, const char* call);
    void forget(NcclRequest* request) { std::erase(queued_requests_, request); }
    // Device-to-host copies on the copy stream (non-blocking: it waits neither for the legacy default stream
    // nor for later work on the NCCL stream, only for these copies). Returns when they are done.
    void copy_to_host(const std::vector<NcclRequest::CopyBack>& copies);

  private:
    [[noreturn]] void throw_nccl(ncclResult_t result, const char* call, int line);
    void check(ncclResult_t result, const char* call, int line) {
        if (result != ncclSuccess && result != ncclInProgress) throw_nccl(result, call, line);
    }
    void require_live(const char* call) const {
        if (comm_ == nullptr)
            throw Error(kExitDistributed, where() + ": " + call + ": the NCCL communicator was aborted after an "
                                                               "earlier failure or timeout");
    }
    std::string where() const {
        return "rank " + std::to_string(rank_) + " on host " + host_ +
               (device_ >= 0 ? " (GPU " + std::to_string(device_) + ")" : std::string());
    }
    // Device view of `bytes` at p for an operation of `request`: p itself if it is device memory, else a staging
    // buffer (filled from p when `fill`, copied back to p after the operation when `back`).
    std::byte* stage(NcclRequest& request, const void* p, size_t bytes, bool fill, bool back);
    std::unique_ptr<NcclRequest> start(const char* call);
    // Records the request's event after everything enqueued so far on the stream.
    void record(NcclRequest& request);
    void all_reduce(void* data, size_t count, ncclDataType_t type, ncclRedOp_t op, size_t element_bytes);
    template <typename T>
    void all_reduce_sum_ordered(T* data, size_t count);

    std::unique_ptr<Communicator> bootstrap_;
    int rank_ = 0, size_ = 1, device_ = -1;
    std::string host_;
    double timeout_s_ = 0.0;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;       // NCCL operations and host-to-device staging
    cudaStream_t copy_stream_ = nullptr;  // device-to-host copies of finished operations

    // queued isend/irecv (launched together by flush_p2p)
    struct P2p {
        bool send;
        std::byte* device;
        size_t bytes;
        int peer;
        int tag;
    };
    std::vector<P2p> queued_ops_;
    std::vector<NcclRequest*> queued_requests_;
};

#define PROPHET_NCCL(call) check((call), #call, __LINE__)

// ---- NcclRequest ---------------------------------------------------------------------------------------------

NcclRequest::~NcclRequest() {
    if (!done_) wait_quietly(*this);
    comm_->forget(this);
    if (event != nullptr) cudaEventDestroy(event);
}

// The operation is complete on the device: copy staged results back to the caller's host buffers.
void NcclRequest::finish() { comm_->copy_to_host(copy_back); }

void NcclRequest::wait() {
    if (done_) return;
    comm_->flush_p2p();
    done_ = true;  // whatever happens below, do not wait twice
    comm_->wait_event(event, call_);
    finish();
}

bool NcclRequest::test() {
    if (done_) return true;
    comm_->flush_p2p();
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaErrorNotReady) return false;
    PROPHET_CUDA_CHECK(status);
    done_ = true;
    finish();
    return true;
}

// ---- NcclComm ------------------------------------------------------------------------------------------------

// This rank's RankInfo: its host (hostname, 63 chars at most), local rank and size among the ranks on that host
// (all_gather of the host names over the bootstrap), and its device (CONVENTIONS.md §3): device 0 when one is
// visible (CUDA_VISIBLE_DEVICES may give each rank its own; check_rank_devices catches two ranks on one GPU), else
// the local rank's, if there are enough. reason: why no device is visible.
RankInfo local_rank_info(Communicator& bootstrap, const char* host, const char** reason) {
    const int rank = bootstrap.rank(), size = bootstrap.size();
    std::vector<char> hosts(static_cast<size_t>(size) * 64);
    bootstrap.all_gather(host, 64, hosts.data());
    RankInfo mine{};
    std::memcpy(mine.host, host, sizeof mine.host);
    for (int r = 0; r < size; r++) {
        if (std::strncmp(&hosts[static_cast<size_t>(r) * 64], host, 64) != 0) continue;
        if (r < rank) mine.local_rank++;
        mine.local_size++;
    }
    mine.num_devices = cuda::device_count(reason);
    mine.device = -1;
    if (mine.num_devices == 1) mine.device = 0;
    if (mine.num_devices > 1 && mine.local_size <= mine.num_devices) mine.device = mine.local_rank;
    if (mine.device >= 0) {
        PROPHET_CUDA_CHECK(cudaSetDevice(mine.device));
        cudaDeviceProp prop{};
        PROPHET_CUDA_CHECK(cudaGetDeviceProperties(&prop, mine.device));
        std::memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
    }
    return mine;
}

// Every rank checks every rank, so all of them refuse alike (no rank left waiting in ncclCommInitRank): each needs
// a device, and no two may share one. reason: why this rank (`rank`) sees none.
void check_rank_devices(const std::vector<RankInfo>& all, int rank, const char* reason) {
    for (size_t r = 0; r < all.size(); r++) {
        const RankInfo& a = all[r];
        const std::string who = "rank " + std::to_string(r) + " on host " + std::string(a.host, strnlen(a.host, 64));
        if (a.num_devices == 0)
            throw Error(kExitConfig,
                        "NCCL communicator: " + who + " sees no CUDA device" +
                            (static_cast<int>(r) == rank ? std::string(" (") + reason + ")" : std::string()) +
                            "; fix: run on GPU hosts, or use the MPI communicator");
        if (a.device < 0)
            throw Error(kExitConfig, "NCCL communicator: " + who + " is one of " + std::to_string(a.local_size) +
                                         " ranks on that host but it has " + std::to_string(a.num_devices) +
                                         " visible GPUs: NCCL needs one rank per GPU (two ranks on one GPU are "
                                         "refused; NCCL may hang); fix: at most " +
                                         std::to_string(a.num_devices) +
                                         " ranks per host, or the MPI communicator for ranks that share a GPU");
        for (size_t s = 0; s < r; s++) {
            if (std::memcmp(all[s].uuid, a.uuid, sizeof a.uuid) == 0)
                throw Error(kExitConfig, "NCCL communicator: ranks " + std::to_string(s) + " and " +
                                             std::to_string(r) + " would share GPU " + uuid_string(a.uuid) +
                                             ": NCCL needs one rank per GPU (two ranks on one GPU are refused; "
                                             "NCCL may hang); fix: one GPU per rank (CUDA_VISIBLE_DEVICES), or the "
                                             "MPI communicator for ranks that share a GPU");
        }
    }
}

NcclComm::NcclComm(std::unique_ptr<Communicator> bootstrap) : bootstrap_(std::move(bootstrap)) {
    rank_ = bootstrap_->rank();
    size_ = bootstrap_->size();
    cuda::set_error_rank(rank_);
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    host_ = host;

    // 1. hosts -> local rank and local size; 2. this rank's device
    const char* reason = "no CUDA device";
    const RankInfo mine = local_rank_info(*bootstrap_, host, &reason);
    // 3. every rank checks every rank
    std::vector<RankInfo> all(static_cast<size_t>(size_));
    bootstrap_->all_gather(&mine, sizeof mine, all.data());
    check_rank_devices(all, rank_, reason);
    device_ = mine.device;

    // 4. NCCL: rank 0's unique id to everyone over the bootstrap, then the communicator
    ncclUniqueId id{};
    if (rank_ == 0) PROPHET_NCCL(ncclGetUniqueId(&id));
    bootstrap_->broadcast(&id, sizeof id, 0);
    PROPHET_CUDA_CHECK(cudaStreamCreate(&stream_));
    PROPHET_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    PROPHET_NCCL(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclComm::~NcclComm() {
    // best effort, no throwing from a destructor
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
}

void NcclComm::throw_nccl(ncclResult_t result, const char* call, int line) {
    std::string text = ncclGetErrorString(result);
    if (comm_ != nullptr) {
        const char* last = ncclGetLastError(comm_);
        if (last != nullptr && *last) text += ": " + std::string(last);
    }
    std::string name(call);
    name = name.substr(0, name.find('('));
    throw Error(kExitDistributed, where() + ": " + name + " failed: " + text + " at lib/comm/comm_nccl.cpp:" +
                                      std::to_string(line));
}

void NcclComm::wait_event(cudaEvent_t event, const char* call) {
    require_live(call);
    const auto start = Clock::now();
    for (;;) {
        const cudaError_t status = cudaEventQuery(event);
        if (status == cudaSuccess) return;
        if (status != cudaErrorNotReady) PROPHET_CUDA_CHECK(status);
        ncclResult_t async = ncclSuccess;
        PROPHET_NCCL(ncclCommGetAsyncError(comm_, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
            const ncclResult_t failed = async;
            try {
                throw_nccl(failed, "ncclCommGetAsyncError", __LINE__);
            } catch (...) {
                ncclCommAbort(comm_);
                comm_ = nullptr;
                throw;
            }
        }
        const double waited = std::chrono::duration<double>(Clock::now() - start).count();
        if (timeout_s_ > 0 && waited > timeout_s_) {
            ncclCommAbort(comm_);  // unblocks the stream; this communicator is unusable from here on
            comm_ = nullptr;
            throw comm_detail::timeout_error(rank_, call, timeout_s_, " (NCCL communicator aborted)");
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

std::byte* NcclComm::stage(NcclRequest& request, const void* p, size_t bytes, bool fill, bool back) {
    if (bytes == 0 || is_device_pointer(p)) return static_cast<std::byte*>(const_cast<void*>(p));
    request.staging.emplace_back(bytes, stream_);
    std::byte* device = request.staging.back().data();
    if (fill) PROPHET_CUDA_CHECK(cudaMemcpyAsync(device, p, bytes, cudaMemcpyHostToDevice, stream_));
    if (back) request.copy_back.push_back({const_cast<void*>(p), device, bytes});
    return device;
}

std::unique_ptr<NcclRequest> NcclComm::start(const char* call) {
    require_live(call);
    flush_p2p();
    auto request = std::make_unique<NcclRequest>(this, call);
    PROPHET_CUDA_CHECK(cudaEventCreateWithFlags(&request->event, cudaEventDisableTiming));
    return request;
}

void NcclComm::copy_to_host(const std::vector<NcclRequest::CopyBack>& copies) {
    if (copies.empty()) return;
    for (const auto& c : copies)
        PROPHET_CUDA_CHECK(cudaMemcpyAsync(c.host, c.device, c.bytes, cudaMemcpyDeviceToHost, copy_stream_));
    PROPHET_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
}

void NcclComm::record(NcclRequest& request) { PROPHET_CUDA_CHECK(cudaEventRecord(request.event, stream_)); }

void NcclComm::flush_p2p() {
    if (queued_ops_.empty() && queued_requests_.empty()) return;
    require_live("isend/irecv");
    // NCCL matches a pair's messages in issue order and knows no tags: issue each (peer, direction) in tag order,
    // post order within a tag (MPI's non-overtaking rule), so sender and receiver agree whatever order the tags
    // were posted in, as long as both flush a pair's messages in the same batch (post all, then wait).
    std::stable_sort(queued_ops_.begin(), queued_ops_.end(), [](const P2p& a, const P2p& b) {
        return std::tie(a.peer, a.send, a.tag) < std::tie(b.peer, b.send, b.tag);
    });
    if (!queued_ops_.empty()) PROPHET_NCCL(ncclGroupStart());
    for (const P2p& op : queued_ops_) {
        if (op.send)
            PROPHET_NCCL(ncclSend(op.device, op.bytes, ncclInt8, op.peer, comm_, stream_));
        else
            PROPHET_NCCL(ncclRecv(op.device, op.bytes, ncclInt8, op.peer, comm_, stream_));
    }
    if (!queued_ops_.empty()) PROPHET_NCCL(ncclGroupEnd());
    queued_ops_.clear();
    std::vector<NcclRequest*> requests;
    requests.swap(queued_requests_);
    for (NcclRequest* r : requests) record(*r);
}

void NcclComm::barrier() {
    require_live("barrier");
    flush_p2p();
    PROPHET_CUDA_CHECK(cudaStreamSynchronize(stream_));
    bootstrap_->barrier();
}

void NcclComm::all_reduce(void* data, size_t count, ncclDataType_t type, ncclRedOp_t op, size_t element_bytes) {
    auto request = start("all_reduce");
    std::byte* d = stage(*request, data, count * element_bytes, true, true);
    PROPHET_NCCL(ncclAllReduce(d, d, count, type, op, comm_, stream_));
    record(*request);
    request->wait();
}

void NcclComm::all_gather(const void* send, size_t bytes, void* recv) {
    auto request = start("all_gather");
    std::byte* s = stage(*request, send, bytes, true, false);
    std::byte* r = stage(*request, recv, bytes * static_cast<size_t>(size_), false, true);
    PROPHET_NCCL(ncclAllGather(s, r, bytes, ncclInt8, comm_, stream_));
    record(*request);
    request->wait();
}

void NcclComm::broadcast(void* data, size_t bytes, int root) {
    PROPHET_ASSERT_MSG(root >= 0 && root < size_, where() + ": broadcast: root outside the communicator");
    auto request = start("broadcast");
    std::byte* d = stage(*request, data, bytes, rank_ == root, rank_ != root);
    PROPHET_NCCL(ncclBroadcast(d, d, bytes, ncclInt8, root, comm_, stream_));
    record(*request);
    request->wait();
}

// Reduce-scatter by all_to_all_v (rank r gets chunk r of every rank), the sum of each chunk in ascending rank
// order, then all_gather: the MPI communicator's scheme, so every communicator gives the same bytes. On host
// copies (a device buffer is read back first).
template <typename T>
void NcclComm::all_reduce_sum_ordered(T* data, size_t count) {
    require_live("all_reduce_sum");
    const bool on_device = count > 0 && is_device_pointer(data);
    std::vector<T> x(count);
    if (on_device) copy_to_host({{x.data(), reinterpret_cast<const std::byte*>(data), count * sizeof(T)}});
    else if (count > 0) std::memcpy(x.data(), data, count * sizeof(T));
    const size_t n = static_cast<size_t>(size_);
    auto begin = [&](size_t r) { return count * r / n; };  // chunk r = [begin(r), begin(r+1))
    const size_t my_len = begin(rank_ + 1) - begin(rank_);
    std::vector<size_t> send_bytes(n), send_off(n), recv_bytes(n), recv_off(n);
    for (size_t r = 0; r < n; r++) {
        send_bytes[r] = (begin(r + 1) - begin(r)) * sizeof(T);
        send_off[r] = begin(r) * sizeof(T);
        recv_bytes[r] = my_len * sizeof(T);
        recv_off[r] = r * my_len * sizeof(T);
    }
    std::vector<T> parts(my_len * n);  // [n][my_len]: rank s's values of my chunk
    all_to_all_v(x.data(), send_bytes.data(), send_off.data(), parts.data(), recv_bytes.data(), recv_off.data());
    const size_t max_len = (count + n - 1) / n;
    std::vector<T> mine(max_len, static_cast<T>(0));
    for (size_t k = 0; k < my_len; k++) mine[k] = parts[k];
    for (size_t s = 1; s < n; s++)
        for (size_t k = 0; k < my_len; k++) mine[k] += parts[s * my_len + k];
    std::vector<T> all(max_len * n);
    all_gather(mine.data(), max_len * sizeof(T), all.data());
    for (size_t r = 0; r < n; r++) std::copy_n(all.data() + r * max_len, begin(r + 1) - begin(r), x.data() + begin(r));
    if (on_device) {
        PROPHET_CUDA_CHECK(cudaMemcpyAsync(data, x.data(), count * sizeof(T), cudaMemcpyHostToDevice, copy_stream_));
        PROPHET_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
    } else if (count > 0) std::memcpy(data, x.data(), count * sizeof(T));
}

CommHandle NcclComm::all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets,
                                        void* recv, const size_t* recv_bytes, const size_t* recv_offsets) {
    auto request = start("all_to_all_v");
    // one staging buffer per side, covering every peer's span
    size_t send_extent = 0, recv_extent = 0;
    for (int r = 0; r < size_; r++) {
        if (send_bytes[r] > 0) send_extent = std::max(send_extent, send_offsets[r] + send_bytes[r]);
        if (recv_bytes[r] > 0) recv_extent = std::max(recv_extent, recv_offsets[r] + recv_bytes[r]);
    }
    std::byte* s = send_extent > 0 ? stage(*request, send, send_extent, true, false) : nullptr;
    std::byte* d = recv_extent > 0 ? stage(*request, recv, recv_extent, false, true) : nullptr;
    // grouped send/recv: all peers at once, so no pair waits on another
    PROPHET_NCCL(ncclGroupStart());
    for (int r = 0; r < size_; r++) {
        if (send_bytes[r] > 0) PROPHET_NCCL(ncclSend(s + send_offsets[r], send_bytes[r], ncclInt8, r, comm_, stream_));
        if (recv_bytes[r] > 0) PROPHET_NCCL(ncclRecv(d + recv_offsets[r], recv_bytes[r], ncclInt8, r, comm_, stream_));
    }
    PROPHET_NCCL(ncclGroupEnd());
    record(*request);
    return request;
}

CommHandle NcclComm::isend(const void* data, size_t bytes, int dst, int tag) {
    PROPHET_ASSERT_MSG(dst >= 0 && dst < size_, where() + ": isend: destination outside the communicator");
    require_live("isend");
    auto request = std::make_unique<NcclRequest>(this, "isend");
    PROPHET_CUDA_CHECK(cudaEventCreateWithFlags(&request->event, cudaEventDisableTiming));
    std::byte* d = stage(*request, data, bytes, true, false);
    if (bytes > 0) queued_ops_.push_back({true, d, bytes, dst, tag});
    queued_requests_.push_back(request.get());
    return request;
}

CommHandle NcclComm::irecv(void* data, size_t bytes, int src, int tag) {
    PROPHET_ASSERT_MSG(src >= 0 && src < size_, where() + ": irecv: source outside the communicator");
    require_live("irecv");
    auto request = std::make_unique<NcclRequest>(this, "irecv");
    PROPHET_CUDA_CHECK(cudaEventCreateWithFlags(&request->event, cudaEventDisableTiming));
    std::byte* d = stage(*request, data, bytes, false, true);
    if (bytes > 0) queued_ops_.push_back({false, d, bytes, src, tag});
    queued_requests_.push_back(request.get());
    return request;
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap) {
    PROPHET_ASSERT_MSG(bootstrap != nullptr, "make_nccl_communicator: needs a bootstrap communicator");
    return std::make_unique<NcclComm>(std::move(bootstrap));
}

}  // namespace prophet
