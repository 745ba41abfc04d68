// moe_gpt.cpp: MoE-GPT parameters (layout, init), activations, forward, backward, AdamW step.
// See moe_gpt.h for the model and the arena layout, moe_executor.h for the expert contract.
#include "model/moe_gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/kernels.h"

namespace prophet {

// ---- parameter layout and init -----------------------------------------------------------------------------

ParamLayout param_layout(const ModelConfig& config) {
    const int V = config.V, T = config.T, C = config.C, L = config.L, E = config.E, F = config.hidden_size();
    const double std_base = 0.02;
    // GPT-2: the projections that write into the residual stream (attn.proj.w, expert w2) are scaled down by
    // 1/sqrt(2L) so the residual's variance does not grow with depth (two such writes per block)
    const double std_residual = 0.02 / std::sqrt(2.0 * L);
    ParamLayout layout;
    auto add = [&](const std::string& name, std::vector<int> shape, double init_std, double init_value, int layer,
                   int expert) {
        ParamTensor t;
        t.name = name;
        t.shape = std::move(shape);
        t.size = 1;
        for (int d : t.shape) t.size *= static_cast<size_t>(d);
        t.offset = layout.num_params;
        t.is_matrix = t.shape.size() >= 2;
        t.is_expert = expert >= 0;
        t.layer = layer;
        t.expert = expert;
        t.init_std = init_std;
        t.init_value = init_value;
        layout.num_params += t.size;
        layout.tensors.push_back(std::move(t));
        return static_cast<int>(layout.tensors.size()) - 1;
    };
    layout.wte = add("wte", {V, C}, std_base, 0.0, -1, -1);
    layout.wpe = add("wpe", {T, C}, std_base, 0.0, -1, -1);
    for (int l = 0; l < L; l++) {
        const std::string p = "h." + std::to_string(l) + ".";
        LayerTensorIdx idx;
        idx.ln1_w = add(p + "ln1.w", {C}, 0.0, 1.0, l, -1);
        idx.ln1_b = add(p + "ln1.b", {C}, 0.0, 0.0, l, -1);
        idx.qkv_w = add(p + "attn.qkv.w", {C, 3 * C}, std_base, 0.0, l, -1);
        idx.qkv_b = add(p + "attn.qkv.b", {3 * C}, 0.0, 0.0, l, -1);
        idx.proj_w = add(p + "attn.proj.w", {C, C}, std_residual, 0.0, l, -1);
        idx.proj_b = add(p + "attn.proj.b", {C}, 0.0, 0.0, l, -1);
        idx.ln2_w = add(p + "ln2.w", {C}, 0.0, 1.0, l, -1);
        idx.ln2_b = add(p + "ln2.b", {C}, 0.0, 0.0, l, -1);
        idx.gate_w = add(p + "moe.gate.w", {C, E}, std_base, 0.0, l, -1);
        layout.layers.push_back(idx);
    }
    layout.ln_f_w = add("ln_f.w", {C}, 0.0, 1.0, -1, -1);
    layout.ln_f_b = add("ln_f.b", {C}, 0.0, 0.0, -1, -1);
    layout.num_dense_params = layout.num_params;
    layout.expert_w1.resize(static_cast<size_t>(L) * E);
    layout.expert_w2.resize(static_cast<size_t>(L) * E);
    for (int l = 0; l < L; l++) {
        for (int e = 0; e < E; e++) {
            const std::string p = "h." + std::to_string(l) + ".moe.experts." + std::to_string(e) + ".";
            layout.expert_w1[static_cast<size_t>(l) * E + e] = add(p + "w1", {C, F}, std_base, 0.0, l, e);
            layout.expert_w2[static_cast<size_t>(l) * E + e] = add(p + "w2", {F, C}, std_residual, 0.0, l, e);
        }
    }
    return layout;
}

namespace {

// One Rng per tensor, seeded from Rng(seed) in arena order: the same seed gives the same values for every
// tensor on every rank and compiler, and a tensor's values do not depend on how many numbers others drew.
// Values are drawn in double and rounded once to Float, so Model<float> holds Model<double>'s values rounded.
template <typename Float>
void init_params(std::vector<Float>& params, const ParamLayout& layout, uint64_t seed) {
    Rng master(seed);
    for (const ParamTensor& t : layout.tensors) {
        Rng rng(master.next_u64());
        Float* p = params.data() + t.offset;  // [t.size]
        for (size_t i = 0; i < t.size; i++) {
            p[i] = t.init_std > 0.0 ? Float(t.init_std * rng.normal()) : Float(t.init_value);
        }
    }
}

// Carve the activation arenas for B sequences: two passes over the same list, the first only counts.
template <typename Float>
void acts_allocate(Activations<Float>& a, const ModelConfig& cfg, int B) {
    const size_t T = cfg.T, C = cfg.C, L = cfg.L, NH = cfg.NH, V = cfg.V, E = cfg.E, K = cfg.K;
    const size_t N = static_cast<size_t>(B) * T;
    for (int pass = 0; pass < 2; pass++) {
        size_t float_offset = 0;
        size_t int_offset = 0;
        auto take = [&](Float*& ptr, size_t count) {
            if (pass == 1) ptr = a.float_arena.data() + float_offset;
            float_offset += count;
        };
        auto take_int = [&](int*& ptr, size_t count) {
            if (pass == 1) ptr = a.int_arena.data() + int_offset;
            int_offset += count;
        };
        take(a.encoded, N * C);
        take(a.ln1, L * N * C);
        take(a.ln1_mean, L * N);
        take(a.ln1_rstd, L * N);
        take(a.qkv, L * N * 3 * C);
        take(a.att, L * B * NH * T * T);
        take(a.atty, L * N * C);
        take(a.residual_attn, L * N * C);
        take(a.ln2, L * N * C);
        take(a.ln2_mean, L * N);
        take(a.ln2_rstd, L * N);
        take(a.gate_logits, L * N * E);
        take(a.gate_probs, L * N * E);
        take(a.gate_w, L * N * K);
        take(a.residual_moe, L * N * C);
        take(a.lnf, N * C);
        take(a.lnf_mean, N);
        take(a.lnf_rstd, N);
        take(a.probs, N * V);
        take(a.branch, N * C);
        take(a.dresidual, N * C);
        take(a.dln, N * C);
        take(a.datty, N * C);
        take(a.dqkv, N * 3 * C);
        take(a.datt, T * T);
        take(a.dgate_w, N * K);
        take(a.dgate_logits, N * E);
        take(a.dgate_probs, N * E);
        take_int(a.expert_idx, L * N * K);
        take_int(a.dispatch_idx, L * N * K);
        take_int(a.inputs, N);
        take_int(a.targets, N);
        if (pass == 0) {
            a.float_arena.assign(float_offset, static_cast<Float>(0));
            a.int_arena.assign(int_offset, 0);
        }
    }
    a.B = B;
}

}  // namespace

template <typename Float>
Model<Float>::Model(const ModelConfig& cfg) : config(cfg) {
    model_config_validate(config);
    config.F = config.hidden_size();
    layout = param_layout(config);
    params.assign(layout.num_params, static_cast<Float>(0));
    grads.assign(layout.num_params, static_cast<Float>(0));
    adam_m.assign(layout.num_params, static_cast<Float>(0));
    adam_v.assign(layout.num_params, static_cast<Float>(0));
    init_params(params, layout, config.seed);
    routing_counts.assign((size_t)config.L * config.E, 0);
    num_dropped.assign(config.L, 0);

    std::vector<ExpertWeights<Float>> weights((size_t)config.L * config.E);
    for (size_t i = 0; i < weights.size(); i++) {
        weights[i] = ExpertWeights<Float>{param(layout.expert_w1[i]), param(layout.expert_w2[i]),
                                          grad(layout.expert_w1[i]), grad(layout.expert_w2[i])};
    }
    local_executor = std::make_unique<LocalMoeExecutor<Float>>(config.L, config.E, config.K, config.C, config.F,
                                                               std::move(weights));
    executor = local_executor.get();
}

template <typename Float>
int Model<Float>::find_tensor(const std::string& name) const {
    for (int i = 0; i < num_tensors(); i++) {
        if (layout.tensors[i].name == name) return i;
    }
    return -1;
}

template <typename Float>
void model_set_executor(Model<Float>& model, MoeExecutor<Float>* executor) {
    model.executor = executor != nullptr ? executor : model.local_executor.get();
}

// ---- forward -----------------------------------------------------------------------------------------------

namespace {

// One compute-lane op of the model's timeline, when one is attached (mark_compute, schedule/timeline.h).
template <typename Float>
void mark(const Model<Float>& model, OpKind kind, int block, int64_t* cursor) {
    mark_compute(model.timeline, kind, block, cursor);
}

template <typename Float>
int64_t mark_start(const Model<Float>& model) {
    return model.timeline != nullptr ? now_ns() : 0;
}

}  // namespace

namespace {

// capacity limit (static-EP baseline only): each expert takes at most `capacity` of this rank's assignments, first
// choices (k = 0) of all tokens before second choices, tokens in order within each k. dispatch_idx [N,K]: the
// dropped ones become -1; returns how many were dropped.
int64_t drop_over_capacity(double capacity_factor, int N, int K, int E, int* dispatch_idx) {
    int64_t dropped = 0;
    const int64_t capacity = static_cast<int64_t>(std::ceil(capacity_factor * N * K / E));
    std::vector<int64_t> fill(E, 0);  // [E]
    for (int k = 0; k < K; k++) {
        for (int n = 0; n < N; n++) {
            int& e = dispatch_idx[static_cast<size_t>(n) * K + k];
            if (fill[e] < capacity) {
                fill[e]++;
            } else {
                e = -1;
                dropped++;
            }
        }
    }
    return dropped;
}

// auxiliary load-balancing loss (Switch Transformer): coef * E * sum_e f_e P_e with f_e this rank's fraction of
// assignments to e (a constant for the gradient) and P_e its mean full-softmax probability, weighted by
// N / loss_denominator so the ranks' shares sum to the token-weighted mean. gate_probs [N,E] (written),
// gate_logits [N,E], counts [E].
template <typename Float>
double aux_balance_loss(const ModelConfig& cfg, Float* gate_probs, const Float* gate_logits, const int64_t* counts,
                        int N, double loss_denominator) {
    const int E = cfg.E, K = cfg.K;
    softmax_forward(gate_probs, gate_logits, N, E);
    double sum = 0.0;
    for (int e = 0; e < E; e++) {
        double P_e = 0.0;
        for (int n = 0; n < N; n++) P_e += gate_probs[static_cast<size_t>(n) * E + e];
        P_e /= N;
        const double f_e = static_cast<double>(counts[e]) / (static_cast<double>(N) * K);
        sum += f_e * P_e;
    }
    return cfg.aux_loss_coef * E * sum * (static_cast<double>(N) / loss_denominator);
}

// Block l's attention branch on the activations of B sequences: residual_attn = x + proj(attn(ln1(x))), keeping
// ln1, qkv, att and atty for the backward.
template <typename Float>
void attention_branch_forward(Model<Float>& model, int l, int B) {
    const ModelConfig& cfg = model.config;
    const int T = cfg.T, C = cfg.C, NH = cfg.NH;
    const int N = B * T;
    Activations<Float>& a = model.acts;
    const LayerTensorIdx& p = model.layout.layers[l];
    const Float* x = l == 0 ? a.encoded : a.residual_moe + static_cast<size_t>(l - 1) * N * C;  // [N,C]
    Float* ln1 = a.ln1 + static_cast<size_t>(l) * N * C;                                        // [N,C]
    Float* ln1_mean = a.ln1_mean + static_cast<size_t>(l) * N;                                  // [N]
    Float* ln1_rstd = a.ln1_rstd + static_cast<size_t>(l) * N;                                  // [N]
    Float* qkv = a.qkv + static_cast<size_t>(l) * N * 3 * C;                                    // [N,3C]
    Float* att = a.att + static_cast<size_t>(l) * B * NH * T * T;                               // [B,NH,T,T]
    Float* atty = a.atty + static_cast<size_t>(l) * N * C;                                      // [N,C]
    Float* residual_attn = a.residual_attn + static_cast<size_t>(l) * N * C;                    // [N,C]
    layernorm_forward(ln1, ln1_mean, ln1_rstd, x, model.param(p.ln1_w), model.param(p.ln1_b), N, C);
    matmul_forward(qkv, ln1, model.param(p.qkv_w), model.param(p.qkv_b), N, C, 3 * C);
    attention_forward(atty, att, qkv, B, T, C, NH);
    matmul_forward(a.branch, atty, model.param(p.proj_w), model.param(p.proj_b), N, C, C);
    residual_forward(residual_attn, x, a.branch, static_cast<size_t>(N) * C);
}

// Block l's routing on ln2(residual_attn): gate logits, top-K and gate weights, this rank's counts per expert, the
// capacity drops into dispatch_idx. Returns the block's auxiliary loss.
template <typename Float>
double route_forward(Model<Float>& model, int l, int B, double loss_denominator) {
    const ModelConfig& cfg = model.config;
    const int C = cfg.C, E = cfg.E, K = cfg.K;
    const int N = B * cfg.T;
    Activations<Float>& a = model.acts;
    const LayerTensorIdx& p = model.layout.layers[l];
    const Float* residual_attn = a.residual_attn + static_cast<size_t>(l) * N * C;  // [N,C]
    Float* ln2 = a.ln2 + static_cast<size_t>(l) * N * C;                            // [N,C]
    Float* ln2_mean = a.ln2_mean + static_cast<size_t>(l) * N;                      // [N]
    Float* ln2_rstd = a.ln2_rstd + static_cast<size_t>(l) * N;                      // [N]
    Float* gate_logits = a.gate_logits + static_cast<size_t>(l) * N * E;            // [N,E]
    Float* gate_probs = a.gate_probs + static_cast<size_t>(l) * N * E;              // [N,E]
    Float* gate_w = a.gate_w + static_cast<size_t>(l) * N * K;                      // [N,K]
    int* expert_idx = a.expert_idx + static_cast<size_t>(l) * N * K;                // [N,K]
    int* dispatch_idx = a.dispatch_idx + static_cast<size_t>(l) * N * K;            // [N,K]
    layernorm_forward(ln2, ln2_mean, ln2_rstd, residual_attn, model.param(p.ln2_w), model.param(p.ln2_b), N, C);
    matmul_forward(gate_logits, ln2, model.param(p.gate_w), static_cast<const Float*>(nullptr), N, C, E);
    gate_topk_forward(expert_idx, gate_w, gate_logits, N, E, K);
    if (model.route_override) model.route_override(l, N, K, expert_idx);

    int64_t* counts = model.routing_counts.data() + static_cast<size_t>(l) * E;  // [E]
    std::fill_n(counts, E, 0);
    for (int i = 0; i < N * K; i++) counts[expert_idx[i]]++;

    std::copy_n(expert_idx, static_cast<size_t>(N) * K, dispatch_idx);
    model.num_dropped[l] = 0;
    if (cfg.capacity_factor > 0.0)
        model.num_dropped[l] = drop_over_capacity(cfg.capacity_factor, N, K, E, dispatch_idx);
    return cfg.aux_loss_coef > 0.0 ? aux_balance_loss(cfg, gate_probs, gate_logits, counts, N, loss_denominator) : 0.0;
}

// Block l of the forward on the activations of B sequences: attention branch, routing, the executor's experts,
// the MoE residual. *cursor: the timeline's compute-lane mark (mark_compute). Returns the block's auxiliary loss.
template <typename Float>
double block_forward(Model<Float>& model, int l, int B, double loss_denominator, int64_t* cursor) {
    const int N = B * model.config.T, C = model.config.C, K = model.config.K;
    Activations<Float>& a = model.acts;
    model.executor->block_forward_begin(l);  // records what it waits for itself (plan_wait)
    *cursor = mark_start(model);
    attention_branch_forward(model, l, B);
    mark(model, OpKind::kAttn, l, cursor);

    // MoE branch: route (gate logits, top-K, gate weights), then the executor computes the experts
    const double aux_loss = route_forward(model, l, B, loss_denominator);
    mark(model, OpKind::kGate, l, cursor);
    const Float* ln2 = a.ln2 + static_cast<size_t>(l) * N * C;                      // [N,C]
    const Float* residual_attn = a.residual_attn + static_cast<size_t>(l) * N * C;  // [N,C]
    Float* residual_moe = a.residual_moe + static_cast<size_t>(l) * N * C;          // [N,C]
    model.executor->forward(l, N, ln2, a.dispatch_idx + static_cast<size_t>(l) * N * K,
                            a.gate_w + static_cast<size_t>(l) * N * K, a.branch);
    *cursor = mark_start(model);
    residual_forward(residual_moe, residual_attn, a.branch, static_cast<size_t>(N) * C);
    mark(model, OpKind::kAttn, l, cursor);  // the MoE residual add: the block's last non-expert op
    return aux_loss;
}

}  // namespace

template <typename Float>
double model_forward(Model<Float>& model, const int* inputs, const int* targets, int B, double loss_denominator) {
    const ModelConfig& cfg = model.config;
    const int V = cfg.V, T = cfg.T, C = cfg.C, L = cfg.L;
    const int N = B * T;
    PROPHET_ASSERT(inputs != nullptr && targets != nullptr);
    PROPHET_ASSERT(B >= 1 && loss_denominator > 0.0);
    Activations<Float>& a = model.acts;
    if (a.B != B) acts_allocate(a, cfg, B);
    std::copy_n(inputs, N, a.inputs);
    std::copy_n(targets, N, a.targets);
    model.loss_denominator = loss_denominator;
    const ParamLayout& lay = model.layout;

    int64_t cursor = mark_start(model);
    encoder_forward(a.encoded, inputs, model.param(lay.wte), model.param(lay.wpe), B, T, C, V);
    mark(model, OpKind::kEmbed, -1, &cursor);

    double aux_loss = 0.0;
    for (int l = 0; l < L; l++) aux_loss += block_forward(model, l, B, loss_denominator, &cursor);

    const Float* x_last = a.residual_moe + (size_t)(L - 1) * N * C;  // [N,C]
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, x_last, model.param(lay.ln_f_w), model.param(lay.ln_f_b), N, C);
    const double ce_loss =
        crossentropy_tied_forward(a.probs, a.lnf, model.param(lay.wte), targets, N, C, V, loss_denominator);
    mark(model, OpKind::kHead, -1, &cursor);
    model.last_ce_loss = ce_loss;
    model.last_aux_loss = aux_loss;
    return ce_loss + aux_loss;
}

