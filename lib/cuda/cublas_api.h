// cublas_api.h: cuBLAS, loaded on its first use instead of at program start.
//
// Linked as a needed library, libcublas (with the libcublasLt it needs) ran its initialisers in every process that
// linked the CUDA backend: about 0.35 s before main on the project's 2-core VM, in every `prophet` command and every
// test process, GPU or not (libcudart and libnccl cost nothing measurable). Now the library is opened (dlopen) the
// first time a cuda::Context is made, and only the entry points below are looked up.
//
//   PROPHET_CUBLAS_CHECK(cublas_api().Sgemm(handle, ...));   // as cublasSgemm(handle, ...)
//
// The first call opens libcublas.so.<the toolkit's major version> from the library search path (LD_LIBRARY_PATH,
// the binary's run path, the system's) or else from the toolkit directory this build was configured with.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace prophet::cuda {

// cublasGemmEx and cublasGemmBatchedEx also have C++ overloads (inline, taking a cudaDataType compute type): these
// are the exported C functions' types
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void* const[], cudaDataType, int, const void* const[],
                                               cudaDataType, int, const void*, void* const[], cudaDataType, int, int,
                                               cublasComputeType_t, cublasGemmAlgo_t);

// The cuBLAS entry points the backend calls (gemm.cpp, context.cpp), each with cuBLAS's own signature.
struct CublasApi {
    decltype(&cublasCreate) Create = nullptr;
    decltype(&cublasDestroy) Destroy = nullptr;
    decltype(&cublasSetStream) SetStream = nullptr;
    decltype(&cublasSetMathMode) SetMathMode = nullptr;
    decltype(&cublasSgemm) Sgemm = nullptr;
    decltype(&cublasSgemmBatched) SgemmBatched = nullptr;
    CublasGemmEx GemmEx = nullptr;
    CublasGemmBatchedEx GemmBatchedEx = nullptr;
    decltype(&cublasGemmGroupedBatchedEx) GemmGroupedBatchedEx = nullptr;
};

// The process's cuBLAS, opened on the first call (thread-safe); later calls return the same table. Throws
// Error(kExitResource) naming the library, the loader's message and the fix when it cannot be opened or lacks an
// entry point (the next call tries again).
const CublasApi& cublas_api();

// Opens `library` (a file name searched as dlopen searches, or a path) and looks every entry point up; the same
// errors. cublas_api() calls it with the default names; tests call it with others.
CublasApi load_cublas(const std::string& library);

// The file name cublas_api() opens first: "libcublas.so.<CUBLAS_VER_MAJOR>".
std::string cublas_library_name();

}  // namespace prophet::cuda
