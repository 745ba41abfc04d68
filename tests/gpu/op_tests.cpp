// op_tests.cpp: every GPU op of lib/cuda against its CPU op (lib/kernels, model/moe_executor) on fresh random
// inputs. Each test states its tolerance and why: the ops compute the same formulas, so what differs is float
// summation order (parallel reductions, cuBLAS blocking), FMA contraction (nvcc fuses a*b+c by default; the CPU
// build does not), atomics (encoder backward) and tanhf vs the CPU's rational tanh (|error| <= 3e-7). Shapes are
// small (a CPU oracle must be quick) but odd-sized on purpose: not multiples of 32, so tails are exercised.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "core/error.h"
#include "cuda/gpu_model.h"
#include "cuda/ops.h"
#include "harness.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "kernels/optim.h"
#include "model/moe_executor.h"
#include "model/moe_gpt.h"

namespace prophet::gputest {

namespace {

using cuda::Context;
using cuda::DeviceBuffer;

// ---- GEMM: all four transpose combinations, strided leading dimensions, beta = 1 ---------------------------
// fp32 sums of K <= 300 products of N(0,1) values (|C| ~ sqrt(K) ~ 17): rounding differences of a few ulp per
// partial sum, ~1e-5 absolute. atol 2e-4, rtol 1e-4.
void test_gemm(Case& c, Rng& rng, Context& ctx) {
    const Tolerance tol{2e-4, 1e-4};
    const int M = 67, N = 45, K = 300, pad = 3;
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            // op(A) [M,K], stored [M,K] or [K,M] with `pad` extra columns per row
            const int a_rows = ta ? K : M, a_cols = ta ? M : K, lda = a_cols + pad;
            const int b_rows = tb ? N : K, b_cols = tb ? K : N, ldb = b_cols + pad;
            const int ldc = N + pad;
            auto A = random_normal(rng, (size_t)a_rows * lda);
            auto B = random_normal(rng, (size_t)b_rows * ldb);
            auto C = random_normal(rng, (size_t)M * ldc);
            auto dA = to_device(A), dB = to_device(B), dC = to_device(C);
            gemm<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 1.0f, C.data(), ldc);
            cuda::gemm(ctx, ta, tb, M, N, K, 0.5f, dA.data(), lda, dB.data(), ldb, 1.0f, dC.data(), ldc);
            c.expect_close("C ta=" + std::to_string(ta) + " tb=" + std::to_string(tb), C, dC, tol);
        }
    }
}

// ---- embedding -------------------------------------------------------------------------------------------
// forward: one float add per element, the same on both: exact. backward: dwpe sums B terms per element in a
// different association, dwte sums repeated tokens by atomics in any order (V = 37 < N, so rows repeat):
// |dout| ~ 1, a handful of terms -> atol 1e-5, rtol 1e-5.
void test_encoder(Case& c, Rng& rng, Context& ctx) {
    const int B = 5, T = 33, C = 70, V = 37, N = B * T;
    auto tokens = random_ints(rng, N, V);
    auto wte = random_normal(rng, (size_t)V * C), wpe = random_normal(rng, (size_t)T * C);
    auto dout = random_normal(rng, (size_t)N * C);
    auto dwte = random_normal(rng, (size_t)V * C), dwpe = random_normal(rng, (size_t)T * C);  // += onto these
    auto d_tokens = to_device(tokens);
    auto d_wte = to_device(wte), d_wpe = to_device(wpe), d_dout = to_device(dout);
    auto d_dwte = to_device(dwte), d_dwpe = to_device(dwpe);
    DeviceBuffer<float> d_out((size_t)N * C);
    std::vector<float> out((size_t)N * C);
    encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
    encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
    cuda::encoder_forward(ctx, d_out.data(), d_tokens.data(), d_wte.data(), d_wpe.data(), B, T, C, V);
    cuda::encoder_backward(ctx, d_dwte.data(), d_dwpe.data(), d_dout.data(), d_tokens.data(), B, T, C, V);
    ctx.synchronize();
    c.expect_close("out", out, d_out, kExact);
    c.expect_close("dwte (+=)", dwte, d_dwte, {1e-5, 1e-5});
    c.expect_close("dwpe (+=)", dwpe, d_dwpe, {1e-5, 1e-5});
}

