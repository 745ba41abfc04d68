// gpu_model.cpp: GpuModel (gpu_model.h). The forward and backward are model/moe_gpt.cpp's, line for line, with
// the lib/cuda ops in place of the CPU ones and the MoE executor's steps written out.
#include "cuda/gpu_model.h"

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {
// device pointers of layer l's experts, [E] each
struct ExpertPointers {
    std::vector<const float*> w1, w2;
    std::vector<float*> dw1, dw2;
};
}  // namespace

GpuModel::GpuModel(Context& ctx, const Model<float>& model)
    : ctx_(ctx), config_(model.config), layout_(model.layout), events_(ctx) {
    if (config_.capacity_factor > 0.0)
        throw_config_error("model.capacity_factor", std::to_string(config_.capacity_factor),
                           "the GPU model is dropless for now", "set model.capacity_factor = 0");
    if (config_.aux_loss_coef > 0.0)
        throw_config_error("model.aux_loss_coef", std::to_string(config_.aux_loss_coef),
                           "the GPU model has no auxiliary loss yet", "set model.aux_loss_coef = 0");
    params_.resize(layout_.num_params);
    params_.upload(model.params);
    adam_m_.resize(layout_.num_params);
    adam_m_.upload(model.adam_m);
    adam_v_.resize(layout_.num_params);
    adam_v_.upload(model.adam_v);
    grads_.resize(layout_.num_params);
    adam_step_ = model.adam_step;
    zero_grad();
}

void GpuModel::allocate(int B) {
    const ModelConfig& c = config_;
    const size_t N = static_cast<size_t>(B) * c.T, L = c.L, C = c.C, E = c.E, K = c.K, F = c.hidden_size();
    const size_t att = static_cast<size_t>(B) * c.NH * c.T * c.T;
    encoded_.resize(N * C);
    ln1_.resize(L * N * C), ln1_mean_.resize(L * N), ln1_rstd_.resize(L * N);
    qkv_.resize(L * N * 3 * C), att_.resize(L * att), atty_.resize(L * N * C), residual_attn_.resize(L * N * C);
    ln2_.resize(L * N * C), ln2_mean_.resize(L * N), ln2_rstd_.resize(L * N);
    gate_logits_.resize(L * N * E), gate_w_.resize(L * N * K), expert_idx_.resize(L * N * K);
    residual_moe_.resize(L * N * C);
    lnf_.resize(N * C), lnf_mean_.resize(N), lnf_rstd_.resize(N), probs_.resize(N * c.V), branch_.resize(N * C);
    inputs_.resize(N), targets_.resize(N);
    offsets_.resize(L * (E + 1)), assignment_slot_.resize(L * N * K), slot_token_.resize(L * N * K);
    offsets_host_.assign(L, std::vector<int>(E + 1, 0));
    moe_x_.resize(L * N * K * C), moe_pre_.resize(L * N * K * F), moe_act_.resize(L * N * K * F);
    moe_y_.resize(L * N * K * C);
    dresidual_.resize(N * C), dln_.resize(N * C), datty_.resize(N * C), dqkv_.resize(N * 3 * C), datt_.resize(att);
    dgate_w_.resize(N * K), dgate_logits_.resize(N * E), dy_.resize(N * K * C), dpre_.resize(N * K * F);
    dx_.resize(N * K * C);
    B_ = B;
}

// Layer l's experts on this GPU, without an executor (dropless: dispatch = the top-K selection): layout,
// permute, the grouped expert GEMMs, unpermute into branch_ [N,C]. ln2 [N,C], expert_idx and gate_w [N,K].
void GpuModel::moe_forward_local(int l, int N, const float* ln2, const int* expert_idx, const float* gate_w) {
    const ModelConfig& cfg = config_;
    const int C = cfg.C, E = cfg.E, K = cfg.K, F = cfg.hidden_size();
    const ParamLayout& lay = layout_;
    const size_t NK = static_cast<size_t>(N) * K;
    int* offsets = offsets_.data() + static_cast<size_t>(l) * (E + 1);
    int* slot = assignment_slot_.data() + l * NK;
    float* mx = moe_x_.data() + l * NK * C;
    float* pre = moe_pre_.data() + l * NK * F;
    float* act = moe_act_.data() + l * NK * F;
    float* y = moe_y_.data() + l * NK * C;
    events_.begin(OpKind::kFec, l);
    moe_layout(ctx_, offsets, slot, slot_token_.data() + l * NK, expert_idx, N, K, E);
    offsets_host_[l] = moe_offsets_to_host(ctx_, offsets, E);
    ExpertPointers w;
    for (int e = 0; e < E; e++) {
        w.w1.push_back(param(lay.expert_w1[static_cast<size_t>(l) * E + e]));
        w.w2.push_back(param(lay.expert_w2[static_cast<size_t>(l) * E + e]));
    }
    moe_permute(ctx_, mx, ln2, slot, N, K, C);
    moe_experts_forward(ctx_, pre, act, y, mx, offsets_host_[l], w.w1.data(), w.w2.data(), C, F);
    moe_unpermute(ctx_, branch_.data(), y, gate_w, slot, N, K, C);
    events_.end();
}

