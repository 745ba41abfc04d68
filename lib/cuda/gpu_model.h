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
#include "cuda/event_timeline.h"
#include "kernels/optim.h"
#include "model/moe_executor.h"
#include "model/moe_gpt.h"

namespace prophet::cuda {

class GpuModel {
  public:
    GpuModel(Context& ctx, const Model<float>& model);

    // Returns this rank's share of the loss (synchronizes). inputs, targets: HOST arrays [B,T].
    double forward(const int* inputs, const int* targets, int B, double loss_denominator);
    void backward();  // accumulates into the gradients
    void zero_grad();
    // Sum of squares of the gradients of the tensors with include[i] != 0 (nullptr: all; synchronizes).
    double grad_norm_sq(const std::vector<char>* include = nullptr);
    // AdamW on every tensor with skip[i] == 0 (nullptr: all).
    void adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip = nullptr);

    // Expert parallelism (host-staged, cuda/gpu_expert_compute.h): with an executor set, each MoE layer copies
    // its rows (ln2 [N,C]), choices [N,K] and gate weights [N,K] to the host, calls executor->forward there and
    // copies the output back; backward likewise. nullptr (the default): every expert on this GPU, in place.
    void set_moe_executor(MoeExecutor<float>* executor) { executor_ = executor; }
    // GPU op times from cudaEvent pairs (event_timeline.h) into `timeline` (nullptr: off): embedding, each block's
    // attention and gate forward / backward, its experts when they are local, the head, AdamW. flush_timeline()
    // after the stream was synchronized (GpuStepModel::adamw_step does both).
    void set_timeline(OpTimeline* timeline) { events_.set_sink(timeline); }
    void flush_timeline() { events_.flush(); }
    // The device arenas ([num_params], the host layout's offsets), for an expert compute that works on them.
    float* device_params() { return params_.data(); }
    float* device_grads() { return grads_.data(); }
    // The dense gradients (the first layout().num_dense_params of the arena) to / from the host, for the
    // all-reduce across ranks.
    void download_dense_grads(std::vector<float>& host) const;
    void upload_dense_grads(const std::vector<float>& host);

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
    // the MoE layer through executor_ (host-staged); forward fills offsets_host_[l] with the local counts
    void moe_forward_staged(int l, int N, const float* ln2, const int* expert_idx, const float* gate_w);
    void moe_forward_local(int l, int N, const float* ln2, const int* expert_idx, const float* gate_w);
    void moe_backward_staged(int l, int N);
    // block l of forward() on B sequences (N = B*T rows); returns its FLOPs (attention, gate, experts' GEMMs)
    double forward_block(int l, int B, int N);
    // block l of backward(): the MoE branch, the gate, the attention branch (dresidual_ carries d(output) in and
    // d(input) out)
    void backward_block(int l, int B, int N);
    // block l's experts' backward on this GPU, without an executor: dln_ = d ln2 from the experts, dgate_w_
    void moe_backward_local(int l, int N);

    Context& ctx_;
    ModelConfig config_;
    ParamLayout layout_;
    DeviceBuffer<float> params_, grads_, adam_m_, adam_v_;  // [num_params] each
    long adam_step_ = 0;
    double loss_denominator_ = 0.0;
    double forward_flops_ = 0.0;
    MoeExecutor<float>* executor_ = nullptr;
    EventTimeline events_;
    // host staging of the MoE layers under an executor: [N,C] rows / out / dout / dh, [N,K] choices, weights
    std::vector<float> h_rows_, h_out_, h_gate_w_, h_dgate_w_;
    std::vector<int> h_idx_;

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