// ---- layernorm -------------------------------------------------------------------------------------------
// forward: row mean/variance over C = 200 summed in another order: out ~ N(0,1)-sized, atol 1e-5, rtol 1e-5;
// mean/rstd the same. backward: dinp has the same row sums (atol 1e-5, rtol 1e-4); dweight/dbias sum N = 301
// rows (|sum| ~ 17): atol 1e-4, rtol 1e-4.
void test_layernorm(Case& c, Rng& rng, Context& ctx) {
    const int N = 301, C = 200;
    auto inp = random_normal(rng, (size_t)N * C, 2.0);
    for (int n = 0; n < N; n++)  // rows with a mean far from 0: the two-pass variance matters
        for (int j = 0; j < C; j++) inp[(size_t)n * C + j] += float(n % 7);
    auto w = random_normal(rng, C), b = random_normal(rng, C), dout = random_normal(rng, (size_t)N * C);
    auto dinp = random_normal(rng, (size_t)N * C), dw = random_normal(rng, C), db = random_normal(rng, C);
    auto d_inp = to_device(inp), d_w = to_device(w), d_b = to_device(b), d_dout = to_device(dout);
    auto d_dinp = to_device(dinp), d_dw = to_device(dw), d_db = to_device(db);
    DeviceBuffer<float> d_out((size_t)N * C), d_mean(N), d_rstd(N);
    std::vector<float> out((size_t)N * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(), rstd.data(),
                       N, C);
    cuda::layernorm_forward(ctx, d_out.data(), d_mean.data(), d_rstd.data(), d_inp.data(), d_w.data(), d_b.data(), N,
                            C);
    // backward from the CPU's saved statistics, so the backward check does not inherit forward differences
    auto d_mean_cpu = to_device(mean), d_rstd_cpu = to_device(rstd);
    cuda::layernorm_backward(ctx, d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(),
                             d_mean_cpu.data(), d_rstd_cpu.data(), N, C);
    ctx.synchronize();
    c.expect_close("out", out, d_out, {1e-5, 1e-5});
    c.expect_close("mean", mean, d_mean, {1e-5, 1e-5});
    c.expect_close("rstd", rstd, d_rstd, {1e-5, 1e-5});
    c.expect_close("dinp (+=)", dinp, d_dinp, {1e-5, 1e-4});
    c.expect_close("dweight (+=)", dw, d_dw, {1e-4, 1e-4});
    c.expect_close("dbias (+=)", db, d_db, {1e-4, 1e-4});
}

// ---- matmul with bias ------------------------------------------------------------------------------------
// GEMMs as test_gemm (IC, OC, N <= 300): atol 2e-4, rtol 1e-4; dbias sums N = 257 rows: the same.
void test_matmul(Case& c, Rng& rng, Context& ctx) {
    const Tolerance tol{2e-4, 1e-4};
    const int N = 257, IC = 96, OC = 288;
    auto inp = random_normal(rng, (size_t)N * IC), w = random_normal(rng, (size_t)IC * OC),
         bias = random_normal(rng, OC);
    auto dout = random_normal(rng, (size_t)N * OC);
    auto dinp = random_normal(rng, (size_t)N * IC), dw = random_normal(rng, (size_t)IC * OC),
         db = random_normal(rng, OC);
    auto d_inp = to_device(inp), d_w = to_device(w), d_bias = to_device(bias), d_dout = to_device(dout);
    auto d_dinp = to_device(dinp), d_dw = to_device(dw), d_db = to_device(db);
    DeviceBuffer<float> d_out((size_t)N * OC), d_out_nobias((size_t)N * OC);
    std::vector<float> out((size_t)N * OC), out_nobias((size_t)N * OC);
    matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, IC, OC);
    matmul_forward(out_nobias.data(), inp.data(), w.data(), (const float*)nullptr, N, IC, OC);
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, IC, OC, true);
    cuda::matmul_forward(ctx, d_out.data(), d_inp.data(), d_w.data(), d_bias.data(), N, IC, OC);
    cuda::matmul_forward(ctx, d_out_nobias.data(), d_inp.data(), d_w.data(), nullptr, N, IC, OC);
    cuda::matmul_backward(ctx, d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(), N, IC,
                          OC, true);
    ctx.synchronize();
    c.expect_close("out", out, d_out, tol);
    c.expect_close("out (no bias)", out_nobias, d_out_nobias, tol);
    c.expect_close("dinp (accumulate)", dinp, d_dinp, tol);
    c.expect_close("dweight (+=)", dw, d_dw, tol);
    c.expect_close("dbias (+=)", db, d_db, tol);
}