// ---- backward ----------------------------------------------------------------------------------------------

namespace {

// Block l's MoE branch backward, from dresidual = d(residual_moe), which passes straight through to
// d(residual_attn): the executor's experts, the gate (with the aux loss), ln2; adds into dresidual.
template <typename Float>
void moe_branch_backward(Model<Float>& model, int l, int64_t* cursor) {
    const ModelConfig& cfg = model.config;
    const int C = cfg.C, E = cfg.E, K = cfg.K;
    Activations<Float>& a = model.acts;
    const int N = a.B * cfg.T;
    const LayerTensorIdx& p = model.layout.layers[l];
    const Float* residual_attn = a.residual_attn + static_cast<size_t>(l) * N * C;  // [N,C]
    const Float* ln2 = a.ln2 + static_cast<size_t>(l) * N * C;                      // [N,C]
    const Float* ln2_mean = a.ln2_mean + static_cast<size_t>(l) * N;                // [N]
    const Float* ln2_rstd = a.ln2_rstd + static_cast<size_t>(l) * N;                // [N]
    const Float* gate_probs = a.gate_probs + static_cast<size_t>(l) * N * E;        // [N,E]
    const Float* gate_w = a.gate_w + static_cast<size_t>(l) * N * K;                // [N,K]
    const int* expert_idx = a.expert_idx + static_cast<size_t>(l) * N * K;          // [N,K]

    model.executor->backward(l, N, a.dresidual, a.dln, a.dgate_w);  // dln = d ln2 from the experts
    *cursor = mark_start(model);
    gate_topk_backward(a.dgate_logits, a.dgate_w, gate_w, expert_idx, N, E, K);
    if (cfg.aux_loss_coef > 0.0) {
        // d aux / d p[n,e] = coef * E * f_e / loss_denominator (the N of P_e's mean cancels the N weight)
        const int64_t* counts = model.routing_counts.data() + static_cast<size_t>(l) * E;  // [E]
        for (int e = 0; e < E; e++) {
            const double f_e = static_cast<double>(counts[e]) / (static_cast<double>(N) * K);
            const Float dp = static_cast<Float>(cfg.aux_loss_coef * E * f_e / model.loss_denominator);
            for (int n = 0; n < N; n++) a.dgate_probs[static_cast<size_t>(n) * E + e] = dp;
        }
        softmax_backward(a.dgate_logits, a.dgate_probs, gate_probs, N, E);
    }
    matmul_backward(a.dln, model.grad(p.gate_w), static_cast<Float*>(nullptr), a.dgate_logits, ln2,
                    model.param(p.gate_w), N, C, E,
                    /*accumulate_dinp=*/true);
    layernorm_backward(a.dresidual, model.grad(p.ln2_w), model.grad(p.ln2_b), a.dln, residual_attn,
                       model.param(p.ln2_w), ln2_mean, ln2_rstd, N, C);
    mark(model, OpKind::kGateBwd, l, cursor);
}

// Block l's attention branch backward, from dresidual = d(residual_attn), which passes through to d(x): proj,
// attention, qkv, ln1; adds into dresidual.
template <typename Float>
void attention_branch_backward(Model<Float>& model, int l, int64_t* cursor) {
    const ModelConfig& cfg = model.config;
    const int T = cfg.T, C = cfg.C, NH = cfg.NH;
    Activations<Float>& a = model.acts;
    const int B = a.B;
    const int N = B * T;
    const LayerTensorIdx& p = model.layout.layers[l];
    const Float* x = l == 0 ? a.encoded : a.residual_moe + static_cast<size_t>(l - 1) * N * C;  // [N,C]
    const Float* ln1 = a.ln1 + static_cast<size_t>(l) * N * C;                                  // [N,C]
    const Float* ln1_mean = a.ln1_mean + static_cast<size_t>(l) * N;                            // [N]
    const Float* ln1_rstd = a.ln1_rstd + static_cast<size_t>(l) * N;                            // [N]
    const Float* qkv = a.qkv + static_cast<size_t>(l) * N * 3 * C;                              // [N,3C]
    const Float* att = a.att + static_cast<size_t>(l) * B * NH * T * T;                         // [B,NH,T,T]
    const Float* atty = a.atty + static_cast<size_t>(l) * N * C;                                // [N,C]
    matmul_backward(a.datty, model.grad(p.proj_w), model.grad(p.proj_b), a.dresidual, atty, model.param(p.proj_w), N, C,
                    C, /*accumulate_dinp=*/false);
    attention_backward(a.dqkv, a.datt, a.datty, qkv, att, B, T, C, NH);
    matmul_backward(a.dln, model.grad(p.qkv_w), model.grad(p.qkv_b), a.dqkv, ln1, model.param(p.qkv_w), N, C, 3 * C,
                    /*accumulate_dinp=*/false);
    layernorm_backward(a.dresidual, model.grad(p.ln1_w), model.grad(p.ln1_b), a.dln, x, model.param(p.ln1_w), ln1_mean,
                       ln1_rstd, N, C);
    mark(model, OpKind::kAttnBwd, l, cursor);
}

}  // namespace

