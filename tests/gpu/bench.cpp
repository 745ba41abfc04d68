// bench.cpp: the GPU ops at the MoE-GPT-S shapes on one GPU (experiments/models/moe-gpt-s.toml: V 50257, T 256,
// C 512, NH 16, E 16, K 2, F 1024, B 64 -> N = 16384 tokens), ms per call and the achieved TFLOP/s or GB/s.
// Numbers for the record and closing notes, never asserted. Inputs are random; routing is uniform. The last
// row is a whole training step of MoE-GPT-S (cuda::GpuModel): tokens/s and achieved TFLOP/s.
#include <cmath>
#include <cstdio>

#include "cuda/gpu_model.h"
#include "cuda/ops.h"
#include "harness.h"

namespace prophet::gputest {

namespace {

using cuda::Context;
using cuda::DeviceBuffer;

constexpr int V = 50257, T = 256, C = 512, NH = 16, E = 16, K = 2, F = 1024, B = 64, N = B * T;

DeviceBuffer<float> random_device(Rng& rng, size_t n, double scale = 1.0) {
    return to_device(random_normal(rng, n, scale));
}

}  // namespace

std::vector<BenchRow> run_benchmarks(Context& ctx, const std::string& only_op) {
    std::vector<BenchRow> rows;
    Rng rng(1234);
    auto want = [&](const char* op) { return only_op.empty() || only_op == op; };
    auto add = [&](const char* op, const std::string& shape, double ms, double flops, double bytes) {
        rows.push_back({op, shape, ms, flops, bytes});
        std::printf("  %-22s %-34s %9.3f ms  %8.2f TFLOP/s  %8.1f GB/s\n", op, shape.c_str(), ms,
                    flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9);
        std::fflush(stdout);
    };
    const double f4 = sizeof(float);
    char shape[96];

    if (want("matmul")) {  // the attention's qkv projection: [N,C] x [C,3C]
        auto inp = random_device(rng, (size_t)N * C), w = random_device(rng, (size_t)C * 3 * C, 0.02);
        auto bias = random_device(rng, 3 * C);
        DeviceBuffer<float> out((size_t)N * 3 * C), dinp((size_t)N * C), dw((size_t)C * 3 * C), db(3 * C);
        std::snprintf(shape, sizeof shape, "N=%d IC=%d OC=%d", N, C, 3 * C);
        const double flops = 2.0 * N * C * 3 * C;
        add("matmul fwd", shape,
            time_ms(ctx,
                    [&] { cuda::matmul_forward(ctx, out.data(), inp.data(), w.data(), bias.data(), N, C, 3 * C); }),
            flops, f4 * ((double)N * C + (double)C * 3 * C + (double)N * 3 * C));
        add("matmul bwd", shape, time_ms(ctx, [&] {
                cuda::matmul_backward(ctx, dinp.data(), dw.data(), db.data(), out.data(), inp.data(), w.data(), N, C,
                                      3 * C, false);
            }),
            2 * flops, f4 * (2.0 * N * 3 * C + 2.0 * N * C + 2.0 * C * 3 * C));
    }
    if (want("attention")) {
        auto qkv = random_device(rng, (size_t)N * 3 * C), dout = random_device(rng, (size_t)N * C);
        DeviceBuffer<float> out((size_t)N * C), att((size_t)B * NH * T * T), datt(att.size()), dqkv(qkv.size());
        std::snprintf(shape, sizeof shape, "B=%d T=%d C=%d NH=%d", B, T, C, NH);
        const double flops = 2.0 * 2.0 * B * NH * T * T * (C / NH);  // two full T x T GEMMs per (b, h)
        add("attention fwd", shape,
            time_ms(ctx, [&] { cuda::attention_forward(ctx, out.data(), att.data(), qkv.data(), B, T, C, NH); }), flops,
            f4 * (3.0 * N * C + N * C + 2.0 * att.size()));
        add("attention bwd", shape,
            time_ms(ctx,
                    [&] {
                        cuda::attention_backward(ctx, dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B,
                                                 T, C, NH);
                    }),
            2 * flops, f4 * (6.0 * N * C + 2.0 * N * C + 3.0 * att.size()));
    }
    if (want("layernorm")) {
        auto inp = random_device(rng, (size_t)N * C), w = random_device(rng, C), b = random_device(rng, C);
        DeviceBuffer<float> out((size_t)N * C), mean(N), rstd(N), dinp((size_t)N * C), dw(C), db(C);
        std::snprintf(shape, sizeof shape, "N=%d C=%d", N, C);
        add("layernorm fwd", shape,
            time_ms(ctx,
                    [&] {
                        cuda::layernorm_forward(ctx, out.data(), mean.data(), rstd.data(), inp.data(), w.data(),
                                                b.data(), N, C);
                    }),
            0, f4 * 2.0 * N * C);
        add("layernorm bwd", shape, time_ms(ctx, [&] {
                cuda::layernorm_backward(ctx, dinp.data(), dw.data(), db.data(), out.data(), inp.data(), w.data(),
                                         mean.data(), rstd.data(), N, C);
            }),
            0, f4 * 4.0 * N * C);
    }
    if (want("gelu")) {
        const size_t n = (size_t)N * K * F;
        auto x = random_device(rng, n);
        DeviceBuffer<float> y(n);
        std::snprintf(shape, sizeof shape, "n=N*K*F=%zu", n);
        add("gelu fwd", shape, time_ms(ctx, [&] { cuda::gelu_forward(ctx, y.data(), x.data(), n); }), 0, f4 * 2.0 * n);
        add("gelu bwd", shape, time_ms(ctx, [&] { cuda::gelu_backward(ctx, y.data(), x.data(), y.data(), n); }), 0,
            f4 * 3.0 * n);
    }
    if (want("moe")) {  // gate top-K, layout, permute, experts, unpermute: one MoE layer, forward and backward
        auto logits = random_device(rng, (size_t)N * E), h = random_device(rng, (size_t)N * C);
        auto w1 = random_device(rng, (size_t)E * C * F, 0.02), w2 = random_device(rng, (size_t)E * F * C, 0.02);
        DeviceBuffer<float> dw1(w1.size()), dw2(w2.size()), gate_w((size_t)N * K), dgate((size_t)N * K);
        DeviceBuffer<int> idx((size_t)N * K), off(E + 1), slot((size_t)N * K), tok((size_t)N * K);
        const size_t M = (size_t)N * K;
        DeviceBuffer<float> x(M * C), pre(M * F), act(M * F), y(M * C), out((size_t)N * C), dy(M * C), dx(M * C);
        DeviceBuffer<float> dh((size_t)N * C), dpre(M * F);
        std::vector<const float*> pw1(E), pw2(E);
        std::vector<float*> pdw1(E), pdw2(E);
        for (int e = 0; e < E; e++) {
            pw1[e] = w1.data() + (size_t)e * C * F, pw2[e] = w2.data() + (size_t)e * F * C;
            pdw1[e] = dw1.data() + (size_t)e * C * F, pdw2[e] = dw2.data() + (size_t)e * F * C;
        }
        std::snprintf(shape, sizeof shape, "N=%d E=%d K=%d", N, E, K);
        add("gate_topk fwd", shape,
            time_ms(ctx, [&] { cuda::gate_topk_forward(ctx, idx.data(), gate_w.data(), logits.data(), N, E, K); }), 0,
            f4 * ((double)N * E + 2.0 * N * K));
        add("moe_layout", shape,
            time_ms(ctx, [&] { cuda::moe_layout(ctx, off.data(), slot.data(), tok.data(), idx.data(), N, K, E); }), 0,
            4.0 * (E + 1.0) * N * K);
        const std::vector<int> offsets = cuda::moe_offsets_to_host(ctx, off.data(), E);
        std::snprintf(shape, sizeof shape, "N=%d K=%d C=%d", N, K, C);
        add("moe_permute", shape,
            time_ms(ctx, [&] { cuda::moe_permute(ctx, x.data(), h.data(), slot.data(), N, K, C); }), 0,
            f4 * 2.0 * M * C);
        add("moe_unpermute", shape, time_ms(ctx, [&] {
                cuda::moe_unpermute(ctx, out.data(), y.data(), gate_w.data(), slot.data(), N, K, C);
            }),
            0, f4 * ((double)M * C + (double)N * C));
        std::snprintf(shape, sizeof shape, "M=%zu E=%d C=%d F=%d", M, E, C, F);
        const double flops = 2.0 * 2.0 * M * C * F;
        add("moe_experts fwd", shape, time_ms(ctx, [&] {
                cuda::moe_experts_forward(ctx, pre.data(), act.data(), y.data(), x.data(), offsets, pw1.data(),
                                          pw2.data(), C, F);
            }),
            flops, f4 * (2.0 * M * C + 2.0 * M * F + 2.0 * E * C * F));
        add("moe_experts bwd", shape, time_ms(ctx, [&] {
                cuda::moe_experts_backward(ctx, dx.data(), dpre.data(), y.data(), x.data(), pre.data(), act.data(),
                                           offsets, pw1.data(), pw2.data(), pdw1.data(), pdw2.data(), C, F);
            }),
            2 * flops, f4 * (3.0 * M * C + 3.0 * M * F + 4.0 * E * C * F));
        add("moe_unpermute bwd", shape, time_ms(ctx, [&] {
                cuda::moe_unpermute_backward(ctx, dy.data(), dgate.data(), out.data(), y.data(), gate_w.data(),
                                             slot.data(), N, K, C);
            }),
            0, f4 * (2.0 * M * C + (double)N * C));
        add("moe_permute bwd", shape,
            time_ms(ctx, [&] { cuda::moe_permute_backward(ctx, dh.data(), dx.data(), slot.data(), N, K, C); }), 0,
            f4 * ((double)M * C + (double)N * C));
    }
    if (want("crossentropy")) {  // the tied output layer: [N,C] x [C,V] and a softmax over V
        auto x = random_device(rng, (size_t)N * C), wte = random_device(rng, (size_t)V * C, 0.02);
        std::vector<int> targets_host = random_ints(rng, N, V);
        auto targets = to_device(targets_host);
        DeviceBuffer<float> probs((size_t)N * V), dx((size_t)N * C), dwte(wte.size());
        std::snprintf(shape, sizeof shape, "N=%d C=%d V=%d", N, C, V);
        const double flops = 2.0 * N * C * V;
        add("crossentropy fwd", shape, time_ms(ctx, [&] {
                cuda::crossentropy_tied_forward(ctx, probs.data(), x.data(), wte.data(), targets.data(), N, C, V, N);
            }, 1, 3),
            flops, f4 * 3.0 * N * V);
        add("crossentropy bwd", shape, time_ms(ctx, [&] {
                cuda::crossentropy_tied_backward(ctx, dx.data(), dwte.data(), probs.data(), x.data(), wte.data(),
                                                 targets.data(), N, C, V, N);
            }, 1, 3),
            2 * flops, f4 * 4.0 * N * V);
    }
    if (want("adamw")) {  // ~ every parameter of MoE-GPT-S: wte + 12 layers of 16 experts + dense
        const size_t n = (size_t)V * C + 12 * ((size_t)E * 2 * C * F + 4 * (size_t)C * C + (size_t)C * E);
        auto p = random_device(rng, n), g = random_device(rng, n, 0.01);
        DeviceBuffer<float> m = to_device(std::vector<float>(n, 0.0f)), v = to_device(std::vector<float>(n, 0.0f));
        std::snprintf(shape, sizeof shape, "n=%zu", n);
        long step = 0;
        add("adamw", shape, time_ms(ctx, [&] {
                cuda::adamw_update(ctx, p.data(), g.data(), m.data(), v.data(), n, 1e-4, 0.9, 0.95, 1e-8, 0.1, ++step,
                                   1.0);
            }),
            0, f4 * 7.0 * n);
        add("sum_squares", shape, time_ms(ctx, [&] { cuda::sum_squares(ctx, g.data(), n); }), 0, f4 * (double)n);
    }
    if (want("model")) {  // one whole training step of MoE-GPT-S on this GPU: forward, backward, clip, AdamW
        ModelConfig cfg;
        cfg.V = V, cfg.T = T, cfg.C = C, cfg.NH = NH, cfg.L = 12, cfg.E = E, cfg.K = K, cfg.F = F, cfg.B = B;
        std::printf("  (initialising MoE-GPT-S on the host: ~240M parameters)\n");
        std::fflush(stdout);
        Model<float> cpu(cfg);
        cuda::GpuModel gpu(ctx, cpu);
        const std::vector<int> inputs = random_ints(rng, N, V), targets = random_ints(rng, N, V);
        const AdamWConfig adamw;
        auto step = [&] {
            gpu.zero_grad();
            gpu.forward(inputs.data(), targets.data(), B, double(N));
            gpu.backward();
            gpu.adamw_step(1e-4, adamw, grad_clip_scale(std::sqrt(gpu.grad_norm_sq()), 1.0));
        };
        const double ms = time_ms(ctx, step, 2, 5);
        // backward = twice the forward's GEMM FLOPs; AdamW and the element-wise ops are not counted
        std::snprintf(shape, sizeof shape, "MoE-GPT-S L=12 B=%d T=%d (N=%d)", B, T, N);
        add("model step", shape, ms, 3.0 * gpu.last_forward_flops(), 0.0);
        rows.back().tokens = N;
        std::printf("  %-22s %.0f tokens/s\n", "model step", N / (ms * 1e-3));
    }
    return rows;
}

}  // namespace prophet::gputest