// ---- attention -------------------------------------------------------------------------------------------
// q.k over hs = 24 terms then exp: att (probabilities in [0,1]) atol 1e-5, rtol 1e-4; out sums T = 45 terms
// of att*v: atol 1e-5, rtol 1e-4. backward chains four GEMMs and the softmax backward: atol 1e-4, rtol 1e-3.
void test_attention(Case& c, Rng& rng, Context& ctx) {
    const int B = 3, T = 45, NH = 4, C = 96;
    auto qkv = random_normal(rng, (size_t)B * T * 3 * C), dout = random_normal(rng, (size_t)B * T * C);
    auto d_qkv = to_device(qkv), d_dout = to_device(dout);
    std::vector<float> out((size_t)B * T * C), att((size_t)B * NH * T * T), dqkv(qkv.size()), scratch((size_t)T * T);
    DeviceBuffer<float> d_out(out.size()), d_att(att.size()), d_dqkv(qkv.size()), d_datt(att.size());
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    cuda::attention_forward(ctx, d_out.data(), d_att.data(), d_qkv.data(), B, T, C, NH);
    ctx.synchronize();
    c.expect_close("att", att, d_att, {1e-5, 1e-4});
    c.expect_close("out", out, d_out, {1e-5, 1e-4});
    auto d_att_cpu = to_device(att);  // backward from the CPU's att: checks backward alone
    cuda::attention_backward(ctx, d_dqkv.data(), d_datt.data(), d_dout.data(), d_qkv.data(), d_att_cpu.data(), B, T, C,
                             NH);
    ctx.synchronize();
    c.expect_close("dqkv", dqkv, d_dqkv, {1e-4, 1e-3});
}

// ---- gelu, residual --------------------------------------------------------------------------------------
// tanhf (CUDA, ~2 ulp) vs the CPU's rational tanh (|error| <= 3e-7), times 0.5 x where tanh is not saturated
// (|x| < ~4.4): atol 2e-6, rtol 1e-5. The derivative's sensitivity to a tanh error, |0.5 - x t s (1 + 3a x^2)|,
// reaches ~13 near |x| = 4.4, times |dout| up to ~4: 13 * 3e-7 * 4 = 1.6e-5, so atol 3e-5, rtol 1e-5.
// residual: exact.
void test_elementwise(Case& c, Rng& rng, Context& ctx) {
    const size_t n = 100003;
    auto x = random_normal(rng, n, 1.5), dout = random_normal(rng, n), y = random_normal(rng, n);
    auto d_x = to_device(x), d_dout = to_device(dout), d_y = to_device(y);
    std::vector<float> g(n), dg(n), r(n);
    DeviceBuffer<float> d_g(n), d_dg(n), d_r(n);
    gelu_forward(g.data(), x.data(), n);
    gelu_backward(dg.data(), x.data(), dout.data(), n);
    residual_forward(r.data(), x.data(), y.data(), n);
    cuda::gelu_forward(ctx, d_g.data(), d_x.data(), n);
    cuda::gelu_backward(ctx, d_dg.data(), d_x.data(), d_dout.data(), n);
    cuda::residual_forward(ctx, d_r.data(), d_x.data(), d_y.data(), n);
    ctx.synchronize();
    c.expect_close("gelu", g, d_g, {2e-6, 1e-5});
    c.expect_close("gelu backward", dg, d_dg, {3e-5, 1e-5});
    c.expect_close("residual", r, d_r, kExact);
}

// ---- row softmax (E = 67 per row): probabilities, atol 1e-6, rtol 1e-5; backward (+=): atol 1e-6, rtol 1e-5 ---
void test_softmax(Case& c, Rng& rng, Context& ctx) {
    const int N = 203, E = 67;
    auto logits = random_normal(rng, (size_t)N * E, 3.0), dprobs = random_normal(rng, (size_t)N * E);
    auto dlogits = random_normal(rng, (size_t)N * E);
    auto d_logits = to_device(logits), d_dprobs = to_device(dprobs), d_dlogits = to_device(dlogits);
    std::vector<float> probs((size_t)N * E);
    DeviceBuffer<float> d_probs(probs.size());
    softmax_forward(probs.data(), logits.data(), N, E);
    softmax_backward(dlogits.data(), dprobs.data(), probs.data(), N, E);
    cuda::softmax_forward(ctx, d_probs.data(), d_logits.data(), N, E);
    auto d_probs_cpu = to_device(probs);
    cuda::softmax_backward(ctx, d_dlogits.data(), d_dprobs.data(), d_probs_cpu.data(), N, E);
    ctx.synchronize();
    c.expect_close("probs", probs, d_probs, {1e-6, 1e-5});
    c.expect_close("dlogits (+=)", dlogits, d_dlogits, {1e-6, 1e-5});
}

