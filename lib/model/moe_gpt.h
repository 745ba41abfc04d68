// moe_gpt.h: the MoE-GPT of ARCHITECTURE.md ("The model"): parameters, activations, forward, backward, AdamW.
//
// Pre-LayerNorm GPT-2 with an MoE MLP: x = wte[tok] + wpe[pos]; per block x += attn(ln1(x)); x += moe(ln2(x));
// then ln_f and a tied output (logits = x wte^T) with mean cross-entropy over the GLOBAL batch's tokens.
// Forward and backward are written out (no autograd), llm.c style; Model<double> is the float64 reference the
// gradient checks use, Model<float> is what trains.
//
// Typical step on one rank (the data-parallel all-reduce of dense grads and the grad-norm all-reduce go where
// marked when there are several ranks):
//
//   Model<float> model(config);
//   model_zero_grad(model);
//   double loss = model_forward(model, inputs, targets, B_local, B_global * T);  // inputs, targets [B_local,T]
//   model_backward(model);
//   // [all-reduce dense grads: model_dense_grads(model)]
//   double norm_sq = grad_norm_sq(model);   // [all-reduce]
//   adamw_step(model, lr, adamw, grad_clip_scale(std::sqrt(norm_sq), max_norm));
//
// Parameter arena layout (one contiguous block; grads and AdamW m, v have the same layout): all DENSE tensors
// first (wte, wpe, per layer ln1.w ln1.b attn.qkv.w attn.qkv.b attn.proj.w attn.proj.b ln2.w ln2.b moe.gate.w,
// then ln_f.w ln_f.b), then all EXPERT tensors (per layer, per expert: w1 then w2). So the dense grads are one
// span [0, num_dense_params) for the data-parallel all-reduce, and each expert's w1,w2 is one contiguous block of
// 2*C*F for sending it to a replica or summing its gradient back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/optim.h"
#include "model/model_config.h"
#include "model/moe_executor.h"
#include "schedule/timeline.h"

namespace prophet {

// ---- parameters --------------------------------------------------------------------------------------------

// One named tensor of the parameter arena.
struct ParamTensor {
    std::string name;        // "wte", "h.0.attn.qkv.w", "h.1.moe.experts.3.w2", ...
    std::vector<int> shape;  // row-major, e.g. {C, 3*C}
    size_t offset = 0;       // into the arena, in elements
    size_t size = 0;         // product of shape
    bool is_matrix = false;  // 2-D: weight decay applies
    bool is_expert = false;  // h.{l}.moe.experts.{e}.*: owned by one rank under expert parallelism
    int layer = -1;          // -1 for wte, wpe, ln_f.*
    int expert = -1;         // -1 unless is_expert
    double init_std = 0.0;   // normal(0, init_std); 0: constant init_value
    double init_value = 0.0; // LayerNorm weights 1, biases and LayerNorm biases 0
};

// Tensor indices into ParamLayout::tensors, per layer, so forward/backward read like the math.
struct LayerTensorIdx {
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, gate_w;
};

struct ParamLayout {
    std::vector<ParamTensor> tensors;  // in arena order (= initialisation order)
    int wte = -1, wpe = -1, ln_f_w = -1, ln_f_b = -1;
    std::vector<LayerTensorIdx> layers;  // [L]
    std::vector<int> expert_w1;          // [L*E] tensor index of h.{l}.moe.experts.{e}.w1
    std::vector<int> expert_w2;          // [L*E]
    size_t num_params = 0;
    size_t num_dense_params = 0;  // dense tensors occupy [0, num_dense_params)
};

// The layout for a config (F resolved to hidden_size()). Not templated: checkpoints and planners can use it.
ParamLayout param_layout(const ModelConfig& config);

// ---- activations -------------------------------------------------------------------------------------------

// Every buffer of one forward/backward, carved from two arenas (Float and int) sized for B_local sequences.
// N = B_local * T. Per-layer buffers are [L, ...] and indexed l * (size of one layer).
template <typename Float>
struct Activations {
    int B = 0;  // B_local the buffers are sized for
    std::vector<Float> float_arena;  // every Float buffer below, carved in the order listed (acts_allocate)
    std::vector<int> int_arena;      // every int buffer below
    // forward
    Float* encoded = nullptr;        // [N,C] wte[tok] + wpe[pos]
    Float* ln1 = nullptr;            // [L,N,C]
    Float* ln1_mean = nullptr;       // [L,N]
    Float* ln1_rstd = nullptr;       // [L,N]
    Float* qkv = nullptr;            // [L,N,3C]
    Float* att = nullptr;            // [L,B,NH,T,T] softmax of the scores, 0 above the diagonal
    Float* atty = nullptr;           // [L,N,C] attention output before the projection
    Float* residual_attn = nullptr;  // [L,N,C] x + attn(ln1(x))
    Float* ln2 = nullptr;            // [L,N,C]
    Float* ln2_mean = nullptr;       // [L,N]
    Float* ln2_rstd = nullptr;       // [L,N]
    Float* gate_logits = nullptr;    // [L,N,E]
    Float* gate_probs = nullptr;     // [L,N,E] full softmax of the logits (used only by the auxiliary loss)
    Float* gate_w = nullptr;         // [L,N,K] softmax over the K selected logits
    Float* residual_moe = nullptr;   // [L,N,C] block output: residual_attn + moe(ln2(residual_attn))
    Float* lnf = nullptr;            // [N,C]
    Float* lnf_mean = nullptr;       // [N]
    Float* lnf_rstd = nullptr;       // [N]
    Float* probs = nullptr;          // [N,V] softmax of the logits; turned into dlogits by backward
    Float* branch = nullptr;         // [N,C] attention-projection / MoE output before its residual add (scratch)
    int* expert_idx = nullptr;       // [L,N,K] the top-K selection (descending logit)
    int* dispatch_idx = nullptr;     // [L,N,K] the selection with -1 where the capacity limit dropped it
    int* inputs = nullptr;           // [N] copy of the forward's inputs (backward needs them)
    int* targets = nullptr;          // [N] copy of the forward's targets
    // backward
    Float* dresidual = nullptr;      // [N,C] gradient of the residual stream, walked from the top down
    Float* dln = nullptr;            // [N,C] gradient of a LayerNorm output (ln_f, ln2, ln1 in turn)
    Float* datty = nullptr;          // [N,C]
    Float* dqkv = nullptr;           // [N,3C]
    Float* datt = nullptr;           // [T,T] attention backward scratch
    Float* dgate_w = nullptr;        // [N,K]
    Float* dgate_logits = nullptr;   // [N,E]
    Float* dgate_probs = nullptr;    // [N,E]
};

// ---- the model ---------------------------------------------------------------------------------------------

template <typename Float>
struct Model {
    explicit Model(const ModelConfig& config);  // validates config, lays out and initialises parameters
    Model(const Model&) = delete;               // the executor points into the arenas
    Model& operator=(const Model&) = delete;

