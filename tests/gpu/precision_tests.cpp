// precision_tests.cpp: the grouped expert GEMMs (cuda::gemm_grouped) and bf16 GEMMs (GemmPrecision::kBf16,
// train.precision = bf16) against the CPU's fp32 gemm. Registered as the "gemm_grouped" and "bf16" op tests
// (op_tests.cpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "cuda/gpu_model.h"
#include "cuda/ops.h"
#include "harness.h"
#include "kernels/blas.h"
#include "model/moe_gpt.h"

namespace prophet::gputest {

// op_tests.cpp: the 20-step CPU-vs-GPU model run, the worst relative loss gap
double model_loss_gap(Rng& rng, cuda::Context& ctx,
                      const std::function<void(Model<float>&, cuda::GpuModel&)>& step1, std::string* losses);

namespace {

using cuda::Context;
using cuda::DeviceBuffer;

// Per-expert row counts of one layer: an empty expert, a one-row expert and sizes that are not multiples of 32.
const std::vector<int> kRows = {7, 0, 33, 1, 64};

// The three transpose cases the experts use (forward nn, backward nt for dx and tn for dW), each as one group
// over kRows: op(A) [M_e,K] from a tall row buffer, B a per-expert matrix, or (tn) both from the row buffers.
// Returns the worst |gpu - cpu| relative to max|cpu| over the three, for the caller's tolerance.
void check_grouped(Case& c, Rng& rng, Context& ctx, const Tolerance& tol, const std::string& label) {
    const int C = 40, F = 72, E = (int)kRows.size();
    std::vector<int> offsets(E + 1, 0);
    for (int e = 0; e < E; e++) offsets[e + 1] = offsets[e] + kRows[e];
    const int M = offsets[E];
    auto x = random_normal(rng, (size_t)M * C), dy = random_normal(rng, (size_t)M * F);
    std::vector<std::vector<float>> w(E);
    for (auto& m : w) m = random_normal(rng, (size_t)C * F);
    auto dx_x = to_device(x), d_dy = to_device(dy);
    std::vector<DeviceBuffer<float>> dw;
    for (auto& m : w) dw.push_back(to_device(m));
    for (const char* kind : {"nn", "nt", "tn"}) {
        const std::string k(kind);
        std::vector<cuda::GemmProblem> group;
        std::vector<float> cpu;
        DeviceBuffer<float> out;
        if (k == "nn") {  // y [M_e,F] = x [M_e,C] W [C,F]
            cpu.assign((size_t)M * F, 0.0f);
            out.resize(cpu.size());
            for (int e = 0; e < E; e++) {
                const int b = offsets[e], Me = kRows[e];
                if (Me == 0) continue;
                gemm<float>(false, false, Me, F, C, 1.0f, x.data() + (size_t)b * C, C, w[e].data(), F, 0.0f,
                            cpu.data() + (size_t)b * F, F);
                group.push_back({Me, F, C, dx_x.data() + (size_t)b * C, C, dw[e].data(), F, out.data() + (size_t)b * F, F});
            }
            cuda::gemm_grouped(ctx, false, false, 1.0f, 0.0f, group);
        } else if (k == "nt") {  // dx [M_e,C] = dy [M_e,F] W^T
            cpu.assign((size_t)M * C, 0.0f);
            out.resize(cpu.size());
            for (int e = 0; e < E; e++) {
                const int b = offsets[e], Me = kRows[e];
                if (Me == 0) continue;
                gemm<float>(false, true, Me, C, F, 1.0f, dy.data() + (size_t)b * F, F, w[e].data(), F, 0.0f,
                            cpu.data() + (size_t)b * C, C);
                group.push_back({Me, C, F, d_dy.data() + (size_t)b * F, F, dw[e].data(), F, out.data() + (size_t)b * C, C});
            }
            cuda::gemm_grouped(ctx, false, true, 1.0f, 0.0f, group);
        } else {  // dW [C,F] += x^T dy, beta = 1 onto a random start (the gradients accumulate)
            auto start = random_normal(rng, (size_t)E * C * F);
            cpu = start;
            out.resize(cpu.size());
            out.upload(start);
            for (int e = 0; e < E; e++) {
                const int b = offsets[e], Me = kRows[e];
                // an empty expert is skipped: its gradient must stay as it was (checked by the comparison)
                if (Me == 0) continue;
                gemm<float>(true, false, C, F, Me, 1.0f, x.data() + (size_t)b * C, C, dy.data() + (size_t)b * F, F,
                            1.0f, cpu.data() + (size_t)e * C * F, F);
                group.push_back({C, F, Me, dx_x.data() + (size_t)b * C, C, d_dy.data() + (size_t)b * F, F,
                                 out.data() + (size_t)e * C * F, F});
            }
            cuda::gemm_grouped(ctx, true, false, 1.0f, 1.0f, group);
        }
        ctx.synchronize();
        c.expect_close(label + " " + k, cpu, out, tol);
    }
}

}  // namespace

// fp32 grouped GEMMs: the same products as one gemm per expert, so gemm's tolerance (K <= 72 here: atol 2e-4,
// rtol 1e-4). The CUDA 13 cuBLAS has a grouped fp32 kernel, so the native path must have been taken.
void test_gemm_grouped(Case& c, Rng& rng, Context& ctx) {
    check_grouped(c, rng, ctx, {2e-4, 1e-4}, "fp32 grouped");
    c.expect_true("fp32 ran as one cublasGemmGroupedBatchedEx call", ctx.grouped_gemm_native(),
                  "cuBLAS answered NOT_SUPPORTED: gemm_grouped looped over the experts");
}

// bf16 (CUBLAS_COMPUTE_32F_FAST_16BF): operands rounded to 8 significant bits (relative error <= 2^-9 each), fp32
// accumulation. A product of N(0,1) values errs by ~2^-8; K of them add up like a random walk: |error| ~
// sqrt(K) 2^-8 ~ 0.07 at K = 72 (|C| ~ 8.5), a bound of 4 sigma: atol 0.3, rtol 1e-2. The path must be bf16 for
// real: the same GEMM in fp32 and bf16 must differ (by more than fp32 rounding, 1e-4). Then a 20-step model run in
// bf16 against the CPU's fp32: losses within 2e-2 relative (the bf16 rounding of every GEMM, not a bug's size).
void test_bf16(Case& c, Rng& rng, Context& ctx) {
    Context bf(ctx.device(), cuda::GemmPrecision::kBf16);
    check_grouped(c, rng, bf, {0.3, 1e-2}, std::string("bf16 grouped (") +
                                               (bf.grouped_gemm_native() ? "native" : "loop fallback") + ")");
    const int M = 67, N = 45, K = 300;
    auto A = random_normal(rng, (size_t)M * K), B = random_normal(rng, (size_t)K * N);
    auto dA = to_device(A), dB = to_device(B);
    DeviceBuffer<float> c32((size_t)M * N), c16((size_t)M * N);
    cuda::gemm(ctx, false, false, M, N, K, 1.0f, dA.data(), K, dB.data(), N, 0.0f, c32.data(), N);
    cuda::gemm(bf, false, false, M, N, K, 1.0f, dA.data(), K, dB.data(), N, 0.0f, c16.data(), N);
    ctx.synchronize();
    bf.synchronize();
    const std::vector<float> h32 = c32.download(), h16 = c16.download();
    double diff = 0.0;
    for (size_t i = 0; i < h32.size(); i++) diff = std::max(diff, (double)std::fabs(h32[i] - h16[i]));
    c.expect_close("bf16 gemm vs fp32 (K 300: atol 4 sqrt(K) 2^-8)", h32, h16, {4 * std::sqrt(300.0) / 256, 1e-2});
    c.expect_true("bf16 differs from fp32 (the tensor-core path ran)", diff > 1e-4,
                  "max |fp32 - bf16| = " + std::to_string(diff));

    std::string losses;
    const double worst = model_loss_gap(rng, bf, nullptr, &losses);
    c.expect_true("bf16 model: 20 losses within 2e-2 rel of the CPU's fp32", worst <= 2e-2,
                  "worst rel " + std::to_string(worst) + losses);
}

}  // namespace prophet::gputest