double GpuModel::forward_block(int l, int B, int N) {
    const ModelConfig& cfg = config_;
    const int T = cfg.T, C = cfg.C, NH = cfg.NH, E = cfg.E, K = cfg.K, F = cfg.hidden_size();
    const ParamLayout& lay = layout_;
    const size_t NC = static_cast<size_t>(N) * C, NK = static_cast<size_t>(N) * K;
    const LayerTensorIdx& p = lay.layers[l];
    // the block-wise schedule launches this block's Trans beside its non-expert compute (no-op otherwise)
    if (executor_ != nullptr) executor_->block_forward_begin(l);
    const float* x = l == 0 ? encoded_.data() : residual_moe_.data() + (l - 1) * NC;  // [N,C]
    float* ln1 = ln1_.data() + l * NC;
    float* qkv = qkv_.data() + l * 3 * NC;
    float* att = att_.data() + static_cast<size_t>(l) * B * NH * T * T;
    float* atty = atty_.data() + l * NC;
    float* residual_attn = residual_attn_.data() + l * NC;
    float* ln2 = ln2_.data() + l * NC;
    float* gate_logits = gate_logits_.data() + static_cast<size_t>(l) * N * E;
    float* gate_w = gate_w_.data() + l * NK;
    int* expert_idx = expert_idx_.data() + l * NK;

    // attention branch: x + proj(attn(ln1(x)))
    events_.begin(OpKind::kAttn, l);
    layernorm_forward(ctx_, ln1, ln1_mean_.data() + static_cast<size_t>(l) * N,
                      ln1_rstd_.data() + static_cast<size_t>(l) * N, x, param(p.ln1_w), param(p.ln1_b), N, C);
    matmul_forward(ctx_, qkv, ln1, param(p.qkv_w), param(p.qkv_b), N, C, 3 * C);
    attention_forward(ctx_, atty, att, qkv, B, T, C, NH);
    matmul_forward(ctx_, branch_.data(), atty, param(p.proj_w), param(p.proj_b), N, C, C);
    residual_forward(ctx_, residual_attn, x, branch_.data(), NC);
    events_.end();
    // MoE branch: route, then the experts of this layer (dropless: dispatch = the top-K selection)
    events_.begin(OpKind::kGate, l);
    layernorm_forward(ctx_, ln2, ln2_mean_.data() + static_cast<size_t>(l) * N,
                      ln2_rstd_.data() + static_cast<size_t>(l) * N, residual_attn, param(p.ln2_w), param(p.ln2_b), N,
                      C);
    matmul_forward(ctx_, gate_logits, ln2, param(p.gate_w), nullptr, N, C, E);
    gate_topk_forward(ctx_, expert_idx, gate_w, gate_logits, N, E, K);
    events_.end();
    if (executor_ != nullptr) {
        moe_forward_staged(l, N, ln2, expert_idx, gate_w);  // the executor records its own (host) ops
    } else {
        moe_forward_local(l, N, ln2, expert_idx, gate_w);
    }
    residual_forward(ctx_, residual_moe_.data() + l * NC, residual_attn, branch_.data(), NC);
    const int head_size = C / NH;  // C is a multiple of NH (checked with the model's shape)
    return 2.0 * N * C * (3.0 * C + C + E) + 2.0 * 2.0 * B * NH * static_cast<double>(T) * T * head_size +
           2.0 * 2.0 * static_cast<double>(offsets_host_[l][E]) * C * F;
}