// ---- gate top-K ------------------------------------------------------------------------------------------
// The selection is compared exactly. Logits are multiples of 0.25 in [-1, 1] so most rows have ties: the GPU
// must break them to the lower index like the CPU. gate_w: expf vs std::exp on K values, atol 1e-6, rtol 1e-5;
// backward: atol 1e-6, rtol 1e-5.
void test_gate_topk(Case& c, Rng& rng, Context& ctx) {
    const int N = 517, E = 13;
    for (int K : {1, 2, 4}) {
        std::vector<float> logits((size_t)N * E);
        for (auto& l : logits) l = 0.25f * float(int(rng.below(9)) - 4);
        auto dgate = random_normal(rng, (size_t)N * K);
        std::vector<int> idx((size_t)N * K);
        std::vector<float> w((size_t)N * K), dlogits((size_t)N * E);
        gate_topk_forward(idx.data(), w.data(), logits.data(), N, E, K);
        gate_topk_backward(dlogits.data(), dgate.data(), w.data(), idx.data(), N, E, K);
        auto d_logits = to_device(logits), d_dgate = to_device(dgate);
        DeviceBuffer<int> d_idx(idx.size());
        DeviceBuffer<float> d_w(w.size()), d_dlogits = to_device(random_normal(rng, dlogits.size()));  // overwritten
        cuda::gate_topk_forward(ctx, d_idx.data(), d_w.data(), d_logits.data(), N, E, K);
        auto d_w_cpu = to_device(w);
        auto d_idx_cpu = to_device(idx);
        cuda::gate_topk_backward(ctx, d_dlogits.data(), d_dgate.data(), d_w_cpu.data(), d_idx_cpu.data(), N, E, K);
        ctx.synchronize();
        const std::string k = " K=" + std::to_string(K);
        c.expect_equal("expert_idx" + k, idx, d_idx.download());
        c.expect_close("gate_w" + k, w, d_w, {1e-6, 1e-5});
        c.expect_close("dlogits" + k, dlogits, d_dlogits, {1e-6, 1e-5});
    }
}

// ---- MoE layout: exact, against the obvious host counting sort (LocalMoeExecutor's, written out) ------------
// expert_idx with dropped (-1) entries and an expert that gets nothing
struct HostLayout {
    std::vector<int> offsets, assignment_slot, slot_token;
};
HostLayout host_layout(const std::vector<int>& expert_idx, int N, int K, int E) {
    HostLayout h;
    h.offsets.assign(E + 1, 0);
    for (int e : expert_idx)
        if (e >= 0) h.offsets[e + 1]++;
    for (int e = 0; e < E; e++) h.offsets[e + 1] += h.offsets[e];
    std::vector<int> fill(h.offsets.begin(), h.offsets.end() - 1);
    h.assignment_slot.assign((size_t)N * K, -1);
    h.slot_token.assign(h.offsets[E], -1);
    for (int a = 0; a < N * K; a++) {
        if (expert_idx[a] < 0) continue;
        const int s = fill[expert_idx[a]]++;
        h.assignment_slot[a] = s;
        h.slot_token[s] = a / K;
    }
    return h;
}

std::vector<int> random_routing(Rng& rng, int N, int K, int E) {
    std::vector<int> idx((size_t)N * K);
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) {
            int e;
            do {
                e = int(rng.below(E - 1));  // expert E-1 never chosen: an empty expert
            } while (std::find(idx.begin() + (size_t)n * K, idx.begin() + (size_t)n * K + k, e) !=
                     idx.begin() + (size_t)n * K + k);
            idx[(size_t)n * K + k] = rng.uniform() < 0.1 ? -1 : e;  // ~10% dropped by a capacity limit
        }
    }
    return idx;
}

void test_moe_layout(Case& c, Rng& rng, Context& ctx) {
    const int N = 1000, K = 2, E = 9;  // N*K = 2000 > one 256-thread scan chunk: the carry across chunks matters
    auto idx = random_routing(rng, N, K, E);
    const HostLayout h = host_layout(idx, N, K, E);
    auto d_idx = to_device(idx);
    DeviceBuffer<int> d_off(E + 1), d_slot((size_t)N * K), d_tok((size_t)N * K);
    cuda::moe_layout(ctx, d_off.data(), d_slot.data(), d_tok.data(), d_idx.data(), N, K, E);
    const std::vector<int> off = cuda::moe_offsets_to_host(ctx, d_off.data(), E);
    auto tok = d_tok.download();
    tok.resize(off[E]);
    c.expect_equal("expert_offsets", h.offsets, off);
    c.expect_equal("assignment_slot", h.assignment_slot, d_slot.download());
    c.expect_equal("slot_token", h.slot_token, tok);
}

