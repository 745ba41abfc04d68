// cublas_api.cpp: opening cuBLAS on first use (cublas_api.h).
#include "cuda/cublas_api.h"

#include <dlfcn.h>

#include "core/error.h"
#include "cuda/check.h"

// the exported name of a cuBLAS function: cublas_v2.h maps some names to their _v2 symbols (cublasSgemm ->
// cublasSgemm_v2), so the argument is expanded before it is quoted
#define PROPHET_CUBLAS_QUOTE_(name) #name
#define PROPHET_CUBLAS_SYMBOL_(name) PROPHET_CUBLAS_QUOTE_(name)

namespace prophet::cuda {

namespace {

[[noreturn]] void cannot_load(const std::string& what, const std::string& why) {
    throw Error(kExitResource, "cuBLAS error" + error_rank_label() + ": " + what + ": " + why +
                                   "; fix: install the CUDA " + std::to_string(CUBLAS_VER_MAJOR) +
                                   " toolkit's cuBLAS, or put the directory holding " + cublas_library_name() +
                                   " on LD_LIBRARY_PATH");
}

void* open_library(const std::string& library) {
    dlerror();  // clear a message left by an earlier call
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = dlerror();
        cannot_load("cannot open " + library, why != nullptr ? why : "dlopen failed");
    }
    return handle;
}

template <typename Function>
void look_up(void* handle, const std::string& library, const char* symbol, Function* into) {
    dlerror();
    void* address = dlsym(handle, symbol);
    if (address == nullptr) {
        const char* why = dlerror();
        cannot_load(library + " has no " + symbol, why != nullptr ? why : "dlsym found nothing");
    }
    *into = reinterpret_cast<Function>(address);
}

}  // namespace

std::string cublas_library_name() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

CublasApi load_cublas(const std::string& library) {
    void* handle = open_library(library);
    CublasApi api;
#define PROPHET_CUBLAS_LOOK_UP_(field, function) look_up(handle, library, PROPHET_CUBLAS_SYMBOL_(function), &api.field)
    PROPHET_CUBLAS_LOOK_UP_(Create, cublasCreate);
    PROPHET_CUBLAS_LOOK_UP_(Destroy, cublasDestroy);
    PROPHET_CUBLAS_LOOK_UP_(SetStream, cublasSetStream);
    PROPHET_CUBLAS_LOOK_UP_(SetMathMode, cublasSetMathMode);
    PROPHET_CUBLAS_LOOK_UP_(Sgemm, cublasSgemm);
    PROPHET_CUBLAS_LOOK_UP_(SgemmBatched, cublasSgemmBatched);
    PROPHET_CUBLAS_LOOK_UP_(GemmEx, cublasGemmEx);
    PROPHET_CUBLAS_LOOK_UP_(GemmBatchedEx, cublasGemmBatchedEx);
    PROPHET_CUBLAS_LOOK_UP_(GemmGroupedBatchedEx, cublasGemmGroupedBatchedEx);
#undef PROPHET_CUBLAS_LOOK_UP_
    return api;
}

const CublasApi& cublas_api() {
    // the search path first (LD_LIBRARY_PATH overrides the build's toolkit), then the toolkit this build found
    // (where both fail, the search path's error is the one reported: its fix is the general one)
    static const CublasApi api = [] {
        try {
            return load_cublas(cublas_library_name());
        } catch (const Error& from_search_path) {
            try {
                return load_cublas(std::string(PROPHET_CUDA_LIBRARY_DIR) + "/" + cublas_library_name());
            } catch (const Error&) {
                throw from_search_path;
            }
        }
    }();
    return api;
}

}  // namespace prophet::cuda
