// bench_model_step.cpp: tokens/s of one MoE-GPT training step (forward + backward + AdamW) on one thread, the
// share of the step spent in GEMMs, and the GEMM throughput at the model's real shapes.
//
//   ./build/bench/bench_model_step [--steps 40] [--warmup 5] [--threads 1] [--slow-step-pct P]
//
// --slow-step-pct P is TEST ONLY: every step spins for P% of its own CPU time (the CPU time this benchmark's row
// is measured in; `prophet train`'s debug.slow_step_pct spins wall time), the injected slowdown
// ci/bench-regress.sh --inject-slowdown must catch.
//
// Config (shared/PERFORMANCE.md's peer comparison): V=256 T=64 C=128 NH=4 L=4 E=8 K=2 F=256 B=8, 512 tokens per
// step. The PyTorch peer does ~5,500 tokens/s with the right BLAS kernel; the goal is >= 1.5x that.
// Napkin math: a step is ~2.8 GFLOP of GEMM (forward ~0.93: experts 0.54, qkv 0.20, attention 0.13 with the
// masked half, proj 0.07, lm head 0.03; backward twice that); at ~100 GFLOP/s that is ~28 ms = ~18k tokens/s
// if nothing else cost anything.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <time.h>
#include <vector>

#include "core/rng.h"
#include "core/timer.h"
#include "kernels/blas.h"
#include "kernels/optim.h"
#include "model/moe_gpt.h"

using namespace prophet;