// ---- permute / unpermute, forward and backward, against plain host loops --------------------------------
// permute and dy = w * dout are copies / one multiply: exact. The k-ordered sums: permute backward adds the
// same floats in the same order (exact); unpermute multiplies and adds, which nvcc may fuse into FMAs: atol
// 1e-6, rtol 1e-6. dgate_w is a dot over C = 80: atol 1e-5, rtol 1e-5.
void test_moe_permute(Case& c, Rng& rng, Context& ctx) {
    const int N = 301, K = 2, E = 7, C = 80;
    auto idx = random_routing(rng, N, K, E);
    const HostLayout h = host_layout(idx, N, K, E);
    const int M = h.offsets[E];
    auto hin = random_normal(rng, (size_t)N * C), y = random_normal(rng, (size_t)M * C);
    auto w = random_normal(rng, (size_t)N * K), dout = random_normal(rng, (size_t)N * C);
    auto dx = random_normal(rng, (size_t)M * C);
    std::vector<float> x((size_t)M * C), out((size_t)N * C, 0.0f), dy((size_t)M * C), dgate((size_t)N * K);
    std::vector<float> dh((size_t)N * C, 0.0f);
    for (int a = 0; a < N * K; a++) {
        const int s = h.assignment_slot[a], n = a / K;
        if (s < 0) {
            dgate[a] = 0.0f;
            continue;
        }
        float dot = 0.0f;
        for (int j = 0; j < C; j++) {
            x[(size_t)s * C + j] = hin[(size_t)n * C + j];
            dot += dout[(size_t)n * C + j] * y[(size_t)s * C + j];
            dy[(size_t)s * C + j] = w[a] * dout[(size_t)n * C + j];
        }
        dgate[a] = dot;
    }
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) {  // k order, as the contract says
            const int s = h.assignment_slot[(size_t)n * K + k];
            if (s < 0) continue;
            for (int j = 0; j < C; j++) {
                out[(size_t)n * C + j] += w[(size_t)n * K + k] * y[(size_t)s * C + j];
                dh[(size_t)n * C + j] += dx[(size_t)s * C + j];
            }
        }
    }
    auto d_slot = to_device(h.assignment_slot);
    auto d_h = to_device(hin), d_y = to_device(y), d_w = to_device(w), d_dout = to_device(dout), d_dx = to_device(dx);
    DeviceBuffer<float> d_x((size_t)M * C), d_out((size_t)N * C), d_dy((size_t)M * C), d_dh((size_t)N * C);
    DeviceBuffer<float> d_dgate = to_device(random_normal(rng, (size_t)N * K));  // overwritten, dropped ones to 0
    cuda::moe_permute(ctx, d_x.data(), d_h.data(), d_slot.data(), N, K, C);
    cuda::moe_unpermute(ctx, d_out.data(), d_y.data(), d_w.data(), d_slot.data(), N, K, C);
    cuda::moe_unpermute_backward(ctx, d_dy.data(), d_dgate.data(), d_dout.data(), d_y.data(), d_w.data(), d_slot.data(),
                                 N, K, C);
    cuda::moe_permute_backward(ctx, d_dh.data(), d_dx.data(), d_slot.data(), N, K, C);
    ctx.synchronize();
    c.expect_close("permute x", x, d_x, kExact);
    c.expect_close("unpermute out", out, d_out, {1e-6, 1e-6});
    c.expect_close("unpermute bwd dy", dy, d_dy, kExact);
    c.expect_close("unpermute bwd dgate_w", dgate, d_dgate, {1e-5, 1e-5});
    c.expect_close("permute bwd dh", dh, d_dh, kExact);
}

