// kernels.cpp: CPU reference implementations of the ops in kernels.h (float and double instantiations).
//
// Written for reading first (llm.c's train_gpt2.c is the model): plain loops, GEMMs through gemm(). The loops
// that matter for speed are the GEMMs (attention runs them per (batch, head) on strided views of qkv, so no
// copies), everything else is O(N*C) and small next to them at the model's shapes.
#include "kernels/kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/blas.h"

namespace prophet {

// ---- embedding ---------------------------------------------------------------------------------------------

template <typename Float>
void encoder_forward(Float* out, const int* tokens, const Float* wte, const Float* wpe, int B, int T, int C, int V) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const int token = tokens[b * T + t];
            PROPHET_ASSERT_MSG(token >= 0 && token < V, "token id out of range [0, V)");
            Float* out_bt = out + ((size_t)b * T + t) * C;  // [C]
            const Float* wte_ix = wte + (size_t)token * C;  // [C]
            const Float* wpe_t = wpe + (size_t)t * C;       // [C]
            for (int c = 0; c < C; c++) out_bt[c] = wte_ix[c] + wpe_t[c];
        }
    }
}

template <typename Float>
void encoder_backward(Float* dwte, Float* dwpe, const Float* dout, const int* tokens, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const Float* dout_bt = dout + ((size_t)b * T + t) * C;         // [C]
            Float* dwte_ix = dwte + (size_t)tokens[b * T + t] * C;         // [C]
            Float* dwpe_t = dwpe + (size_t)t * C;                          // [C]
            for (int c = 0; c < C; c++) {
                dwte_ix[c] += dout_bt[c];
                dwpe_t[c] += dout_bt[c];
            }
        }
    }
}

// ---- layernorm ---------------------------------------------------------------------------------------------

