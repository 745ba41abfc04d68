// ops.h: the GPU ops of the MoE-GPT, one launcher per CPU op of kernels/kernels.h and kernels/optim.h, fp32.
//
// Same names, shapes and conventions as the CPU ops (see kernels.h, docs/model.md): parameter gradients
// ACCUMULATE (+=), activation gradients overwrite unless marked "(+=)". Every pointer is DEVICE memory; every
// launcher enqueues on ctx.stream() and returns without waiting, except the two that return a number
// (crossentropy_tied_forward, sum_squares), which synchronize. Invalid ids in device arrays (a token outside
// [0,V), an expert outside [-1,E)) cannot throw from a kernel: the kernel skips the entry and raises a flag
// that the next ctx.synchronize() turns into a prophet::Error naming the op (see context.h).
//
// Shape letters: B, T, C, NH (hs = C/NH), V, E, K, F; N = B*T tokens; M kept (token, expert) assignments.
// Differences from the CPU op are numerical only (summation order, atomics in two backward ops, tanhf vs the
// CPU's rational tanh); tests/gpu/ gives each op's tolerance and why.
#pragma once

#include <cstddef>
#include <vector>

#include "cuda/context.h"

namespace prophet::cuda {

// ---- GEMM (cuBLAS) -----------------------------------------------------------------------------------------
// Row-major C[M,N] = alpha op(A) op(B) + beta C, op(A) [M,K], op(B) [K,N]; lda/ldb/ldc are row strides, as in
// kernels/blas.h's gemm(). K == 0 gives C = beta C.
void gemm(Context& ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);
// `count` independent GEMMs of one shape; A, B, C are DEVICE arrays of `count` device pointers.
void gemm_batched(Context& ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* const* A,
                  int lda, const float* const* B, int ldb, float beta, float* const* C, int ldc, int count);
// One row-major GEMM of a group; A, B, C are device pointers, lda/ldb/ldc row strides.
struct GemmProblem {
    int M, N, K;
    const float* A;
    int lda;
    const float* B;
    int ldb;
    float* C;
    int ldc;
};
// GEMMs of different sizes sharing the transposes and scalars (the experts' GEMMs of one MoE layer): one
// cublasGemmGroupedBatchedEx call; where cuBLAS answers NOT_SUPPORTED (a compute type without a grouped kernel)
// a loop of gemm() calls for the rest of the context's life (ctx.grouped_gemm_native() then reads false).
void gemm_grouped(Context& ctx, bool trans_a, bool trans_b, float alpha, float beta,
                  const std::vector<GemmProblem>& problems);

// ---- embedding ---------------------------------------------------------------------------------------------
// out [B,T,C], tokens [B,T], wte [V,C], wpe [T,C]
void encoder_forward(Context& ctx, float* out, const int* tokens, const float* wte, const float* wpe, int B, int T,
                     int C, int V);
// dwte (+=) [V,C] (atomicAdd: rows of repeated tokens sum in any order), dwpe (+=) [T,C] (fixed order)
void encoder_backward(Context& ctx, float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T,
                      int C, int V);

// ---- layernorm (eps 1e-5, biased variance) -----------------------------------------------------------------
void layernorm_forward(Context& ctx, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
// dinp (+=) [N,C], dweight (+=) [C], dbias (+=) [C] (column sums in a fixed order: deterministic)
void layernorm_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C);

// ---- matmul: out [N,OC] = inp [N,IC] . weight [IC,OC] + bias [OC] (bias may be nullptr) -----------------------
void matmul_forward(Context& ctx, float* out, const float* inp, const float* weight, const float* bias, int N, int IC,
                    int OC);
// dinp [N,IC] (overwrite, += when accumulate_dinp, nullptr skips), dweight (+=), dbias (+=) or nullptr
void matmul_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC, bool accumulate_dinp);

// ---- causal self-attention (batched cuBLAS GEMMs over (b, h) + a causal softmax kernel) ----------------------
// out [B,T,C], att [B,NH,T,T] (saved), qkv [B,T,3C]
void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dqkv [B,T,3C] (overwrite), datt [B,NH,T,T] (scratch: the CPU op's [T,T] scratch, one per (b, h)),
// dout [B,T,C], qkv, att as saved by forward
void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH);

// ---- elementwise ---------------------------------------------------------------------------------------------
void gelu_forward(Context& ctx, float* out, const float* inp, size_t n);                      // out may alias inp
void gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, size_t n);  // dinp may alias dout
void residual_forward(Context& ctx, float* out, const float* a, const float* b, size_t n);