// ---- one whole MoE layer (layout, permute, experts, unpermute; and back) vs LocalMoeExecutor -----------------
// The executor is the model's oracle for the expert computation. Chains two GEMMs (C = 64, F = 96), gelu and
// the combine; weights N(0, 0.1), inputs N(0, 1): out, dh, dgate_w and the weight gradients atol 1e-4,
// rtol 1e-3.
void test_moe_experts(Case& c, Rng& rng, Context& ctx) {
    const int N = 203, K = 2, E = 6, C = 64, F = 96;
    const Tolerance tol{1e-4, 1e-3};
    auto idx = random_routing(rng, N, K, E);
    auto h = random_normal(rng, (size_t)N * C), gate_w = random_normal(rng, (size_t)N * K, 0.5);
    auto dout = random_normal(rng, (size_t)N * C);
    auto w1 = random_normal(rng, (size_t)E * C * F, 0.1), w2 = random_normal(rng, (size_t)E * F * C, 0.1);
    std::vector<float> dw1(w1.size(), 0.0f), dw2(w2.size(), 0.0f);
    std::vector<ExpertWeights<float>> weights;
    for (int e = 0; e < E; e++)
        weights.push_back({w1.data() + (size_t)e * C * F, w2.data() + (size_t)e * F * C, dw1.data() + (size_t)e * C * F,
                           dw2.data() + (size_t)e * F * C});
    LocalMoeExecutor<float> local(1, E, K, C, F, weights);
    std::vector<float> out((size_t)N * C), dh((size_t)N * C), dgate((size_t)N * K);
    local.forward(0, N, h.data(), idx.data(), gate_w.data(), out.data());
    local.backward(0, N, dout.data(), dh.data(), dgate.data());

    auto d_idx = to_device(idx);
    auto d_h = to_device(h), d_gw = to_device(gate_w), d_dout = to_device(dout);
    auto d_w1 = to_device(w1), d_w2 = to_device(w2);
    DeviceBuffer<float> d_dw1 = to_device(std::vector<float>(w1.size(), 0.0f));
    DeviceBuffer<float> d_dw2 = to_device(std::vector<float>(w2.size(), 0.0f));
    DeviceBuffer<int> d_off(E + 1), d_slot((size_t)N * K), d_tok((size_t)N * K);
    cuda::moe_layout(ctx, d_off.data(), d_slot.data(), d_tok.data(), d_idx.data(), N, K, E);
    const std::vector<int> off = cuda::moe_offsets_to_host(ctx, d_off.data(), E);
    const size_t M = (size_t)off[E];
    std::vector<const float*> pw1(E), pw2(E);
    std::vector<float*> pdw1(E), pdw2(E);
    for (int e = 0; e < E; e++) {
        pw1[e] = d_w1.data() + (size_t)e * C * F, pw2[e] = d_w2.data() + (size_t)e * F * C;
        pdw1[e] = d_dw1.data() + (size_t)e * C * F, pdw2[e] = d_dw2.data() + (size_t)e * F * C;
    }
    DeviceBuffer<float> x(M * C), pre(M * F), act(M * F), y(M * C), d_out((size_t)N * C);
    DeviceBuffer<float> dy(M * C), dpre(M * F), dx(M * C), d_dh((size_t)N * C), d_dgate((size_t)N * K);
    cuda::moe_permute(ctx, x.data(), d_h.data(), d_slot.data(), N, K, C);
    cuda::moe_experts_forward(ctx, pre.data(), act.data(), y.data(), x.data(), off, pw1.data(), pw2.data(), C, F);
    cuda::moe_unpermute(ctx, d_out.data(), y.data(), d_gw.data(), d_slot.data(), N, K, C);
    cuda::moe_unpermute_backward(ctx, dy.data(), d_dgate.data(), d_dout.data(), y.data(), d_gw.data(), d_slot.data(), N,
                                 K, C);
    cuda::moe_experts_backward(ctx, dx.data(), dpre.data(), dy.data(), x.data(), pre.data(), act.data(), off,
                               pw1.data(), pw2.data(), pdw1.data(), pdw2.data(), C, F);
    cuda::moe_permute_backward(ctx, d_dh.data(), dx.data(), d_slot.data(), N, K, C);
    ctx.synchronize();
    c.expect_close("out", out, d_out, tol);
    c.expect_close("dh", dh, d_dh, tol);
    c.expect_close("dgate_w", dgate, d_dgate, tol);
    c.expect_close("dw1 (+=)", dw1, d_dw1, tol);
    c.expect_close("dw2 (+=)", dw2, d_dw2, tol);
}

// ---- tied cross-entropy ------------------------------------------------------------------------------------
// logits: GEMM over C = 64; softmax over V = 1003 with block-reduced sums: probs atol 1e-6, rtol 1e-4; the loss
// (a double sum of N per-row float terms) rtol 1e-5. backward: GEMMs over V and N: atol 1e-5, rtol 1e-4 (the
// gradients are O(1/N) after the 1/denominator).
void test_crossentropy(Case& c, Rng& rng, Context& ctx) {
    const int N = 129, C = 64, V = 1003;
    const double denom = 2.0 * N;  // a global token count larger than this rank's N, as in a multi-rank run
    auto x = random_normal(rng, (size_t)N * C), wte = random_normal(rng, (size_t)V * C, 0.3);
    auto targets = random_ints(rng, N, V);
    auto dwte = random_normal(rng, wte.size(), 0.01);
    std::vector<float> probs((size_t)N * V), dx((size_t)N * C);
    const double loss = crossentropy_tied_forward(probs.data(), x.data(), wte.data(), targets.data(), N, C, V, denom);
    const std::vector<float> probs_fwd = probs;
    auto d_x = to_device(x), d_wte = to_device(wte), d_dwte = to_device(dwte);
    auto d_targets = to_device(targets);
    DeviceBuffer<float> d_probs(probs.size()), d_dx(dx.size());
    const double d_loss = cuda::crossentropy_tied_forward(ctx, d_probs.data(), d_x.data(), d_wte.data(),
                                                          d_targets.data(), N, C, V, denom);
    c.expect_close("loss", loss, d_loss, {0.0, 1e-5});
    c.expect_close("probs", probs_fwd, d_probs, {1e-6, 1e-4});
    crossentropy_tied_backward(dx.data(), dwte.data(), probs.data(), x.data(), wte.data(), targets.data(), N, C, V,
                               denom);
    auto d_probs_cpu = to_device(probs_fwd);  // backward from the CPU's probs
    cuda::crossentropy_tied_backward(ctx, d_dx.data(), d_dwte.data(), d_probs_cpu.data(), d_x.data(), d_wte.data(),
                                     d_targets.data(), N, C, V, denom);
    ctx.synchronize();
    c.expect_close("dlogits (in probs)", probs, d_probs_cpu, {1e-7, 1e-5});
    c.expect_close("dx", dx, d_dx, {1e-5, 1e-4});
    c.expect_close("dwte (+=)", dwte, d_dwte, {1e-5, 1e-4});
}

