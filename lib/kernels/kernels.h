// kernels.h: the CPU reference ops of the MoE-GPT, one signature per op, forward and backward.
//
// Every op is templated on the float type (float for training, double for the gradient checks) and
// instantiated for both in kernels.cpp. GEMMs go through gemm() (blas.h: OpenBLAS sgemm/dgemm, row-major).
// Shape letters (ARCHITECTURE.md): B batch sequences (this rank's), T sequence length, C channels, NH heads,
// V vocabulary, E experts, K experts per token, F expert hidden size; N = B*T tokens.
//
// Gradient conventions (llm.c's): parameter gradients always ACCUMULATE (+=), so the caller zeroes them once per
// step and gradient accumulation over micro-batches is free. Activation gradients say per op whether they
// overwrite or accumulate; "(+=)" marks the accumulating ones.
#pragma once

#include <cstddef>

namespace prophet {

// ---- embedding ---------------------------------------------------------------------------------------------
// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
// out [B,T,C], tokens [B,T] (each in [0,V)), wte [V,C], wpe [T,C]
template <typename Float>
void encoder_forward(Float* out, const int* tokens, const Float* wte, const Float* wpe, int B, int T, int C, int V);
// dwte (+=) [V,C], dwpe (+=) [T,C], dout [B,T,C]
template <typename Float>
void encoder_backward(Float* dwte, Float* dwpe, const Float* dout, const int* tokens, int B, int T, int C);

// ---- layernorm (eps 1e-5, biased variance, weight and bias) -------------------------------------------------
// out [N,C], mean [N], rstd [N] (saved for backward), inp [N,C], weight [C], bias [C]
template <typename Float>
void layernorm_forward(Float* out, Float* mean, Float* rstd, const Float* inp, const Float* weight,
                       const Float* bias, int N, int C);
// dinp (+=) [N,C] (the residual stream's gradient accumulates), dweight (+=) [C], dbias (+=) [C], dout [N,C]
template <typename Float>
void layernorm_backward(Float* dinp, Float* dweight, Float* dbias, const Float* dout, const Float* inp,
                        const Float* weight, const Float* mean, const Float* rstd, int N, int C);

// ---- matmul: out = inp . weight + bias -------------------------------------------------------------------
// out [N,OC], inp [N,IC], weight [IC,OC] (the layout ARCHITECTURE.md gives: Wqkv [C,3C]), bias [OC] or nullptr
template <typename Float>
void matmul_forward(Float* out, const Float* inp, const Float* weight, const Float* bias, int N, int IC, int OC);
// dinp [N,IC] (overwrite, or += when accumulate_dinp; nullptr skips it), dweight (+=) [IC,OC],
// dbias (+=) [OC] or nullptr, dout [N,OC]
template <typename Float>
void matmul_backward(Float* dinp, Float* dweight, Float* dbias, const Float* dout, const Float* inp,
                     const Float* weight, int N, int IC, int OC, bool accumulate_dinp);

// ---- causal multi-head self-attention ----------------------------------------------------------------------
// qkv [B,T,3C]: q in columns [0,C), k in [C,2C), v in [2C,3C); head h uses columns [h*hs, (h+1)*hs) of each,
// hs = C/NH. att[b,h,i,j] = softmax_j<=i(q_i.k_j / sqrt(hs)) (0 for j > i), out[b,i,h*hs:] = sum_j att v_j.
// out [B,T,C], att [B,NH,T,T] (saved for backward)
template <typename Float>
void attention_forward(Float* out, Float* att, const Float* qkv, int B, int T, int C, int NH);
// dqkv [B,T,3C] (overwrite), scratch [T,T], dout [B,T,C], qkv [B,T,3C], att [B,NH,T,T]
template <typename Float>
void attention_backward(Float* dqkv, Float* scratch, const Float* dout, const Float* qkv, const Float* att, int B,
                        int T, int C, int NH);

// ---- gelu, tanh approximation ------------------------------------------------------------------------------
// out [n] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may alias inp
template <typename Float>
void gelu_forward(Float* out, const Float* inp, size_t n);
// dinp [n] (overwrite; may alias dout) = gelu'(inp) * dout
template <typename Float>
void gelu_backward(Float* dinp, const Float* inp, const Float* dout, size_t n);
// The float path's tanh (a vectorizable rational approximation, max abs error 3e-7; see kernels.cpp).
float tanh_f32(float x);

// ---- residual ----------------------------------------------------------------------------------------------
// out [n] = a + b (out may alias a or b)
template <typename Float>
void residual_forward(Float* out, const Float* a, const Float* b, size_t n);

// ---- row softmax (the gate's full softmax for the auxiliary loss) ------------------------------------------
// probs [N,E] = softmax over each row of logits [N,E]
template <typename Float>
void softmax_forward(Float* probs, const Float* logits, int N, int E);
// dlogits (+=) [N,E] from dprobs [N,E], probs [N,E]
template <typename Float>
void softmax_backward(Float* dlogits, const Float* dprobs, const Float* probs, int N, int E);

// ---- MoE gate: top-K by logit, softmax over the K selected -----------------------------------------------
// (The gate's logits = h . Wg are a matmul_forward with bias nullptr.)
// expert_idx [N,K]: the K largest logits per token in descending order, ties to the lower expert index;
// gate_w [N,K] = softmax over those K logits; logits [N,E]
template <typename Float>
void gate_topk_forward(int* expert_idx, Float* gate_w, const Float* logits, int N, int E, int K);
// dlogits [N,E] (overwrite: zero outside the selected experts), dgate_w [N,K], gate_w [N,K], expert_idx [N,K]
// (the selection, every entry in [0,E): an assignment later dropped by a capacity limit still had its logit in
// the softmax, so the caller keeps the full selection here and passes dgate_w = 0 for dropped ones)
template <typename Float>
void gate_topk_backward(Float* dlogits, const Float* dgate_w, const Float* gate_w, const int* expert_idx, int N,
                        int E, int K);

// ---- tied output + cross-entropy ---------------------------------------------------------------------------
// logits = x . wte^T, probs = softmax(logits), returns sum_n -log probs[n, targets[n]] / loss_denominator.
// loss_denominator is the GLOBAL token count (B_global * T), so per-rank losses sum to the global mean.
// probs [N,V] (out, saved for backward), x [N,C], wte [V,C], targets [N] (each in [0,V))
template <typename Float>
double crossentropy_tied_forward(Float* probs, const Float* x, const Float* wte, const int* targets, int N, int C,
                                 int V, double loss_denominator);
// d(loss)/d(x) and d(loss)/d(wte) for d(loss) = 1. probs [N,V] is turned into dlogits in place.
// dx [N,C] (overwrite), dwte (+=) [V,C], x [N,C], wte [V,C], targets [N]
template <typename Float>
void crossentropy_tied_backward(Float* dx, Float* dwte, Float* probs, const Float* x, const Float* wte,
                                const int* targets, int N, int C, int V, double loss_denominator);

}  // namespace prophet
