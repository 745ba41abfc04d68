// gpu_step_model.cpp: GpuStepModel (gpu_step_model.h).
#include "cuda/gpu_step_model.h"

#include <algorithm>

#include "core/error.h"

namespace prophet::cuda {

GpuStepModel::GpuStepModel(const Model<float>& host, int device, GemmPrecision precision)
    : ctx_(std::make_unique<Context>(device, precision)), model_(std::make_unique<GpuModel>(*ctx_, host)) {}

std::string GpuStepModel::device() const { return "cuda:" + std::to_string(ctx_->device()); }

double GpuStepModel::grad_norm_sq(const std::vector<char>* include) {
    // every tensor included (one rank): one reduction over the arena, not one per tensor
    const bool all = include == nullptr || std::all_of(include->begin(), include->end(), [](char c) { return c; });
    return model_->grad_norm_sq(all ? nullptr : include);
}

void GpuStepModel::adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip) {
    model_->adamw_step(lr, adamw, grad_scale, skip);
    // the step ends when the device is done: the trainer's step_ms is then the step's own time (not the next
    // forward's wait for it), and a kernel's bad-id flag is raised in the step that set it
    ctx_->synchronize();
    model_->flush_timeline();  // the step's GPU op times, now that every event has completed
}

ExpertCompute* GpuStepModel::expert_compute(Model<float>& host) {
    if (!expert_compute_) expert_compute_ = std::make_unique<GpuExpertCompute>(*ctx_, *model_, host);
    return expert_compute_.get();
}

void GpuStepModel::reduce_dense_grads(const std::function<void(float*, size_t)>& sum) {
    model_->download_dense_grads(dense_host_);
    sum(dense_host_.data(), dense_host_.size());
    model_->upload_dense_grads(dense_host_);
}

const int* GpuStepModel::dispatch_indices() {
    dispatch_host_ = model_->download_expert_idx();
    return dispatch_host_.data();
}

}  // namespace prophet::cuda
