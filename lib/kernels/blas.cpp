// blas.cpp: OpenBLAS kernel-family choice (blas_setup / blas_config) and the gemm() wrapper with its counters.
// See blas.h for why the choice needs a re-exec.
#include "kernels/blas.h"

#include <cblas.h>  // OpenBLAS's: also declares openblas_get_config / _corename / _set_num_threads

#include <cctype>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

#include "core/error.h"
#include "core/timer.h"

namespace prophet {

namespace {

// Why the core in use was chosen; filled by blas_setup, read by blas_config.
std::string g_core_reason = "OpenBLAS detection (blas_setup not called)";

// Set by blas_setup just before the re-exec so the new process can say why its core was forced. Read and
// removed again by the new process, so child processes do not inherit a stale reason.
constexpr const char* kReexecMarker = "PROPHET_BLAS_REEXEC_FROM";

GemmStats g_gemm_stats;
bool g_gemm_timing = false;

bool name_equals(const char* a, const char* b) {
    for (; *a && *b; ++a, ++b) {
        if (std::tolower(static_cast<unsigned char>(*a)) != std::tolower(static_cast<unsigned char>(*b))) return false;
    }
    return *a == *b;
}

const char* cpu_description(const CpuFeatures& cpu) {
    if (cpu.avx512_bf16) return "avx512+bf16";
    if (cpu.avx512) return "avx512";
    if (cpu.avx2_fma) return "avx2+fma";
    return "no avx2";
}

}  // namespace

CpuFeatures cpu_features() {
    CpuFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    // libgcc reports avx512* only when the OS also saves the zmm/opmask state (XCR0), which is what matters.
    cpu.avx512 = cpu.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
    cpu.avx512_bf16 = cpu.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
    return cpu;
}

int blas_core_tier(const char* core_name) {
    if (core_name == nullptr) return 0;
    for (const char* name : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
        if (name_equals(core_name, name)) return 2;
    }
    for (const char* name : {"Haswell", "Zen"}) {
        if (name_equals(core_name, name)) return 1;
    }
    return 0;
}

const char* blas_choose_coretype(const char* detected_core, const CpuFeatures& cpu) {
    const int cpu_tier = cpu.avx512 ? 2 : (cpu.avx2_fma ? 1 : 0);
    if (cpu_tier <= blas_core_tier(detected_core)) return nullptr;
    if (cpu_tier == 2) return cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
    return "Haswell";
}

void blas_set_num_threads(int num_threads) {
    PROPHET_ASSERT(num_threads >= 1);
    openblas_set_num_threads(num_threads);
}

int blas_num_threads() { return openblas_get_num_threads(); }

void blas_setup(int argc, char** argv, int num_threads) {
    const CpuFeatures cpu = cpu_features();
    const char* detected = openblas_get_corename();
    const char* forced_from = std::getenv(kReexecMarker);
    if (forced_from != nullptr) {
        // We are the re-exec'd process: the core in use is the one we asked for.
        g_core_reason = std::string("forced by blas_setup: OpenBLAS detected ") + forced_from + ", cpu has " +
                        cpu_description(cpu);
        unsetenv(kReexecMarker);
    } else if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
        g_core_reason = std::string("OPENBLAS_CORETYPE=") + std::getenv("OPENBLAS_CORETYPE") + " from the environment";
    } else if (const char* better = blas_choose_coretype(detected, cpu)) {
        if (argc >= 1 && argv != nullptr && argv[0] != nullptr) {
            // Same argv, same pid (mpirun keeps tracking us), new environment; OpenBLAS reads it on load.
            setenv("OPENBLAS_CORETYPE", better, 1);
            setenv(kReexecMarker, detected, 1);
            std::fflush(nullptr);  // exec discards unflushed stdio buffers
            execv("/proc/self/exe", argv);
            // execv returns only on failure: carry on with the detected core and say so.
            const int err = errno;
            unsetenv("OPENBLAS_CORETYPE");
            unsetenv(kReexecMarker);
            g_core_reason =
                std::string("OpenBLAS detection; re-exec to use ") + better + " failed: " + std::strerror(err);
        } else {
            g_core_reason =
                std::string("OpenBLAS detection; ") + better + " would be faster but blas_setup got no argv";
        }
    } else {
        g_core_reason = std::string("OpenBLAS detection kept (cpu has ") + cpu_description(cpu) + ")";
    }
    if (num_threads > 0) blas_set_num_threads(num_threads);
}

std::string blas_config() {
    std::string config = openblas_get_config();
    while (!config.empty() && std::isspace(static_cast<unsigned char>(config.back()))) config.pop_back();
    return config + "; core " + openblas_get_corename() + " (" + g_core_reason + "); threads " +
           std::to_string(openblas_get_num_threads());
}

// ---- GEMM --------------------------------------------------------------------------------------------------

namespace {

inline void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float* A,
                       int lda, const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
                       int lda, const double* B, int ldb, double beta, double* C, int ldc) {
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

template <typename Float>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, Float alpha, const Float* A, int lda, const Float* B,
          int ldb, Float beta, Float* C, int ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        // BLAS leaves C untouched when K == 0 in some builds; the contract here is C = beta * C.
        for (int i = 0; i < M; i++) {
            Float* row = C + (size_t)i * ldc;  // [N]
            for (int j = 0; j < N; j++) row[j] = beta == Float(0) ? Float(0) : beta * row[j];
        }
        return;
    }
    const int64_t start = g_gemm_timing ? now_ns() : 0;
    cblas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
               ldb, beta, C, ldc);
    if (g_gemm_timing) g_gemm_stats.ns += now_ns() - start;
    g_gemm_stats.num_calls++;
    g_gemm_stats.flops += 2.0 * M * N * K;
}

template void gemm<float>(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int);
template void gemm<double>(bool, bool, int, int, int, double, const double*, int, const double*, int, double, double*,
                           int);

GemmStats gemm_stats() { return g_gemm_stats; }
void gemm_stats_reset() { g_gemm_stats = GemmStats{}; }
void gemm_timing_enable(bool enabled) { g_gemm_timing = enabled; }

}  // namespace prophet