// ---- AdamW and the gradient norm -----------------------------------------------------------------------------
// AdamW: the same float operations in the same order, except that nvcc may fuse b*m + (1-b)*g into an FMA (one
// rounding fewer): m, v rtol 1e-6 (a few ulp); param after 3 steps at lr 1e-3: atol 1e-7, rtol 1e-6.
// sum_squares: double sums of float squares in another order: rtol 1e-10.
void test_optimizer(Case& c, Rng& rng, Context& ctx) {
    const size_t n = 50021;
    auto param = random_normal(rng, n), m = std::vector<float>(n, 0.0f), v = std::vector<float>(n, 0.0f);
    auto d_param = to_device(param), d_m = to_device(m), d_v = to_device(v);
    for (long t = 1; t <= 3; t++) {
        auto grad = random_normal(rng, n, 0.1);
        auto d_grad = to_device(grad);
        adamw_update(param.data(), grad.data(), m.data(), v.data(), n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t, 0.7);
        cuda::adamw_update(ctx, d_param.data(), d_grad.data(), d_m.data(), d_v.data(), n, 1e-3, 0.9, 0.95, 1e-8, 0.1, t,
                           0.7);
        ctx.synchronize();  // d_grad is freed at the end of this iteration
    }
    c.expect_close("param (3 steps)", param, d_param, {1e-7, 1e-6});
    c.expect_close("m", m, d_m, {1e-9, 1e-6});
    c.expect_close("v", v, d_v, {1e-12, 1e-6});
    const size_t big = 3000017;  // more than one block's worth per partial: the two-stage reduction
    auto x = random_normal(rng, big);
    auto d_xs = to_device(x);
    c.expect_close("sum_squares", sum_squares(x.data(), big), cuda::sum_squares(ctx, d_xs.data(), big), {0.0, 1e-10});
}

// ---- 20 training steps: the GPU model against the CPU model ---------------------------------------------------
// The acceptance check: forward + backward + grad clip + AdamW, 20 steps from the same initial
// parameters on the same batches; every step's loss within 1e-4 relative of the CPU model's. (Each op's own
// differences, above, compound over 20 steps; a flipped top-K choice between two nearly equal gate logits
// would show here.) The grads of step 1 are compared too: atol 1e-5, rtol 1e-2 (small gradients, summed).
}  // namespace

// 20 steps (fwd, bwd, clip, AdamW) of the CPU Model<float> and a GpuModel on ctx from the same parameters and
// batches (L 2, E 4, K 2); step1(cpu, gpu) runs after the first backward. Returns the worst relative loss gap;
// `losses` gets steps 1 and 20 for the message. Also used by the bf16 test (precision_tests.cpp).
double model_loss_gap(Rng& rng, Context& ctx, const std::function<void(Model<float>&, cuda::GpuModel&)>& step1,
                      std::string* losses) {
    ModelConfig cfg;
    cfg.V = 97, cfg.T = 32, cfg.C = 64, cfg.NH = 4, cfg.L = 2, cfg.E = 4, cfg.K = 2, cfg.F = 96, cfg.B = 4;
    cfg.seed = 7;
    Model<float> cpu(cfg);
    cuda::GpuModel gpu(ctx, cpu);
    const AdamWConfig adamw;
    const int N = cfg.B * cfg.T;
    double worst = 0.0;
    for (int step = 0; step < 20; step++) {
        auto inputs = random_ints(rng, N, cfg.V), targets = random_ints(rng, N, cfg.V);
        model_zero_grad(cpu);
        const double cpu_loss = model_forward(cpu, inputs.data(), targets.data(), cfg.B, double(N));
        model_backward(cpu);
        const double cpu_scale = grad_clip_scale(std::sqrt(grad_norm_sq(cpu)), 1.0);
        adamw_step(cpu, 3e-3, adamw, cpu_scale);
        gpu.zero_grad();
        const double gpu_loss = gpu.forward(inputs.data(), targets.data(), cfg.B, double(N));
        gpu.backward();
        if (step == 0 && step1) step1(cpu, gpu);
        const double gpu_scale = grad_clip_scale(std::sqrt(gpu.grad_norm_sq()), 1.0);
        gpu.adamw_step(3e-3, adamw, gpu_scale);
        ctx.synchronize();
        worst = std::max(worst, std::fabs(gpu_loss - cpu_loss) / std::fabs(cpu_loss));
        if (step == 0 || step == 19)
            *losses += " step " + std::to_string(step + 1) + " cpu " + std::to_string(cpu_loss) + " gpu " +
                       std::to_string(gpu_loss) + ";";
    }
    return worst;
}