template <typename Float>
void model_backward(Model<Float>& model) {
    const ModelConfig& cfg = model.config;
    const int V = cfg.V, T = cfg.T, C = cfg.C, L = cfg.L;
    Activations<Float>& a = model.acts;
    const int B = a.B;
    PROPHET_ASSERT_MSG(B > 0, "model_backward before model_forward");
    const int N = B * T;
    const ParamLayout& lay = model.layout;

    // top: loss -> ln_f output -> residual stream
    int64_t cursor = mark_start(model);
    std::fill_n(a.dresidual, static_cast<size_t>(N) * C, static_cast<Float>(0));
    crossentropy_tied_backward(a.dln, model.grad(lay.wte), a.probs, a.lnf, model.param(lay.wte), a.targets, N, C, V,
                               model.loss_denominator);
    const Float* x_last = a.residual_moe + (size_t)(L - 1) * N * C;  // [N,C]
    layernorm_backward(a.dresidual, model.grad(lay.ln_f_w), model.grad(lay.ln_f_b), a.dln, x_last,
                       model.param(lay.ln_f_w), a.lnf_mean, a.lnf_rstd, N, C);
    mark(model, OpKind::kHeadBwd, -1, &cursor);

    for (int l = L - 1; l >= 0; l--) {
        moe_branch_backward(model, l, &cursor);
        attention_branch_backward(model, l, &cursor);
    }

    encoder_backward(model.grad(lay.wte), model.grad(lay.wpe), a.dresidual, a.inputs, B, T, C);
    mark(model, OpKind::kEmbedBwd, -1, &cursor);
}

