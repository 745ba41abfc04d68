// gpu_step_model.cpp: GpuStepModel (gpu_step_model.h).
#include "cuda/gpu_step_model.h"

#include <algorithm>

#include "core/error.h"

namespace prophet::cuda {

GpuStepModel::GpuStepModel(const Model<float>& host, int device)
    : ctx_(std::make_unique<Context>(device)), model_(std::make_unique<GpuModel>(*ctx_, host)) {}

std::string GpuStepModel::device() const { return "cuda:" + std::to_string(ctx_->device()); }

double GpuStepModel::grad_norm_sq(const std::vector<char>* include) {
    PROPHET_ASSERT_MSG(include == nullptr || std::all_of(include->begin(), include->end(), [](char c) { return c; }),
                       "GpuStepModel: one rank counts every tensor in the gradient norm");
    return model_->grad_norm_sq();
}

void GpuStepModel::adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip) {
    PROPHET_ASSERT_MSG(skip == nullptr || std::none_of(skip->begin(), skip->end(), [](char c) { return c; }),
                       "GpuStepModel: one rank updates every tensor");
    model_->adamw_step(lr, adamw, grad_scale);
    // the step ends when the device is done: the trainer's step_ms is then the step's own time (not the next
    // forward's wait for it), and a kernel's bad-id flag is raised in the step that set it
    ctx_->synchronize();
}

const int* GpuStepModel::dispatch_indices() {
    dispatch_host_ = model_->download_expert_idx();
    return dispatch_host_.data();
}

}  // namespace prophet::cuda
