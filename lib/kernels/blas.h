// blas.h: the one GEMM every CPU kernel calls, and the choice of OpenBLAS kernel family behind it.
//
// Why this file exists: Debian's OpenBLAS is built with DYNAMIC_ARCH and picks its kernel family (its "core")
// once, when the library loads. On some of the project's machines (AVX-512 CPUs with a generic model name) it
// picks "Prescott" (SSE3) and sgemm runs 4x slower than with the AVX-512 kernels (see
// shared/PERFORMANCE.md); on others it picks Cooperlake by itself. The only switch is the environment variable
// OPENBLAS_CORETYPE, read by the library's constructor before main() runs, so the fix has to re-exec:
//
//   int main(int argc, char** argv) {
//       prophet::blas_setup(argc, argv);   // first thing: may execv() this binary once with OPENBLAS_CORETYPE set
//       ...
//
// blas_setup never forces a kernel family the CPU lacks (it asks the CPU via __builtin_cpu_supports, which also
// checks that the OS saves the AVX-512 state), never overrides a user's OPENBLAS_CORETYPE, and re-execs only
// when the CPU supports a strictly better family than the one OpenBLAS detected. blas_config() returns the
// choice and its reason for the run record.
#pragma once

#include <cstdint>
#include <string>

namespace prophet {

// ---- kernel-family choice ----------------------------------------------------------------------------------

// What the CPU can run, as the BLAS choice sees it.
struct CpuFeatures {
    bool avx2_fma = false;  // avx2 && fma: OpenBLAS "Haswell" kernels
    bool avx512 = false;    // avx512 f, cd, bw, dq, vl: OpenBLAS "SkylakeX" kernels
    bool avx512_bf16 = false;  // additionally avx512_bf16: OpenBLAS "Cooperlake" (same sgemm, plus bf16 kernels)
};
CpuFeatures cpu_features();  // this machine's, via __builtin_cpu_supports

// Tier of an OpenBLAS core name: 2 = AVX-512 (SkylakeX, Cooperlake, SapphireRapids), 1 = AVX2 + FMA (Haswell,
// Zen), 0 = anything older or unknown. Case-insensitive.
int blas_core_tier(const char* core_name);

// The OPENBLAS_CORETYPE value to force, or nullptr to keep what OpenBLAS detected. Pure (tested): returns a
// core only when the CPU's tier is strictly above the detected core's tier.
const char* blas_choose_coretype(const char* detected_core, const CpuFeatures& cpu);

// Call first thing in main(), before MPI_Init and before any thread starts. May replace the process (execv of
// /proc/self/exe with the same argv and OPENBLAS_CORETYPE set); returns normally otherwise. Also sets the
// BLAS thread count: num_threads > 0 sets it, 0 keeps OpenBLAS's default (OPENBLAS_NUM_THREADS or all cores).
void blas_setup(int argc, char** argv, int num_threads = 1);

void blas_set_num_threads(int num_threads);
int blas_num_threads();

// One line for the run record: library config, core in use and why it was chosen, thread count. Example:
// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64; core SkylakeX (forced by
// blas_setup: OpenBLAS detected Prescott, cpu has avx512); threads 1"
std::string blas_config();

// ---- GEMM --------------------------------------------------------------------------------------------------

// Row-major C[M,N] = alpha * op(A) op(B) + beta * C, op(A) [M,K], op(B) [K,N]; lda/ldb/ldc are row strides
// (elements), so strided views (one head of qkv) need no copy. float -> cblas_sgemm, double -> cblas_dgemm.
// K == 0 gives C = beta * C.
template <typename Float>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, Float alpha, const Float* A, int lda, const Float* B,
          int ldb, Float beta, Float* C, int ldc);

// Counters over every gemm() call of this process (not thread-safe; the training core is single-threaded per
// rank). Flops = 2*M*N*K per call. Timing costs two clock reads per call, so it is off unless enabled.
struct GemmStats {
    uint64_t num_calls = 0;
    double flops = 0.0;
    int64_t ns = 0;  // wall time inside gemm(), only while timing is enabled
};
GemmStats gemm_stats();
void gemm_stats_reset();
void gemm_timing_enable(bool enabled);

}  // namespace prophet