template <typename Float>
void layernorm_forward(Float* out, Float* mean, Float* rstd, const Float* inp, const Float* weight,
                       const Float* bias, int N, int C) {
    const Float eps = Float(1e-5);
    for (int n = 0; n < N; n++) {
        const Float* x = inp + (size_t)n * C;  // [C]
        Float m = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        Float v = 0;  // biased variance, as torch.nn.LayerNorm
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        const Float s = Float(1) / std::sqrt(v + eps);
        Float* o = out + (size_t)n * C;  // [C]
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

template <typename Float>
void layernorm_backward(Float* dinp, Float* dweight, Float* dbias, const Float* dout, const Float* inp,
                        const Float* weight, const Float* mean, const Float* rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        const Float* dout_n = dout + (size_t)n * C;  // [C]
        const Float* inp_n = inp + (size_t)n * C;    // [C]
        Float* dinp_n = dinp + (size_t)n * C;        // [C]
        const Float m = mean[n];
        const Float s = rstd[n];
        // two reductions: mean of dnorm and mean of dnorm * norm (d of the mean and of the variance)
        Float dnorm_mean = 0;
        Float dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            const Float norm = (inp_n[c] - m) * s;
            const Float dnorm = weight[c] * dout_n[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            const Float norm = (inp_n[c] - m) * s;
            const Float dnorm = weight[c] * dout_n[c];
            dbias[c] += dout_n[c];
            dweight[c] += norm * dout_n[c];
            dinp_n[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

// ---- matmul ------------------------------------------------------------------------------------------------

template <typename Float>
void matmul_forward(Float* out, const Float* inp, const Float* weight, const Float* bias, int N, int IC, int OC) {
    Float beta = 0;
    if (bias != nullptr) {
        // seed every row with the bias, then let the GEMM add inp . weight on top (beta = 1): one pass over out
        for (int n = 0; n < N; n++) std::memcpy(out + (size_t)n * OC, bias, sizeof(Float) * OC);
        beta = 1;
    }
    gemm<Float>(false, false, N, OC, IC, Float(1), inp, IC, weight, OC, beta, out, OC);
}

template <typename Float>
void matmul_backward(Float* dinp, Float* dweight, Float* dbias, const Float* dout, const Float* inp,
                     const Float* weight, int N, int IC, int OC, bool accumulate_dinp) {
    if (dinp != nullptr) {
        // dinp [N,IC] = dout [N,OC] . weight^T [OC,IC]
        gemm<Float>(false, true, N, IC, OC, Float(1), dout, OC, weight, OC, Float(accumulate_dinp ? 1 : 0), dinp, IC);
    }
    // dweight [IC,OC] += inp^T [IC,N] . dout [N,OC]
    gemm<Float>(true, false, IC, OC, N, Float(1), inp, IC, dout, OC, Float(1), dweight, OC);
    if (dbias != nullptr) {
        for (int n = 0; n < N; n++) {
            const Float* dout_n = dout + (size_t)n * OC;  // [OC]
            for (int o = 0; o < OC; o++) dbias[o] += dout_n[o];
        }
    }
}

// ---- attention ---------------------------------------------------------------------------------------------
// Per (b, h): S = q k^T * scale [T,T] and y = P v [T,hs] are GEMMs on strided views (row stride 3C in qkv, C in
// out). The GEMM computes the whole T x T block and the softmax zeroes the masked upper triangle: twice the
// causal work, but at T = 64 a full small GEMM is far faster than a triangular loop.

namespace {

// Where head h of batch row b lives: its q in qkv [B,T,3C] at `qkv` (k and v follow at +C and +2C), its output
// columns in a [B,T,C] tensor at `out`, its probabilities [T,T] in att [B,NH,T,T] at `att`.
struct HeadAt {
    size_t qkv, out, att;
};

HeadAt head_at(int b, int h, int T, int C, int NH) {
    const int hs = C / NH;
    return {static_cast<size_t>(b) * T * 3 * C + h * hs, static_cast<size_t>(b) * T * C + h * hs,
            (static_cast<size_t>(b) * NH + h) * T * T};
}

// the q, k and v of the head whose q is at `at` in a [B,T,3C] tensor: each [T,hs], row stride 3C
template <typename P>
std::array<P*, 3> head_qkv(P* qkv, size_t at, int C) {
    return {qkv + at, qkv + at + C, qkv + at + 2 * C};
}

// fn(where head h of batch row b lives) for every (b, h), b-major
template <typename Fn>
void for_each_head(int B, int T, int C, int NH, Fn fn) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) fn(head_at(b, h, T, C, NH));
}

}  // namespace

template <typename Float>
void attention_forward(Float* out, Float* att, const Float* qkv, int B, int T, int C, int NH) {
    PROPHET_ASSERT(C % NH == 0);
    const int hs = C / NH;
    const int C3 = 3 * C;
    const Float scale = Float(1) / std::sqrt(Float(hs));
    for_each_head(B, T, C, NH, [&](const HeadAt& at) {
        const auto [q, k, v] = head_qkv(qkv, at.qkv, C);  // [T,hs] each, row stride 3C
        Float* att_bh = att + at.att;                     // [T,T]
        Float* out_bh = out + at.out;                     // [T,hs], row stride C
        gemm<Float>(false, true, T, T, hs, scale, q, C3, k, C3, static_cast<Float>(0), att_bh, T);
        for (int i = 0; i < T; i++) {
            Float* row = att_bh + static_cast<size_t>(i) * T;  // [T]; only j <= i is visible to query i
            Float maxval = row[0];
            for (int j = 1; j <= i; j++) maxval = std::max(maxval, row[j]);
            Float sum = 0;
            for (int j = 0; j <= i; j++) {
                row[j] = std::exp(row[j] - maxval);
                sum += row[j];
            }
            const Float inv_sum = static_cast<Float>(1) / sum;
            for (int j = 0; j <= i; j++) row[j] *= inv_sum;
            for (int j = i + 1; j < T; j++) row[j] = 0;
        }
        gemm<Float>(false, false, T, hs, T, static_cast<Float>(1), att_bh, T, v, C3, static_cast<Float>(0), out_bh, C);
    });
}

template <typename Float>
void attention_backward(Float* dqkv, Float* scratch, const Float* dout, const Float* qkv, const Float* att, int B,
                        int T, int C, int NH) {
    const int hs = C / NH;
    const int C3 = 3 * C;
    const Float scale = Float(1) / std::sqrt(Float(hs));
    for_each_head(B, T, C, NH, [&](const HeadAt& at) {
        const auto [q, k, v] = head_qkv(qkv, at.qkv, C);      // [T,hs] each, row stride 3C
        const auto [dq, dk, dv] = head_qkv(dqkv, at.qkv, C);  // [T,hs] each, row stride 3C
        const Float* att_bh = att + at.att;                   // [T,T]
        const Float* dout_bh = dout + at.out;                 // [T,hs], row stride C
        Float* datt = scratch;                                // [T,T]
        // y = P v: dP = dy v^T, dv = P^T dy
        gemm<Float>(false, true, T, T, hs, static_cast<Float>(1), dout_bh, C, v, C3, static_cast<Float>(0), datt, T);
        gemm<Float>(true, false, T, hs, T, static_cast<Float>(1), att_bh, T, dout_bh, C, static_cast<Float>(0), dv, C3);
        // softmax backward, in place: dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'); masked entries get 0
        for (int i = 0; i < T; i++) {
            const Float* p = att_bh + static_cast<size_t>(i) * T;  // [T]
            Float* d = datt + static_cast<size_t>(i) * T;          // [T]
            Float dot = 0;
            for (int j = 0; j <= i; j++) dot += p[j] * d[j];
            for (int j = 0; j <= i; j++) d[j] = p[j] * (d[j] - dot);
            for (int j = i + 1; j < T; j++) d[j] = 0;
        }
        // S = scale q k^T: dq = scale dS k, dk = scale dS^T q
        gemm<Float>(false, false, T, hs, T, scale, datt, T, k, C3, static_cast<Float>(0), dq, C3);
        gemm<Float>(true, false, T, hs, T, scale, datt, T, q, C3, static_cast<Float>(0), dk, C3);
    });
}

// ---- gelu --------------------------------------------------------------------------------------------------
// The float path is the one that trains and gelu runs on every expert activation (N*K*F per layer, twice), so
// it gets a tanh that vectorizes: glibc's tanhf is a scalar call into expm1f and took ~25% of a training step.
// tanh_f32 is Eigen's rational approximation (x*P(x^2)/Q(x^2), clamped where tanh rounds to +-1 in float):
// max abs error 3e-7 vs tanh in double over [-12, 12] (test Kernels.FastTanhIsAccurate), i.e. a few float ulps.
// The double path (gradient checks) keeps std::tanh. target_clones compiles the float loops for AVX-512, AVX2 and
// baseline x86-64 and picks one at load time from the CPU, so no instruction the CPU lacks ever runs; the
// per-element math is identical in every clone (no reassociation, no FMA contraction under -std=c++20).

// GCC on x86-64: clone per ISA; elsewhere a plain function (the same code, baseline ISA).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PROPHET_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define PROPHET_ISA_CLONES
#endif

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

inline __attribute__((always_inline)) float tanh_f32_inline(float x) {
    const float clamp = 7.90531110763549805f;
    x = x > clamp ? clamp : x;
    x = x < -clamp ? -clamp : x;
    const float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

PROPHET_ISA_CLONES
void gelu_forward_f32(float* out, const float* inp, size_t n) {
    const float s = float(kSqrt2OverPi);
    const float a = float(kGeluCubic);
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_f32_inline(s * (x + a * x * x * x)));
    }
}

PROPHET_ISA_CLONES
void gelu_backward_f32(float* dinp, const float* inp, const float* dout, size_t n) {
    const float s = float(kSqrt2OverPi);
    const float a = float(kGeluCubic);
    const float a3 = float(3.0 * kGeluCubic);
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float t = tanh_f32_inline(s * (x + a * x * x * x));
        const float local = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + a3 * x * x);
        dinp[i] = local * dout[i];
    }
}

}  // namespace

