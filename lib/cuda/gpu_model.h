// gpu_model.h: the MoE-GPT's training step on one GPU, op for op the CPU model's (model/moe_gpt.cpp) over the
// lib/cuda ops: parameters, gradients, AdamW state and activations in device memory; all experts of every layer
// on this GPU (the LocalMoeExecutor's computation: layout, permute, per-expert FFN, unpermute).
//
//   Model<float> cpu(config);            // layout and initial values (or a checkpoint's)
//   GpuModel gpu(ctx, cpu);              // copies the parameters to the device
//   gpu.zero_grad();
//   double loss = gpu.forward(inputs, targets, B_local, B_global * T);   // host token arrays [B_local,T]
//   gpu.backward();
//   gpu.adamw_step(lr, adamw, grad_clip_scale(std::sqrt(gpu.grad_norm_sq()), max_norm));
//
// Not supported yet (the constructor refuses them, exit 3): capacity_factor > 0 and aux_loss_coef > 0.
#pragma once

#include <vector>

#include "cuda/context.h"
#include "kernels/optim.h"
#include "model/moe_gpt.h"

namespace prophet::cuda {

class GpuModel {
  public:
    GpuModel(Context& ctx, const Model<float>& model);

    // Returns this rank's share of the loss (synchronizes). inputs, targets: HOST arrays [B,T].
    double forward(const int* inputs, const int* targets, int B, double loss_denominator);
    void backward();  // accumulates into the gradients
    void zero_grad();
    double grad_norm_sq();  // sum of squares of every gradient (synchronizes)
    void adamw_step(double lr, const AdamWConfig& adamw, double grad_scale);

    std::vector<float> download_params() const;  // [num_params], the CPU model's layout
    std::vector<float> download_grads() const;
    // Parameters, AdamW m, v and step count to / from a host model of the same layout (checkpoints: a GPU run
    // saves and resumes through the CPU Model<float> layout, so its checkpoints are a CPU run's).
    void download_state(Model<float>& host) const;
    void upload_state(const Model<float>& host);
    // Tokens routed to each expert of `layer` in the last forward (dropless: demand = dispatched), [E].
    std::vector<int64_t> expert_counts(int layer) const;
    std::vector<int> download_expert_idx() const { return expert_idx_.download(); }  // [L,N,K] of the last forward
    const ModelConfig& config() const { return config_; }
    const ParamLayout& layout() const { return layout_; }
    // Forward FLOPs of the last forward's GEMMs and attention (2*M*N*K each), for achieved TFLOP/s.
    double last_forward_flops() const { return forward_flops_; }

  private:
    float* param(int idx) { return params_.data() + layout_.tensors[idx].offset; }
    float* grad(int idx) { return grads_.data() + layout_.tensors[idx].offset; }
    void allocate(int B);

    Context& ctx_;
    ModelConfig config_;
    ParamLayout layout_;
    DeviceBuffer<float> params_, grads_, adam_m_, adam_v_;  // [num_params] each
    long adam_step_ = 0;
    double loss_denominator_ = 0.0;
    double forward_flops_ = 0.0;

    // activations for B sequences (N = B*T tokens), per layer [L, ...] as the CPU model's (moe_gpt.h)
    int B_ = 0;
    DeviceBuffer<float> encoded_, ln1_, ln1_mean_, ln1_rstd_, qkv_, att_, atty_, residual_attn_, ln2_, ln2_mean_,
        ln2_rstd_, gate_logits_, gate_w_, residual_moe_, lnf_, lnf_mean_, lnf_rstd_, probs_, branch_;
    DeviceBuffer<int> inputs_, targets_, expert_idx_;  // [N], [N], [L,N,K]
    // MoE state per layer: offsets [L,E+1] (and on the host), slots [L,N*K], expert-sorted rows [L,N*K,...]
    DeviceBuffer<int> offsets_, assignment_slot_, slot_token_;
    std::vector<std::vector<int>> offsets_host_;  // [L][E+1]
    DeviceBuffer<float> moe_x_, moe_pre_, moe_act_, moe_y_;
    // backward scratch
    DeviceBuffer<float> dresidual_, dln_, datty_, dqkv_, datt_, dgate_w_, dgate_logits_, dy_, dpre_, dx_;
};

}  // namespace prophet::cuda