double GpuModel::forward(const int* inputs, const int* targets, int B, double loss_denominator) {
    const ModelConfig& cfg = config_;
    const int V = cfg.V, T = cfg.T, C = cfg.C, L = cfg.L;
    const int N = B * T;
    PROPHET_ASSERT(inputs != nullptr && targets != nullptr && B >= 1 && loss_denominator > 0.0);
    if (B != B_) allocate(B);
    PROPHET_CUDA_CHECK(cudaMemcpy(inputs_.data(), inputs, sizeof(int) * N, cudaMemcpyHostToDevice));
    PROPHET_CUDA_CHECK(cudaMemcpy(targets_.data(), targets, sizeof(int) * N, cudaMemcpyHostToDevice));
    loss_denominator_ = loss_denominator;
    const ParamLayout& lay = layout_;
    const size_t NC = static_cast<size_t>(N) * C;
    double flops = 0.0;

    events_.begin_step();  // (with a timeline) the GPU clock's reference for this step
    events_.begin(OpKind::kEmbed, -1);
    encoder_forward(ctx_, encoded_.data(), inputs_.data(), param(lay.wte), param(lay.wpe), B, T, C, V);
    events_.end();
    for (int l = 0; l < L; l++) flops += forward_block(l, B, N);
    const float* x_last = residual_moe_.data() + static_cast<size_t>(L - 1) * NC;
    events_.begin(OpKind::kHead, -1);
    layernorm_forward(ctx_, lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x_last, param(lay.ln_f_w),
                      param(lay.ln_f_b), N, C);
    forward_flops_ = flops + 2.0 * N * C * V;
    const double loss = crossentropy_tied_forward(ctx_, probs_.data(), lnf_.data(), param(lay.wte), targets_.data(),
                                                  N, C, V, loss_denominator);
    events_.end();
    return loss;
}

void GpuModel::moe_backward_local(int l, int N) {
    const ModelConfig& cfg = config_;
    const int C = cfg.C, E = cfg.E, K = cfg.K, F = cfg.hidden_size();
    const ParamLayout& lay = layout_;
    const size_t NK = static_cast<size_t>(N) * K;
    const float* gate_w = gate_w_.data() + l * NK;
    const int* slot = assignment_slot_.data() + l * NK;
    ExpertPointers w;
    for (int e = 0; e < E; e++) {
        const int i1 = lay.expert_w1[static_cast<size_t>(l) * E + e],
                  i2 = lay.expert_w2[static_cast<size_t>(l) * E + e];
        w.w1.push_back(param(i1)), w.w2.push_back(param(i2));
        w.dw1.push_back(grad(i1)), w.dw2.push_back(grad(i2));
    }
    events_.begin(OpKind::kBec, l);
    moe_unpermute_backward(ctx_, dy_.data(), dgate_w_.data(), dresidual_.data(), moe_y_.data() + l * NK * C, gate_w,
                           slot, N, K, C);
    moe_experts_backward(ctx_, dx_.data(), dpre_.data(), dy_.data(), moe_x_.data() + l * NK * C,
                         moe_pre_.data() + l * NK * F, moe_act_.data() + l * NK * F, offsets_host_[l], w.w1.data(),
                         w.w2.data(), w.dw1.data(), w.dw2.data(), C, F);
    moe_permute_backward(ctx_, dln_.data(), dx_.data(), slot, N, K, C);  // dln = d ln2 from the experts
    events_.end();
}

void GpuModel::backward_block(int l, int B, int N) {
    const ModelConfig& cfg = config_;
    const int T = cfg.T, C = cfg.C, NH = cfg.NH, E = cfg.E, K = cfg.K;
    const ParamLayout& lay = layout_;
    const size_t NC = static_cast<size_t>(N) * C, NK = static_cast<size_t>(N) * K;
    const LayerTensorIdx& p = lay.layers[l];
    const float* x = l == 0 ? encoded_.data() : residual_moe_.data() + (l - 1) * NC;
    const float* ln1 = ln1_.data() + l * NC;
    const float* qkv = qkv_.data() + l * 3 * NC;
    const float* att = att_.data() + static_cast<size_t>(l) * B * NH * T * T;
    const float* atty = atty_.data() + l * NC;
    const float* residual_attn = residual_attn_.data() + l * NC;
    const float* ln2 = ln2_.data() + l * NC;
    const float* gate_w = gate_w_.data() + l * NK;
    const int* expert_idx = expert_idx_.data() + l * NK;
    // MoE branch; dresidual is d(residual_moe) and passes straight through to d(residual_attn)
    if (executor_ != nullptr) {
        moe_backward_staged(l, N);  // dln = d ln2 from the experts, dgate_w_
    } else {
        moe_backward_local(l, N);
    }
    events_.begin(OpKind::kGateBwd, l);
    gate_topk_backward(ctx_, dgate_logits_.data(), dgate_w_.data(), gate_w, expert_idx, N, E, K);
    matmul_backward(ctx_, dln_.data(), grad(p.gate_w), nullptr, dgate_logits_.data(), ln2, param(p.gate_w), N, C, E,
                    /*accumulate_dinp=*/true);
    layernorm_backward(ctx_, dresidual_.data(), grad(p.ln2_w), grad(p.ln2_b), dln_.data(), residual_attn,
                       param(p.ln2_w), ln2_mean_.data() + static_cast<size_t>(l) * N,
                       ln2_rstd_.data() + static_cast<size_t>(l) * N, N, C);
    events_.end();
    // attention branch; dresidual is now d(residual_attn) and passes through to d(x)
    events_.begin(OpKind::kAttnBwd, l);
    matmul_backward(ctx_, datty_.data(), grad(p.proj_w), grad(p.proj_b), dresidual_.data(), atty, param(p.proj_w), N, C,
                    C, /*accumulate_dinp=*/false);
    attention_backward(ctx_, dqkv_.data(), datt_.data(), datty_.data(), qkv, att, B, T, C, NH);
    matmul_backward(ctx_, dln_.data(), grad(p.qkv_w), grad(p.qkv_b), dqkv_.data(), ln1, param(p.qkv_w), N, C, 3 * C,
                    /*accumulate_dinp=*/false);
    layernorm_backward(ctx_, dresidual_.data(), grad(p.ln1_w), grad(p.ln1_b), dln_.data(), x, param(p.ln1_w),
                       ln1_mean_.data() + static_cast<size_t>(l) * N, ln1_rstd_.data() + static_cast<size_t>(l) * N, N,
                       C);
    events_.end();
}

