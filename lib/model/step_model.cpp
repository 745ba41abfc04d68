// step_model.cpp: CpuStepModel (step_model.h), a thin forwarding layer over moe_gpt.h's free functions.
#include "model/step_model.h"

namespace prophet {

void CpuStepModel::zero_grad() { model_zero_grad(model_); }

double CpuStepModel::forward(const int* inputs, const int* targets, int B_local, double loss_denominator) {
    return model_forward(model_, inputs, targets, B_local, loss_denominator);
}

void CpuStepModel::backward() { model_backward(model_); }

double CpuStepModel::grad_norm_sq(const std::vector<char>* include) { return prophet::grad_norm_sq(model_, include); }

void CpuStepModel::adamw_step(double lr, const AdamWConfig& adamw, double grad_scale, const std::vector<char>* skip) {
    prophet::adamw_step(model_, lr, adamw, grad_scale, skip);
}

std::vector<int64_t> CpuStepModel::routing_counts(int layer) const {
    const size_t E = static_cast<size_t>(model_.config.E);
    const auto begin = model_.routing_counts.begin() + static_cast<long>(layer * E);
    return std::vector<int64_t>(begin, begin + static_cast<long>(E));
}

namespace {
void copy_state(const Model<float>& from, Model<float>& to) {
    if (&from == &to) return;
    to.params = from.params;
    to.adam_m = from.adam_m;
    to.adam_v = from.adam_v;
    to.adam_step = from.adam_step;
}
}  // namespace

void CpuStepModel::to_host(Model<float>& host) { copy_state(model_, host); }
void CpuStepModel::from_host(const Model<float>& host) { copy_state(host, model_); }

}  // namespace prophet
