// check.h: every CUDA runtime and cuBLAS call goes through one of these, so a failure becomes a prophet::Error
// that names the call, the rank (when the caller has set it) and the source line.
//
//   PROPHET_CUDA_CHECK(cudaMalloc(&p, bytes));        -> "CUDA error (rank 1): cudaMalloc(&p, bytes) at
//                                                          lib/cuda/context.cpp:40: out of memory
//                                                          (cudaErrorMemoryAllocation)"
//   PROPHET_CUBLAS_CHECK(cublasSgemm(...));
//   PROPHET_CUDA_CHECK_LAUNCH();                        after every kernel launch (cudaGetLastError)
//
// Exit codes (core/error.h): out-of-memory is kExitResource (4), every other failure kExitRunFailed (1).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

namespace prophet::cuda {

// The rank printed in error messages of this process (-1: not known, omitted). Set once after MPI_Init.
void set_error_rank(int rank);
// " (rank N)" for the rank set above, "" when none is: what every error message of the backend puts after its kind
std::string error_rank_label();

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

// The readable name of a cuBLAS status ("CUBLAS_STATUS_NOT_SUPPORTED").
const char* cublas_status_name(cublasStatus_t status);

}  // namespace prophet::cuda

#define PROPHET_CUDA_CHECK(call)                                                                       \
    do {                                                                                               \
        const cudaError_t prophet_cuda_status_ = (call);                                               \
        if (prophet_cuda_status_ != cudaSuccess)                                                       \
            ::prophet::cuda::throw_cuda_error(prophet_cuda_status_, #call, __FILE__, __LINE__);        \
    } while (0)

#define PROPHET_CUBLAS_CHECK(call)                                                                     \
    do {                                                                                               \
        const cublasStatus_t prophet_cublas_status_ = (call);                                          \
        if (prophet_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                           \
            ::prophet::cuda::throw_cublas_error(prophet_cublas_status_, #call, __FILE__, __LINE__);    \
    } while (0)

// A launch reports bad configurations (grid too large, too much shared memory) through cudaGetLastError.
#define PROPHET_CUDA_CHECK_LAUNCH() PROPHET_CUDA_CHECK(cudaGetLastError())