// ---- optimizer side ----------------------------------------------------------------------------------------

template <typename Float>
void model_zero_grad(Model<Float>& model) {
    std::fill(model.grads.begin(), model.grads.end(), static_cast<Float>(0));
}

template <typename Float>
void adamw_step(Model<Float>& model, double lr, const AdamWConfig& adamw, double grad_scale,
                const std::vector<char>* skip) {
    PROPHET_ASSERT(skip == nullptr || (int)skip->size() == model.num_tensors());
    model.adam_step++;
    for (int i = 0; i < model.num_tensors(); i++) {
        if (skip != nullptr && (*skip)[i]) continue;
        const ParamTensor& t = model.tensor(i);
        adamw_update(model.params.data() + t.offset, model.grads.data() + t.offset, model.adam_m.data() + t.offset,
                     model.adam_v.data() + t.offset, t.size, lr, adamw.beta1, adamw.beta2, adamw.eps,
                     t.is_matrix ? adamw.weight_decay : 0.0, model.adam_step, grad_scale);
    }
}

template <typename Float>
double grad_norm_sq(const Model<Float>& model, const std::vector<char>* include) {
    PROPHET_ASSERT(include == nullptr || (int)include->size() == model.num_tensors());
    double sum = 0.0;
    for (int i = 0; i < model.num_tensors(); i++) {
        if (include != nullptr && !(*include)[i]) continue;
        const ParamTensor& t = model.tensor(i);
        sum += sum_squares(model.grads.data() + t.offset, t.size);
    }
    return sum;
}