void GpuModel::backward() {
    const ModelConfig& cfg = config_;
    const int V = cfg.V, T = cfg.T, C = cfg.C, L = cfg.L;
    PROPHET_ASSERT_MSG(B_ > 0, "GpuModel::backward before forward");
    const int B = B_, N = B * T;
    const ParamLayout& lay = layout_;
    const size_t NC = static_cast<size_t>(N) * C;

    events_.begin(OpKind::kHeadBwd, -1);
    PROPHET_CUDA_CHECK(cudaMemsetAsync(dresidual_.data(), 0, sizeof(float) * NC, ctx_.stream()));
    crossentropy_tied_backward(ctx_, dln_.data(), grad(lay.wte), probs_.data(), lnf_.data(), param(lay.wte),
                               targets_.data(), N, C, V, loss_denominator_);
    const float* x_last = residual_moe_.data() + static_cast<size_t>(L - 1) * NC;
    layernorm_backward(ctx_, dresidual_.data(), grad(lay.ln_f_w), grad(lay.ln_f_b), dln_.data(), x_last,
                       param(lay.ln_f_w), lnf_mean_.data(), lnf_rstd_.data(), N, C);
    events_.end();
    for (int l = L - 1; l >= 0; l--) backward_block(l, B, N);
    events_.begin(OpKind::kEmbedBwd, -1);
    encoder_backward(ctx_, grad(lay.wte), grad(lay.wpe), dresidual_.data(), inputs_.data(), B, T, C, V);
    events_.end();
}

void GpuModel::zero_grad() {
    PROPHET_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, sizeof(float) * grads_.size(), ctx_.stream()));
}

void GpuModel::moe_forward_staged(int l, int N, const float* ln2, const int* expert_idx, const float* gate_w) {
    const int C = config_.C, E = config_.E, K = config_.K;
    const size_t NC = static_cast<size_t>(N) * C, NK = static_cast<size_t>(N) * K;
    h_rows_.resize(NC), h_out_.resize(NC), h_idx_.resize(NK), h_gate_w_.resize(NK);
    // plain cudaMemcpy: waits for the stream's kernels that wrote these (the stream is a blocking one)
    PROPHET_CUDA_CHECK(cudaMemcpy(h_rows_.data(), ln2, sizeof(float) * NC, cudaMemcpyDeviceToHost));
    PROPHET_CUDA_CHECK(cudaMemcpy(h_idx_.data(), expert_idx, sizeof(int) * NK, cudaMemcpyDeviceToHost));
    PROPHET_CUDA_CHECK(cudaMemcpy(h_gate_w_.data(), gate_w, sizeof(float) * NK, cudaMemcpyDeviceToHost));
    ctx_.synchronize();  // a bad expert id raised by gate_topk surfaces here, before the executor reads the ids
    std::vector<int>& offsets = offsets_host_[l];  // [E+1] this rank's choices per expert (expert_counts)
    offsets.assign(E + 1, 0);
    for (const int e : h_idx_)
        if (e >= 0 && e < E) offsets[e + 1]++;
    for (int e = 0; e < E; e++) offsets[e + 1] += offsets[e];
    executor_->forward(l, N, h_rows_.data(), h_idx_.data(), h_gate_w_.data(), h_out_.data());
    PROPHET_CUDA_CHECK(cudaMemcpy(branch_.data(), h_out_.data(), sizeof(float) * NC, cudaMemcpyHostToDevice));
}