    ModelConfig config;  // F resolved
    ParamLayout layout;
    std::vector<Float> params;  // [num_params]
    std::vector<Float> grads;   // [num_params]
    std::vector<Float> adam_m;  // [num_params]
    std::vector<Float> adam_v;  // [num_params]
    long adam_step = 0;         // AdamW steps taken (bias correction uses adam_step after increment)

    Activations<Float> acts;

    // Routing statistics of the last forward (the balancers consume them).
    std::vector<int64_t> routing_counts;  // [L,E] assignments per expert, each of the K choices counted, before
                                          // capacity drops (the demand)
    std::vector<int64_t> num_dropped;     // [L] assignments dropped by the capacity limit
    double last_ce_loss = 0.0;   // this rank's share of the mean cross-entropy
    double last_aux_loss = 0.0;  // this rank's share of the auxiliary loss (0 when aux_loss_coef == 0)
    double loss_denominator = 0.0;

    std::unique_ptr<LocalMoeExecutor<Float>> local_executor;  // always built: the default and the oracle
    MoeExecutor<Float>* executor = nullptr;                   // the one forward/backward call
    // When set (prophet train --timeline), forward/backward record their non-expert ops (embed, attn, gate, head
    // and their backward) on its compute lane, back to back, so with the executor's ops they cover the step.
    OpTimeline* timeline = nullptr;
    // When set (routing.source = "trace"), called after the gate's top-K with (layer, N, K, expert_idx [N,K]) to
    // overwrite the choices (train/trace_routing.h); gate weights stay the gate's.
    std::function<void(int, int, int, int*)> route_override;

    // pointers by tensor index
    Float* param(int idx) { return params.data() + layout.tensors[idx].offset; }
    Float* grad(int idx) { return grads.data() + layout.tensors[idx].offset; }
    const ParamTensor& tensor(int idx) const { return layout.tensors[idx]; }
    int num_tensors() const { return (int)layout.tensors.size(); }
    int find_tensor(const std::string& name) const;  // -1 when absent
};

// Use another executor (not owned) for the expert computation; nullptr restores the local one.
template <typename Float>
void model_set_executor(Model<Float>& model, MoeExecutor<Float>* executor);

// Forward over this rank's B_local sequences; returns this rank's share of the loss: sum over its tokens of
// the cross-entropy / loss_denominator (the global token count B*T), plus its share of the auxiliary loss.
// inputs [B_local,T], targets [B_local,T].
template <typename Float>
double model_forward(Model<Float>& model, const int* inputs, const int* targets, int B_local,
                     double loss_denominator);

// Backward of the last forward: ACCUMULATES into model.grads (call model_zero_grad first).
template <typename Float>
void model_backward(Model<Float>& model);

template <typename Float>
void model_zero_grad(Model<Float>& model);

// One AdamW step on every tensor whose skip[i] is 0 (skip: per tensor index, nullptr = update all; a rank skips
// the experts it does not own). Weight decay only on matrices. grad_scale multiplies every gradient (clip factor).
template <typename Float>
void adamw_step(Model<Float>& model, double lr, const AdamWConfig& adamw, double grad_scale = 1.0,
                const std::vector<char>* skip = nullptr);

// Sum of squared gradients over the tensors with include[i] != 0 (nullptr = all), in double.
template <typename Float>
double grad_norm_sq(const Model<Float>& model, const std::vector<char>* include = nullptr);

// ---- views for the distributed trainer ---------------------------------------------------------------------

template <typename Float>
struct Span {
    Float* data;
    size_t size;
};
// All dense gradients, one contiguous span (sum them across data-parallel ranks).
template <typename Float>
Span<Float> model_dense_grads(Model<Float>& model);
// Expert (layer, expert)'s parameters / gradients: w1 [C,F] then w2 [F,C], one contiguous span of 2*C*F.
template <typename Float>
Span<Float> model_expert_params(Model<Float>& model, int layer, int expert);
template <typename Float>
Span<Float> model_expert_grads(Model<Float>& model, int layer, int expert);

}  // namespace prophet