template <typename Float>
Span<Float> model_dense_grads(Model<Float>& model) {
    return Span<Float>{model.grads.data(), model.layout.num_dense_params};
}

template <typename Float>
Span<Float> model_expert_params(Model<Float>& model, int layer, int expert) {
    const size_t i = static_cast<size_t>(layer) * model.config.E + expert;
    return Span<Float>{model.param(model.layout.expert_w1[i]), 2 * (size_t)model.config.C * model.config.F};
}

template <typename Float>
Span<Float> model_expert_grads(Model<Float>& model, int layer, int expert) {
    const size_t i = static_cast<size_t>(layer) * model.config.E + expert;
    return Span<Float>{model.grad(model.layout.expert_w1[i]), 2 * (size_t)model.config.C * model.config.F};
}

// ---- instantiations ----------------------------------------------------------------------------------------

#define PROPHET_INSTANTIATE_MODEL(Float)                                                                          \
    template struct Model<Float>;                                                                                 \
    template void model_set_executor<Float>(Model<Float>&, MoeExecutor<Float>*);                                  \
    template double model_forward<Float>(Model<Float>&, const int*, const int*, int, double);                     \
    template void model_backward<Float>(Model<Float>&);                                                           \
    template void model_zero_grad<Float>(Model<Float>&);                                                          \
    template void adamw_step<Float>(Model<Float>&, double, const AdamWConfig&, double, const std::vector<char>*); \
    template double grad_norm_sq<Float>(const Model<Float>&, const std::vector<char>*);                           \
    template Span<Float> model_dense_grads<Float>(Model<Float>&);                                                 \
    template Span<Float> model_expert_params<Float>(Model<Float>&, int, int);                                     \
    template Span<Float> model_expert_grads<Float>(Model<Float>&, int, int);

PROPHET_INSTANTIATE_MODEL(float)
PROPHET_INSTANTIATE_MODEL(double)

}  // namespace prophet