float tanh_f32(float x) { return tanh_f32_inline(x); }

template <typename Float>
void gelu_forward(Float* out, const Float* inp, size_t n) {
    if constexpr (std::is_same_v<Float, float>) {
        gelu_forward_f32(out, inp, n);
    } else {
        const Float s = Float(kSqrt2OverPi);
        for (size_t i = 0; i < n; i++) {
            const Float x = inp[i];
            const Float cube = Float(kGeluCubic) * x * x * x;
            out[i] = Float(0.5) * x * (Float(1) + std::tanh(s * (x + cube)));
        }
    }
}

template <typename Float>
void gelu_backward(Float* dinp, const Float* inp, const Float* dout, size_t n) {
    if constexpr (std::is_same_v<Float, float>) {
        gelu_backward_f32(dinp, inp, dout, n);
    } else {
        const Float s = Float(kSqrt2OverPi);
        for (size_t i = 0; i < n; i++) {
            const Float x = inp[i];
            const Float cube = Float(kGeluCubic) * x * x * x;
            const Float t = std::tanh(s * (x + cube));
            const Float sech2 = Float(1) - t * t;
            const Float local = Float(0.5) * (Float(1) + t) +
                                Float(0.5) * x * sech2 * s * (Float(1) + Float(3.0 * kGeluCubic) * x * x);
            dinp[i] = local * dout[i];
        }
    }
}

