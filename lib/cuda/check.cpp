// check.cpp: the error paths of check.h.
#include "cuda/check.h"

#include <string>

#include "core/error.h"

namespace prophet::cuda {

namespace {
int g_error_rank = -1;

std::string where(const char* call, const char* file, int line) {
    return error_rank_label() + ": " + call + " at " + file + ":" + std::to_string(line);
}
}  // namespace

void set_error_rank(int rank) { g_error_rank = rank; }
std::string error_rank_label() {
    return g_error_rank >= 0 ? " (rank " + std::to_string(g_error_rank) + ")" : std::string();
}

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
    // Reset the last-error slot: a non-sticky error (a failed cudaMalloc) would otherwise be reported again by
    // the next PROPHET_CUDA_CHECK_LAUNCH, against an innocent kernel. (Sticky errors stay: the context is lost.)
    cudaGetLastError();
    const int code = status == cudaErrorMemoryAllocation ? kExitResource : kExitRunFailed;
    throw Error(code, "CUDA error" + where(call, file, line) + ": " + cudaGetErrorString(status) + " (" +
                          cudaGetErrorName(status) + ")");
}

const char* cublas_status_name(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
        default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
    const int code = status == CUBLAS_STATUS_ALLOC_FAILED ? kExitResource : kExitRunFailed;
    throw Error(code, std::string("cuBLAS error") + where(call, file, line) + ": " + cublas_status_name(status));
}

}  // namespace prophet::cuda