namespace {

// CPU time of this process: on a shared 2-core machine other jobs steal wall time, not CPU time, so both are
// reported (1 BLAS thread: the process's CPU time is the training thread's).
int64_t cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// GFLOP/s of one gemm() shape in isolation (row-major, op(A) [M,K], op(B) [K,N]): best of 5 runs of >= 20 ms
// CPU time, by wall time and by CPU time.
struct GemmRate {
    double wall_gflops = 0, cpu_gflops = 0;
};
GemmRate gemm_gflops(int M, int N, int K, bool ta, bool tb) {
    Rng rng(1);
    std::vector<float> a((size_t)M * K), b((size_t)K * N), c((size_t)M * N);
    for (auto& x : a) x = float(rng.normal());
    for (auto& x : b) x = float(rng.normal());
    const int lda = ta ? M : K, ldb = tb ? K : N;
    GemmRate best;
    for (int rep = 0; rep < 5; rep++) {
        int iters = 0;
        const int64_t start = now_ns(), cpu_start = cpu_ns();
        while (cpu_ns() - cpu_start < 20'000'000) {
            gemm<float>(ta, tb, M, N, K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), N);
            iters++;
        }
        const double flops = 2.0 * M * N * K * iters;
        best.wall_gflops = std::max(best.wall_gflops, flops / double(now_ns() - start));
        best.cpu_gflops = std::max(best.cpu_gflops, flops / double(cpu_ns() - cpu_start));
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 1, steps = 40, warmup = 5;
    double slow_step_pct = 0;
    std::string preset = "small";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--model")) preset = argv[i + 1];
        else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--slow-step-pct")) slow_step_pct = std::atof(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--model small|tiny] [--steps N] [--warmup N] [--threads N] "
                                 "[--slow-step-pct P]\n", argv[0]);
            return 2;
        }
    }
    blas_setup(argc, argv, threads);  // first: may re-exec with OPENBLAS_CORETYPE set

    // the presets of experiments/models/{small,tiny}.toml
    ModelConfig cfg;
    if (preset == "small") {
        cfg.V = 256, cfg.T = 64, cfg.C = 128, cfg.NH = 4, cfg.L = 4, cfg.E = 8, cfg.K = 2, cfg.F = 256, cfg.B = 8;
    } else if (preset == "tiny") {
        cfg.V = 256, cfg.T = 32, cfg.C = 64, cfg.NH = 4, cfg.L = 2, cfg.E = 4, cfg.K = 2, cfg.F = 128, cfg.B = 8;
    } else {
        std::fprintf(stderr, "bench_model_step: --model %s: must be small or tiny\n", preset.c_str());
        return 2;
    }
    Model<float> model(cfg);
    const int N = cfg.B * cfg.T;
    AdamWConfig adamw;
    Rng data_rng(42);
    std::vector<int> inputs(N), targets(N);  // [B,T]

    std::printf("# bench_model_step: V=%d T=%d C=%d NH=%d L=%d E=%d K=%d F=%d B=%d, %zu params (%zu dense)\n", cfg.V,
                cfg.T, cfg.C, cfg.NH, cfg.L, cfg.E, cfg.K, cfg.F, cfg.B, model.layout.num_params,
                model.layout.num_dense_params);
    std::printf("# blas: %s\n", blas_config().c_str());

    std::vector<double> step_cpu_ms, step_ms, fwd_ms, bwd_ms, opt_ms, gemm_share, gemm_gf, step_gflop;
    for (int step = 0; step < warmup + steps; step++) {
        for (int i = 0; i < N; i++) {
            inputs[i] = (int)data_rng.below(cfg.V);
            targets[i] = (int)data_rng.below(cfg.V);
        }
        gemm_stats_reset();
        gemm_timing_enable(true);
        const int64_t c0 = cpu_ns();
        const int64_t t0 = now_ns();
        model_zero_grad(model);
        model_forward(model, inputs.data(), targets.data(), cfg.B, N);
        const int64_t t1 = now_ns();
        model_backward(model);
        const int64_t t2 = now_ns();
        const double norm = std::sqrt(grad_norm_sq(model));
        adamw_step(model, 1e-3, adamw, grad_clip_scale(norm, 1.0));
        if (slow_step_pct > 0) spin_thread_cpu_ns(static_cast<int64_t>((cpu_ns() - c0) * slow_step_pct / 100.0));
        const int64_t t3 = now_ns();
        const int64_t c3 = cpu_ns();
        gemm_timing_enable(false);
        if (step < warmup) continue;
        const GemmStats g = gemm_stats();
        step_ms.push_back((t3 - t0) * 1e-6);
        step_cpu_ms.push_back((c3 - c0) * 1e-6);
        fwd_ms.push_back((t1 - t0) * 1e-6);
        bwd_ms.push_back((t2 - t1) * 1e-6);
        opt_ms.push_back((t3 - t2) * 1e-6);
        gemm_share.push_back(double(g.ns) / double(t3 - t0));
        gemm_gf.push_back(g.flops / double(g.ns));
        step_gflop.push_back(g.flops * 1e-9);
    }
    const double ms = median(step_ms);
    std::printf("# step (median of %d)  | %8s | %8s | %8s | %8s | %10s | %10s | %10s | %11s\n", steps, "ms", "fwd ms",
                "bwd ms", "opt ms", "tok/s", "gemm share", "gemm GF/s", "useful GF/s");
    std::printf("  train step          | %8.2f | %8.2f | %8.2f | %8.2f | %10.0f | %9.1f%% | %10.1f | %11.1f\n", ms,
                median(fwd_ms), median(bwd_ms), median(opt_ms), N / (ms * 1e-3), 100 * median(gemm_share),
                median(gemm_gf), median(step_gflop) / (ms * 1e-3));
    const double cpu_ms = median(step_cpu_ms);
    // GEMM time is measured by wall clock; scaling by the step's cpu/wall ratio assumes preemption hits GEMMs
    // and the rest alike (an estimate, exact when the machine is idle)
    std::printf("  train step, cpu time | %8.2f |          |          |          | %10.0f |            | %10.1f |\n",
                cpu_ms, N / (cpu_ms * 1e-3), median(gemm_gf) * ms / cpu_ms);
    const double min_ms = *std::min_element(step_ms.begin(), step_ms.end());
    std::printf("  fastest step, wall   | %8.2f |          |          |          | %10.0f |  (least disturbed by "
                "other processes)\n", min_ms, N / (min_ms * 1e-3));
    std::printf("# gemm flops per step: %.3f GFLOP (attention counts the full T x T blocks)\n", median(step_gflop));
    std::printf("# peer (PyTorch, 1 thread, right kernel): 5500 tok/s; goal 8250 tok/s; this run %.2fx the peer "
                "(%.2fx by cpu time)\n", N / (ms * 1e-3) / 5500.0, N / (cpu_ms * 1e-3) / 5500.0);

    // the model's GEMM shapes in isolation: (M, N, K, trans_a, trans_b), row-major
    struct Shape {
        const char* what;
        int M, N, K;
        bool ta, tb;
    };
    const int C = cfg.C, F = cfg.F, V = cfg.V, T = cfg.T, hs = cfg.C / cfg.NH;
    const int Me = N * cfg.K / cfg.E;  // tokens per expert when balanced
    const Shape shapes[] = {
        {"qkv fwd       x W", N, 3 * C, C, false, false},   {"qkv bwd dW  x^T dy", C, 3 * C, N, true, false},
        {"qkv bwd dx  dy W^T", N, C, 3 * C, false, true},   {"proj fwd      x W", N, C, C, false, false},
        {"att  q k^T", T, T, hs, false, true},              {"att  P v", T, hs, T, false, false},
        {"expert w1 fwd", Me, F, C, false, false},          {"expert w2 fwd", Me, C, F, false, false},
        {"expert dW1 x^T dpre", C, F, Me, true, false},     {"expert dx dpre W1^T", Me, C, F, false, true},
        {"lm head  x wte^T", N, V, C, false, true},         {"lm head dwte dl^T x", V, C, N, true, false},
    };
    std::printf("# %-22s | %5s | %5s | %5s | %2s | %9s | %9s\n", "gemm shape", "M", "N", "K", "tt", "GF/s wall",
                "GF/s cpu");
    for (const Shape& s : shapes) {
        const GemmRate rate = gemm_gflops(s.M, s.N, s.K, s.ta, s.tb);
        std::printf("  %-22s | %5d | %5d | %5d | %d%d | %9.1f | %9.1f\n", s.what, s.M, s.N, s.K, s.ta, s.tb,
                    rate.wall_gflops, rate.cpu_gflops);
    }
    return 0;
}