// ---- residual ----------------------------------------------------------------------------------------------

template <typename Float>
void residual_forward(Float* out, const Float* a, const Float* b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// ---- row softmax -------------------------------------------------------------------------------------------

template <typename Float>
void softmax_forward(Float* probs, const Float* logits, int N, int E) {
    for (int n = 0; n < N; n++) {
        const Float* l = logits + (size_t)n * E;  // [E]
        Float* p = probs + (size_t)n * E;         // [E]
        Float maxval = l[0];
        for (int e = 1; e < E; e++) maxval = std::max(maxval, l[e]);
        Float sum = 0;
        for (int e = 0; e < E; e++) {
            p[e] = std::exp(l[e] - maxval);
            sum += p[e];
        }
        for (int e = 0; e < E; e++) p[e] /= sum;
    }
}

template <typename Float>
void softmax_backward(Float* dlogits, const Float* dprobs, const Float* probs, int N, int E) {
    for (int n = 0; n < N; n++) {
        const Float* dp = dprobs + (size_t)n * E;  // [E]
        const Float* p = probs + (size_t)n * E;    // [E]
        Float* dl = dlogits + (size_t)n * E;       // [E]
        Float dot = 0;
        for (int e = 0; e < E; e++) dot += p[e] * dp[e];
        for (int e = 0; e < E; e++) dl[e] += p[e] * (dp[e] - dot);
    }
}

// ---- MoE gate ----------------------------------------------------------------------------------------------

template <typename Float>
void gate_topk_forward(int* expert_idx, Float* gate_w, const Float* logits, int N, int E, int K) {
    PROPHET_ASSERT(K >= 1 && K <= E);
    std::vector<char> taken(E);  // [E] per token: already selected
    for (int n = 0; n < N; n++) {
        const Float* l = logits + (size_t)n * E;  // [E]
        int* idx = expert_idx + (size_t)n * K;    // [K]
        Float* w = gate_w + (size_t)n * K;        // [K]
        std::fill(taken.begin(), taken.end(), 0);
        for (int k = 0; k < K; k++) {
            // strict '>' scanning upward keeps the lowest index among equal logits
            int best = -1;
            for (int e = 0; e < E; e++) {
                if (!taken[e] && (best < 0 || l[e] > l[best])) best = e;
            }
            taken[best] = 1;
            idx[k] = best;
        }
        // softmax over the K selected logits; idx[0] holds the largest
        const Float maxval = l[idx[0]];
        Float sum = 0;
        for (int k = 0; k < K; k++) {
            w[k] = std::exp(l[idx[k]] - maxval);
            sum += w[k];
        }
        for (int k = 0; k < K; k++) w[k] /= sum;
    }
}

template <typename Float>
void gate_topk_backward(Float* dlogits, const Float* dgate_w, const Float* gate_w, const int* expert_idx, int N,
                        int E, int K) {
    for (int n = 0; n < N; n++) {
        const Float* dw = dgate_w + (size_t)n * K;     // [K]
        const Float* w = gate_w + (size_t)n * K;       // [K]
        const int* idx = expert_idx + (size_t)n * K;   // [K]
        Float* dl = dlogits + (size_t)n * E;           // [E]
        for (int e = 0; e < E; e++) dl[e] = 0;
        Float dot = 0;
        for (int k = 0; k < K; k++) dot += w[k] * dw[k];
        for (int k = 0; k < K; k++) dl[idx[k]] = w[k] * (dw[k] - dot);  // selected experts are distinct
    }
}

// ---- tied output + cross-entropy ---------------------------------------------------------------------------

template <typename Float>
double crossentropy_tied_forward(Float* probs, const Float* x, const Float* wte, const int* targets, int N, int C,
                                 int V, double loss_denominator) {
    // logits [N,V] = x [N,C] . wte^T [C,V], written into probs and normalised there
    gemm<Float>(false, true, N, V, C, Float(1), x, C, wte, C, Float(0), probs, V);
    double loss_sum = 0;  // double: a sum over every token of the batch
    for (int n = 0; n < N; n++) {
        Float* p = probs + (size_t)n * V;  // [V]
        const int target = targets[n];
        PROPHET_ASSERT_MSG(target >= 0 && target < V, "target id out of range [0, V)");
        Float maxval = p[0];
        for (int v = 1; v < V; v++) maxval = std::max(maxval, p[v]);
        const Float target_logit = p[target];
        Float sum = 0;
        for (int v = 0; v < V; v++) {
            p[v] = std::exp(p[v] - maxval);
            sum += p[v];
        }
        const Float inv_sum = Float(1) / sum;
        for (int v = 0; v < V; v++) p[v] *= inv_sum;
        // -log p_target from the logits, not log(p): no underflow to log(0) for a confident wrong prediction
        loss_sum += -(double(target_logit) - double(maxval) - std::log(double(sum)));
    }
    return loss_sum / loss_denominator;
}

template <typename Float>
void crossentropy_tied_backward(Float* dx, Float* dwte, Float* probs, const Float* x, const Float* wte,
                                const int* targets, int N, int C, int V, double loss_denominator) {
    const Float inv_denominator = Float(1.0 / loss_denominator);
    Float* dlogits = probs;  // [N,V], in place
    for (int n = 0; n < N; n++) {
        Float* d = dlogits + (size_t)n * V;  // [V]
        d[targets[n]] -= Float(1);
        for (int v = 0; v < V; v++) d[v] *= inv_denominator;
    }
    // dx [N,C] = dlogits [N,V] . wte [V,C];  dwte [V,C] += dlogits^T [V,N] . x [N,C]
    gemm<Float>(false, false, N, C, V, Float(1), dlogits, V, wte, C, Float(0), dx, C);
    gemm<Float>(true, false, V, C, N, Float(1), dlogits, V, x, C, Float(1), dwte, C);
}

// ---- instantiations ----------------------------------------------------------------------------------------

#define PROPHET_INSTANTIATE_KERNELS(Float)                                                                       \
    template void encoder_forward<Float>(Float*, const int*, const Float*, const Float*, int, int, int, int);    \
    template void encoder_backward<Float>(Float*, Float*, const Float*, const int*, int, int, int);              \
    template void layernorm_forward<Float>(Float*, Float*, Float*, const Float*, const Float*, const Float*, int, \
                                           int);                                                                 \
    template void layernorm_backward<Float>(Float*, Float*, Float*, const Float*, const Float*, const Float*,     \
                                            const Float*, const Float*, int, int);                               \
    template void matmul_forward<Float>(Float*, const Float*, const Float*, const Float*, int, int, int);         \
    template void matmul_backward<Float>(Float*, Float*, Float*, const Float*, const Float*, const Float*, int,    \
                                         int, int, bool);                                                        \
    template void attention_forward<Float>(Float*, Float*, const Float*, int, int, int, int);                    \
    template void attention_backward<Float>(Float*, Float*, const Float*, const Float*, const Float*, int, int,   \
                                            int, int);                                                           \
    template void gelu_forward<Float>(Float*, const Float*, size_t);                                             \
    template void gelu_backward<Float>(Float*, const Float*, const Float*, size_t);                              \
    template void residual_forward<Float>(Float*, const Float*, const Float*, size_t);                           \
    template void softmax_forward<Float>(Float*, const Float*, int, int);                                        \
    template void softmax_backward<Float>(Float*, const Float*, const Float*, int, int);                         \
    template void gate_topk_forward<Float>(int*, Float*, const Float*, int, int, int);                           \
    template void gate_topk_backward<Float>(Float*, const Float*, const Float*, const int*, int, int, int);      \
    template double crossentropy_tied_forward<Float>(Float*, const Float*, const Float*, const int*, int, int,   \
                                                     int, double);                                               \
    template void crossentropy_tied_backward<Float>(Float*, Float*, Float*, const Float*, const Float*,          \
                                                    const int*, int, int, int, double);

PROPHET_INSTANTIATE_KERNELS(float)
PROPHET_INSTANTIATE_KERNELS(double)

}  // namespace prophet