void GpuModel::moe_backward_staged(int l, int N) {
    const int C = config_.C, K = config_.K;
    const size_t NC = static_cast<size_t>(N) * C, NK = static_cast<size_t>(N) * K;
    h_out_.resize(NC), h_rows_.resize(NC), h_dgate_w_.resize(NK);
    // dout = d residual_moe (h_out_), dh (h_rows_), dgate_w
    PROPHET_CUDA_CHECK(cudaMemcpy(h_out_.data(), dresidual_.data(), sizeof(float) * NC, cudaMemcpyDeviceToHost));
    executor_->backward(l, N, h_out_.data(), h_rows_.data(), h_dgate_w_.data());
    PROPHET_CUDA_CHECK(cudaMemcpy(dln_.data(), h_rows_.data(), sizeof(float) * NC, cudaMemcpyHostToDevice));
    PROPHET_CUDA_CHECK(cudaMemcpy(dgate_w_.data(), h_dgate_w_.data(), sizeof(float) * NK, cudaMemcpyHostToDevice));
}

double GpuModel::grad_norm_sq(const std::vector<char>* include) {
    if (include == nullptr) return sum_squares(ctx_, grads_.data(), grads_.size());
    PROPHET_ASSERT(include->size() == layout_.tensors.size());
    double sum = 0.0;  // tensor by tensor, in layout order (each sum_squares synchronizes)
    for (size_t i = 0; i < layout_.tensors.size(); i++)
        if ((*include)[i]) sum += sum_squares(ctx_, grads_.data() + layout_.tensors[i].offset, layout_.tensors[i].size);
    return sum;
}

void GpuModel::download_dense_grads(std::vector<float>& host) const {
    host.resize(layout_.num_dense_params);
    if (!host.empty())
        PROPHET_CUDA_CHECK(cudaMemcpy(host.data(), grads_.data(), sizeof(float) * host.size(), cudaMemcpyDeviceToHost));
}

void GpuModel::upload_dense_grads(const std::vector<float>& host) {
    PROPHET_ASSERT(host.size() == layout_.num_dense_params);
    if (!host.empty())
        PROPHET_CUDA_CHECK(cudaMemcpy(grads_.data(), host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice));
}

void GpuModel::adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip) {
    PROPHET_ASSERT(skip == nullptr || skip->size() == layout_.tensors.size());
    adam_step_++;
    events_.begin(OpKind::kOptimizer, -1);  // AdamW only: the gradient norm's reduction was its own call
    for (size_t i = 0; i < layout_.tensors.size(); i++) {
        if (skip != nullptr && (*skip)[i]) continue;
        const ParamTensor& t = layout_.tensors[i];
        adamw_update(ctx_, params_.data() + t.offset, grads_.data() + t.offset, adam_m_.data() + t.offset,
                     adam_v_.data() + t.offset, t.size, lr, adamw.beta1, adamw.beta2, adamw.eps,
                     t.is_matrix ? adamw.weight_decay : 0.0, adam_step_, grad_scale);
    }
    events_.end();
}

std::vector<float> GpuModel::download_grads() const { return grads_.download(); }

void GpuModel::download_state(Model<float>& host) const {
    PROPHET_ASSERT_MSG(host.layout.num_params == layout_.num_params, "GpuModel::download_state: another layout");
    host.params = params_.download();
    host.adam_m = adam_m_.download();
    host.adam_v = adam_v_.download();
    host.adam_step = adam_step_;
}

void GpuModel::upload_state(const Model<float>& host) {
    PROPHET_ASSERT_MSG(host.layout.num_params == layout_.num_params, "GpuModel::upload_state: another layout");
    params_.upload(host.params);
    adam_m_.upload(host.adam_m);
    adam_v_.upload(host.adam_v);
    adam_step_ = host.adam_step;
}

std::vector<int64_t> GpuModel::expert_counts(int layer) const {
    PROPHET_ASSERT_MSG(layer >= 0 && layer < (int)offsets_host_.size(), "GpuModel::expert_counts before forward");
    const std::vector<int>& offsets = offsets_host_[layer];  // [E+1]
    std::vector<int64_t> counts(config_.E);
    for (int e = 0; e < config_.E; e++) counts[e] = offsets[e + 1] - offsets[e];
    return counts;
}

}  // namespace prophet::cuda