// ---- row softmax (the gate's full softmax) -------------------------------------------------------------------
void softmax_forward(Context& ctx, float* probs, const float* logits, int N, int E);
void softmax_backward(Context& ctx, float* dlogits, const float* dprobs, const float* probs, int N, int E);  // (+=)

// ---- gate: top-K by logit (ties to the lower index), softmax over the K selected ------------------------------
constexpr int kMaxTopK = 16;  // K <= kMaxTopK (a per-thread array in the kernel)
void gate_topk_forward(Context& ctx, int* expert_idx, float* gate_w, const float* logits, int N, int E, int K);
void gate_topk_backward(Context& ctx, float* dlogits, const float* dgate_w, const float* gate_w, const int* expert_idx,
                        int N, int E, int K);

// ---- MoE permute / unpermute (the LocalMoeExecutor's layout, gather and combine, model/moe_executor.h) -------
// Layout: the kept assignments (expert_idx [N,K], -1 = dropped) stable-sorted by expert, as the CPU counting
// sort: expert_offsets [E+1] (slots of expert e: [off[e], off[e+1])), assignment_slot [N*K] (-1 if dropped),
// slot_token [N*K] (first M = off[E] used). Deterministic (no atomics).
void moe_layout(Context& ctx, int* expert_offsets, int* assignment_slot, int* slot_token, const int* expert_idx, int N,
                int K, int E);
// Copies expert_offsets [E+1] to the host (synchronizes): the per-expert GEMM sizes.
std::vector<int> moe_offsets_to_host(Context& ctx, const int* expert_offsets, int E);
// permute (gather): x [M,C]: row assignment_slot[a] = h [N,C] row a / K
void moe_permute(Context& ctx, float* x, const float* h, const int* assignment_slot, int N, int K, int C);
// its backward (scatter): dh [N,C] (overwrite) = sum over k (in k order) of dx [M,C] row slot(n,k)
void moe_permute_backward(Context& ctx, float* dh, const float* dx, const int* assignment_slot, int N, int K, int C);
// unpermute (combine): out [N,C] (overwrite) = sum over k (in k order) of gate_w[n,k] * y [M,C] row slot(n,k)
void moe_unpermute(Context& ctx, float* out, const float* y, const float* gate_w, const int* assignment_slot, int N,
                   int K, int C);
// its backward: dgate_w [N,K] (overwrite; 0 for dropped) = dout[n] . y[slot], dy [M,C] row slot = gate_w * dout[n]
void moe_unpermute_backward(Context& ctx, float* dy, float* dgate_w, const float* dout, const float* y,
                            const float* gate_w, const int* assignment_slot, int N, int K, int C);

// One layer's experts on expert-sorted rows: expert(x) = gelu(x W1) W2, one cuBLAS GEMM pair per non-empty expert.
// offsets [E+1] on the HOST (moe_offsets_to_host); w1[e] [C,F], w2[e] [F,C] device pointers (host arrays [E]).
// x [M,C]; pre [M,F], act [M,F], y [M,C] (out)
void moe_experts_forward(Context& ctx, float* pre, float* act, float* y, const float* x,
                         const std::vector<int>& offsets, const float* const* w1, const float* const* w2, int C, int F);
// dy [M,C]; dx [M,C] (overwrite), dpre [M,F] (scratch, overwritten), dw1[e], dw2[e] (+=)
void moe_experts_backward(Context& ctx, float* dx, float* dpre, const float* dy, const float* x, const float* pre,
                          const float* act, const std::vector<int>& offsets, const float* const* w1,
                          const float* const* w2, float* const* dw1, float* const* dw2, int C, int F);

// ---- tied output + cross-entropy -----------------------------------------------------------------------------
// probs [N,V] (out), x [N,C], wte [V,C], targets [N]; returns sum_n -log p[n,target] / loss_denominator
// (summed in double on the device, fixed order). Synchronizes.
double crossentropy_tied_forward(Context& ctx, float* probs, const float* x, const float* wte, const int* targets,
                                 int N, int C, int V, double loss_denominator);
// probs -> dlogits in place; dx [N,C] (overwrite), dwte (+=) [V,C]
void crossentropy_tied_backward(Context& ctx, float* dx, float* dwte, float* probs, const float* x, const float* wte,
                                const int* targets, int N, int C, int V, double loss_denominator);

// ---- optimizer -----------------------------------------------------------------------------------------------
// AdamW as kernels/optim.h's adamw_update: per-step scalars in double on the host, rounded to float once.
void adamw_update(Context& ctx, float* param, const float* grad, float* m, float* v, size_t n, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step_t, double grad_scale);
// sum of x[i]^2 in double, fixed reduction order (deterministic). Synchronizes.
double sum_squares(Context& ctx, const float* x, size_t n);

}  // namespace prophet::cuda
