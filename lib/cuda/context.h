// context.h: what every GPU op runs on (one stream, one cuBLAS handle, a scratch workspace) and an owning
// device buffer.
//
// GEMM precision (GemmPrecision, train.precision = bf16 in a run): kFp32 (the default, full fp32 products, the
// CPU oracle's), kTf32 (tensor-core TF32) or kBf16: cuBLAS runs every GEMM with CUBLAS_COMPUTE_32F_FAST_16BF, so
// the tensor cores multiply bf16-rounded operands and accumulate in fp32, while every buffer (parameters = the
// fp32 master weights, gradients, AdamW state, activations) stays fp32 in memory.
//
// Every op in ops.h takes a Context& and enqueues its work on ctx.stream() without synchronizing; results are
// visible to the host after ctx.synchronize() (or a DeviceBuffer::download: the stream is a blocking one). The
// cuBLAS handle is bound to the same stream, so library and hand-written kernels are ordered. fp32 GEMMs run in
// CUBLAS_DEFAULT_MATH (full fp32 products, no TF32) unless the precision is kTf32, so the GPU matches the CPU oracle.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace prophet::cuda {

// Number of CUDA devices, 0 when there is none or no driver (never throws: the GPU tests skip on 0).
// reason (optional) receives cudaGetDeviceCount's error string when the count is 0 because of an error.
int device_count(const char** reason = nullptr);

// Owning device allocation of n elements of T (cudaMalloc / cudaFree). Move-only.
template <typename T>
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t n) { resize(n); }
    ~DeviceBuffer() { release(); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), n_(o.n_) { o.ptr_ = nullptr, o.n_ = 0; }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

    // Drops the old contents; no-op when n equals the current size.
    void resize(size_t n);
    T* data() { return ptr_; }
    const T* data() const { return ptr_; }
    size_t size() const { return n_; }

    // Synchronous copies of the whole buffer (host vector size must equal size(), or it is resized on download).
    void upload(const std::vector<T>& host);
    std::vector<T> download() const;

  private:
    void release();
    T* ptr_ = nullptr;
    size_t n_ = 0;
};

// Bits a kernel raises in Context::error_flags() when a device array holds an id it must skip (ops.h).
enum DeviceErrorBit : unsigned {
    kBadTokenId = 1u,   // encoder: token outside [0,V)
    kBadTargetId = 2u,  // cross-entropy: target outside [0,V)
    kBadExpertId = 4u,  // MoE layout: expert outside [-1,E)
};

enum class GemmPrecision { kFp32, kTf32, kBf16 };

class Context {
  public:
    // device: the CUDA device this context uses (cudaSetDevice is called here and must stay set on this thread).
    explicit Context(int device = 0, GemmPrecision precision = GemmPrecision::kFp32);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    cudaStream_t stream() const { return stream_; }
    cublasHandle_t cublas() const { return cublas_; }
    int device() const { return device_; }
    GemmPrecision precision() const { return precision_; }
    // Whether gemm_grouped (ops.h) runs as one cublasGemmGroupedBatchedEx call (true until cuBLAS answered
    // CUBLAS_STATUS_NOT_SUPPORTED for this precision once; from then on it loops over the GEMMs).
    bool grouped_gemm_native() const { return grouped_native_; }
    void set_grouped_gemm_native(bool on) { grouped_native_ = on; }
    // Waits for the stream, then throws prophet::Error (exit 1) naming the ids if a kernel raised an error bit
    // since the last call (the flags are cleared first, so the context stays usable after the throw).
    void synchronize();
    unsigned* error_flags() { return error_flags_; }  // device word, DeviceErrorBit bits

    // Scratch of at least `bytes`, valid until the next workspace() call. Growing synchronizes the stream first
    // (work already enqueued may still read the old block). 256-byte aligned (cudaMalloc).
    void* workspace(size_t bytes);

  private:
    int device_ = 0;
    GemmPrecision precision_ = GemmPrecision::kFp32;
    bool grouped_native_ = true;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    unsigned* error_flags_ = nullptr;
    void* workspace_ = nullptr;
    size_t workspace_bytes_ = 0;
};

}  // namespace prophet::cuda