namespace {

void test_model_steps(Case& c, Rng& rng, Context& ctx) {
    std::string losses;
    const double worst = model_loss_gap(
        rng, ctx,
        [&](Model<float>& cpu, cuda::GpuModel& gpu) {
            std::vector<float> cpu_grads(cpu.grads.begin(), cpu.grads.end());
            c.expect_close("grads (step 1)", cpu_grads, gpu.download_grads(), {1e-5, 1e-2});
        },
        &losses);
    c.expect_true("20 losses within 1e-4 rel", worst <= 1e-4, "worst rel " + std::to_string(worst) + losses);
}

// ---- errors: bad ids become a prophet::Error at synchronize; CUDA failures name the call ---------------------
void test_errors(Case& c, Rng& rng, Context& ctx) {
    const int B = 1, T = 4, C = 8, V = 10;
    std::vector<int> tokens = {1, 2, 10, 3};  // 10 is outside [0, V)
    auto d_tokens = to_device(tokens);
    auto wte = to_device(random_normal(rng, (size_t)V * C)), wpe = to_device(random_normal(rng, (size_t)T * C));
    DeviceBuffer<float> out((size_t)B * T * C);
    std::string message;
    try {
        cuda::encoder_forward(ctx, out.data(), d_tokens.data(), wte.data(), wpe.data(), B, T, C, V);
        ctx.synchronize();
    } catch (const Error& e) {
        message = e.what();
    }
    c.expect_true("bad token id", message.find("token id outside [0,V)") != std::string::npos, "'" + message + "'");
    bool usable = true;
    try {
        ctx.synchronize();  // the flag was cleared: the context works on
    } catch (const Error&) {
        usable = false;
    }
    c.expect_true("context usable after", usable, "");

    message.clear();
    int code = 0;
    try {
        DeviceBuffer<float> huge(size_t(1) << 46);  // 256 TiB
    } catch (const Error& e) {
        message = e.what();
        code = e.exit_code();
    }
    c.expect_true("out of memory", code == kExitResource && message.find("cudaMalloc") != std::string::npos,
                  "exit " + std::to_string(code) + " '" + message + "'");
}

}  // namespace

void test_step_model(Case& c, Rng& rng, cuda::Context& ctx);  // step_model_tests.cpp
void test_gemm_grouped(Case& c, Rng& rng, cuda::Context& ctx);  // precision_tests.cpp
void test_bf16(Case& c, Rng& rng, cuda::Context& ctx);          // precision_tests.cpp
void test_expert_compute(Case& c, Rng& rng, cuda::Context& ctx);  // expert_compute_tests.cpp
void test_event_timeline(Case& c, Rng& rng, cuda::Context& ctx);  // timeline_tests.cpp
void test_ep_two_ranks(Case& c, Rng& rng, cuda::Context& ctx);    // ep_tests.cpp

const std::vector<OpTest>& op_tests() {
    static const std::vector<OpTest> tests = {
        {"gemm", test_gemm},
        {"gemm_grouped", test_gemm_grouped},
        {"encoder", test_encoder},
        {"layernorm", test_layernorm},
        {"matmul", test_matmul},
        {"attention", test_attention},
        {"elementwise", test_elementwise},
        {"softmax", test_softmax},
        {"gate_topk", test_gate_topk},
        {"moe_layout", test_moe_layout},
        {"moe_permute", test_moe_permute},
        {"moe_experts", test_moe_experts},
        {"expert_compute", test_expert_compute},
        {"crossentropy", test_crossentropy},
        {"optimizer", test_optimizer},
        {"model_steps", test_model_steps},
        {"step_model", test_step_model},
        {"event_timeline", test_event_timeline},
        {"ep_two_ranks", test_ep_two_ranks},
        {"bf16", test_bf16},
        {"errors", test_errors},
    };
    return tests;
}

}  // namespace prophet::gputest
