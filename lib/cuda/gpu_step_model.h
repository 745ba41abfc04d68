// gpu_step_model.h: the GPU behind the trainer's StepModel interface (model/step_model.h). It owns the CUDA
// context and the device model, built from the host Model<float> (its layout and current values: fresh, or a
// checkpoint's after from_host). One rank: every expert local (GpuModel). Several ranks: the trainer's
// ExpertParallelExecutor runs the MoE layers, host-staged, with this model's GpuExpertCompute
// (cuda/gpu_expert_compute.h); the tensor masks (optimizer skip, grad-norm include) select tensors on the device.
#pragma once

#include <memory>

#include "cuda/context.h"
#include "cuda/gpu_expert_compute.h"
#include "cuda/gpu_model.h"
#include "model/step_model.h"

namespace prophet::cuda {

class GpuStepModel final : public StepModel {
  public:
    GpuStepModel(const Model<float>& host, int device, GemmPrecision precision = GemmPrecision::kFp32);
    std::string device() const override;
    void zero_grad() override { model_->zero_grad(); }
    double forward(const int* inputs, const int* targets, int B_local, double loss_denominator) override {
        return model_->forward(inputs, targets, B_local, loss_denominator);
    }
    void backward() override { model_->backward(); }
    double grad_norm_sq(const std::vector<char>* include) override;
    void adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip) override;
    std::vector<int64_t> routing_counts(int layer) const override { return model_->expert_counts(layer); }
    const int* dispatch_indices() override;  // downloads [L,N,K] (dropless: the top-K selection)
    void to_host(Model<float>& host) override { model_->download_state(host); }
    void from_host(const Model<float>& host) override { model_->upload_state(host); }
    void set_moe_executor(MoeExecutor<float>* executor) override { model_->set_moe_executor(executor); }
    void set_timeline(OpTimeline* timeline) override { model_->set_timeline(timeline); }
    ExpertCompute* expert_compute(Model<float>& host) override;
    void reduce_dense_grads(const std::function<void(float*, size_t)>& sum) override;
    Context& context() { return *ctx_; }

  private:
    std::unique_ptr<Context> ctx_;
    std::unique_ptr<GpuModel> model_;
    std::unique_ptr<GpuExpertCompute> expert_compute_;
    std::vector<float> dense_host_;  // [num_dense_params] staging of the dense-gradient all-reduce
    std::vector<int> dispatch_host_;  // [L,N,K], dispatch_indices()
};

}  // namespace prophet::cuda
