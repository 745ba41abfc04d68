// step_model.h: the model operations one training step calls, on whichever device holds the model. The trainer
// (train/trainer.cpp) calls only these, so the CPU Model<float> and the GPU model (cuda/gpu_step_model.h) run
// under the same loop. The host Model<float> stays the reference layout: checkpoints are written from it and
// read into it, and a device model copies its parameters and AdamW state to and from it (to_host / from_host).
//
//   step.zero_grad();
//   double loss = step.forward(inputs, targets, B_local, B_global * T);   // host arrays [B_local,T]
//   step.backward();
//   step.reduce_dense_grads(all_reduce);        // several ranks: sum the dense gradients (host buffers)
//   double norm_sq = step.grad_norm_sq(&include);
//   step.adamw_step(lr, adamw, grad_clip_scale(std::sqrt(norm_sq), max_norm), &skip);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/optim.h"
#include "model/expert_compute.h"
#include "model/moe_executor.h"
#include "model/moe_gpt.h"

namespace prophet {

class StepModel {
  public:
    virtual ~StepModel() = default;
    virtual std::string device() const = 0;  // "cpu", "cuda:0", ...

    virtual void zero_grad() = 0;
    // This rank's share of the loss (model_forward's contract); inputs, targets: HOST arrays [B_local,T].
    virtual double forward(const int* inputs, const int* targets, int B_local, double loss_denominator) = 0;
    virtual void backward() = 0;  // accumulates into the gradients
    // Sum of squared gradients over tensors with include[i] != 0 (nullptr: all), in double.
    virtual double grad_norm_sq(const std::vector<char>* include) = 0;
    // AdamW on every tensor with skip[i] == 0 (nullptr: all); grad_scale multiplies every gradient.
    virtual void adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip) = 0;
    // Assignments per expert of layer l in the last forward, before capacity drops: [E] (Model::routing_counts).
    virtual std::vector<int64_t> routing_counts(int layer) const = 0;
    // The last forward's expert choices on the host, [L,N,K], -1 where the capacity limit dropped one
    // (Activations::dispatch_idx); valid until the next forward.
    virtual const int* dispatch_indices() = 0;

    // Parameters, AdamW m and v and the AdamW step count into / from `host` (the checkpoint layout).
    virtual void to_host(Model<float>& host) = 0;
    virtual void from_host(const Model<float>& host) = 0;

    // Record this model's ops into `timeline` (nullptr: off): the CPU model's host marks, a GPU's event pairs.
    virtual void set_timeline(OpTimeline* timeline) = 0;

    // ---- several ranks (expert parallelism, moe/ep_executor.h)
    // Route the model's MoE layers through `executor` (host rows; not owned).
    virtual void set_moe_executor(MoeExecutor<float>* executor) = 0;
    // The compute the executor must run this model's experts with (ExpertParallelExecutor::set_expert_compute),
    // its Trans/Agg moving `host`'s expert arena; nullptr: the executor's own CPU compute on that arena (the CPU
    // model, whose parameters ARE that arena). Owned by the step model.
    virtual ExpertCompute* expert_compute(Model<float>& host) = 0;
    // Sums the dense gradients across ranks: sum(data, n) all-reduces n floats in place, in host memory.
    virtual void reduce_dense_grads(const std::function<void(float*, size_t)>& sum) = 0;
};

// The CPU implementation: the free functions of moe_gpt.h on `model` (not owned), in the order they always ran,
// so a run through the interface is bitwise the run before it. to_host / from_host are no-ops when `host` is
// `model` itself (the trainer's case).
class CpuStepModel final : public StepModel {
  public:
    explicit CpuStepModel(Model<float>& model) : model_(model) {}
    std::string device() const override { return "cpu"; }
    void zero_grad() override;
    double forward(const int* inputs, const int* targets, int B_local, double loss_denominator) override;
    void backward() override;
    double grad_norm_sq(const std::vector<char>* include) override;
    void adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip) override;
    std::vector<int64_t> routing_counts(int layer) const override;
    const int* dispatch_indices() override { return model_.acts.dispatch_idx; }
    void to_host(Model<float>& host) override;
    void from_host(const Model<float>& host) override;
    void set_moe_executor(MoeExecutor<float>* executor) override { model_set_executor(model_, executor); }
    void set_timeline(OpTimeline* timeline) override { model_.timeline = timeline; }
    ExpertCompute* expert_compute(Model<float>&) override { return nullptr; }
    void reduce_dense_grads(const std::function<void(float*, size_t)>& sum) override {
        Span<float> dense = model_dense_grads(model_);
        sum(dense.data, dense.size);
    }

  private:
    Model<float>& model_;
};

}  // namespace prophet
