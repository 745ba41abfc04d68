// context.cpp: Context, DeviceBuffer, device_count (context.h).
#include "cuda/context.h"

#include <string>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/cublas_api.h"

namespace prophet::cuda {

int device_count(const char** reason) {
    int n = 0;
    const cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess) {
        if (reason != nullptr) *reason = cudaGetErrorString(status);
        cudaGetLastError();  // reset the last-error slot so a later PROPHET_CUDA_CHECK_LAUNCH does not see it
        return 0;
    }
    return n;
}

// ---- DeviceBuffer ------------------------------------------------------------------------------------------

template <typename T>
DeviceBuffer<T>& DeviceBuffer<T>::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        release();
        ptr_ = o.ptr_;
        n_ = o.n_;
        o.ptr_ = nullptr;
        o.n_ = 0;
    }
    return *this;
}

template <typename T>
void DeviceBuffer<T>::resize(size_t n) {
    if (n == n_) return;
    release();
    if (n > 0) {
        void* p = nullptr;
        PROPHET_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
        ptr_ = static_cast<T*>(p);
    }
    n_ = n;
}

template <typename T>
void DeviceBuffer<T>::release() {
    if (ptr_ != nullptr) cudaFree(ptr_);  // no check: runs in destructors; a failed free leaks, nothing worse
    ptr_ = nullptr;
    n_ = 0;
}

template <typename T>
void DeviceBuffer<T>::upload(const std::vector<T>& host) {
    PROPHET_ASSERT_MSG(host.size() == n_, "DeviceBuffer::upload: host size differs from the device buffer's");
    if (n_ > 0) PROPHET_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T>
std::vector<T> DeviceBuffer<T>::download() const {
    std::vector<T> host(n_);
    if (n_ > 0) PROPHET_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
}

template class DeviceBuffer<float>;
template class DeviceBuffer<double>;
template class DeviceBuffer<int>;

// ---- Context -----------------------------------------------------------------------------------------------

Context::Context(int device, GemmPrecision precision) : device_(device), precision_(precision) {
    PROPHET_CUDA_CHECK(cudaSetDevice(device));
    // A blocking stream: it synchronizes with the legacy default stream, so the plain cudaMemcpy of
    // DeviceBuffer::upload/download waits for this stream's kernels and they wait for it (a non-blocking stream
    // would let a download read a buffer a kernel is still writing).
    PROPHET_CUDA_CHECK(cudaStreamCreate(&stream_));
    PROPHET_CUBLAS_CHECK(cublas_api().Create(&cublas_));
    PROPHET_CUBLAS_CHECK(cublas_api().SetStream(cublas_, stream_));
    PROPHET_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&error_flags_), sizeof(unsigned)));
    PROPHET_CUDA_CHECK(cudaMemsetAsync(error_flags_, 0, sizeof(unsigned), stream_));
    // bf16 is chosen per call (the compute type of cublasGemmEx), TF32 by the handle's math mode
    PROPHET_CUBLAS_CHECK(cublas_api().SetMathMode(
        cublas_, precision == GemmPrecision::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

Context::~Context() {
    // best effort, no throwing from a destructor
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (workspace_ != nullptr) cudaFree(workspace_);
    if (error_flags_ != nullptr) cudaFree(error_flags_);
    if (cublas_ != nullptr) cublas_api().Destroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Context::synchronize() {
    PROPHET_CUDA_CHECK(cudaStreamSynchronize(stream_));
    unsigned flags = 0;
    PROPHET_CUDA_CHECK(cudaMemcpy(&flags, error_flags_, sizeof flags, cudaMemcpyDeviceToHost));
    if (flags == 0) return;
    PROPHET_CUDA_CHECK(cudaMemset(error_flags_, 0, sizeof(unsigned)));
    std::string what;
    if (flags & kBadTokenId) what += " a token id outside [0,V) (encoder_forward/backward);";
    if (flags & kBadTargetId) what += " a target id outside [0,V) (crossentropy_tied_forward/backward);";
    if (flags & kBadExpertId) what += " an expert id outside [-1,E) (moe_layout);";
    throw Error(kExitRunFailed, "GPU op input error" + error_rank_label() + ": a kernel skipped" + what +
                                    " the ids must be checked on the host first");
}

void* Context::workspace(size_t bytes) {
    if (bytes > workspace_bytes_) {
        PROPHET_CUDA_CHECK(cudaStreamSynchronize(stream_));  // enqueued work may still use the old block
        if (workspace_ != nullptr) PROPHET_CUDA_CHECK(cudaFree(workspace_));
        workspace_ = nullptr;
        workspace_bytes_ = 0;
        PROPHET_CUDA_CHECK(cudaMalloc(&workspace_, bytes));
        workspace_bytes_ = bytes;
    }
    return workspace_;
}

}  // namespace prophet::cuda
