// cpu_expert_compute.cpp: CpuExpertCompute (cpu_expert_compute.h): per non-empty expert, moe/experts.h's
// forward and backward on its block of sorted rows.
#include "moe/cpu_expert_compute.h"

#include "core/error.h"
#include "model/moe_gpt.h"
#include "moe/experts.h"

namespace prophet {

ExpertStorage expert_storage_from_model(Model<float>& model) {
    const int L = model.config.L, E = model.config.E;
    ExpertStorage storage;
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            storage.params.push_back(model_expert_params(model, l, e).data);
            storage.grads.push_back(model_expert_grads(model, l, e).data);
        }
    return storage;
}

CpuExpertCompute::CpuExpertCompute(int L, int E, int C, int F, ExpertStorage storage)
    : L_(L), E_(E), C_(C), F_(F), storage_(std::move(storage)), pre_(L), act_(L) {
    PROPHET_ASSERT((int)storage_.params.size() == L * E && (int)storage_.grads.size() == L * E);
}

void CpuExpertCompute::forward(int layer, const std::vector<int64_t>& offsets, const float* x, float* y) {
    PROPHET_ASSERT(layer >= 0 && layer < L_ && (int)offsets.size() == E_ + 1);
    const int C = C_, F = F_;
    const int64_t M = offsets[E_];
    float* const* params = storage_.params.data() + (size_t)layer * E_;  // [E]
    pre_[layer].resize((size_t)M * F);
    act_[layer].resize((size_t)M * F);
    for (int e = 0; e < E_; e++) {
        const int64_t begin = offsets[e];
        const int M_e = (int)(offsets[e + 1] - begin);
        if (M_e == 0) continue;
        moe_expert_forward(M_e, C, F, x + (size_t)begin * C, params[e], params[e] + (size_t)C * F,
                           pre_[layer].data() + (size_t)begin * F, act_[layer].data() + (size_t)begin * F,
                           y + (size_t)begin * C);
    }
}

void CpuExpertCompute::backward(int layer, const std::vector<int64_t>& offsets, const float* x, const float* dy,
                                float* dx) {
    PROPHET_ASSERT(layer >= 0 && layer < L_ && (int)offsets.size() == E_ + 1);
    const int C = C_, F = F_;
    const int64_t M = offsets[E_];
    PROPHET_ASSERT_MSG(pre_[layer].size() == (size_t)M * F, "CpuExpertCompute::backward: rows differ from forward's");
    float* const* params = storage_.params.data() + (size_t)layer * E_;  // [E]
    float* const* grads = storage_.grads.data() + (size_t)layer * E_;    // [E]
    dpre_.resize((size_t)M * F);
    for (int e = 0; e < E_; e++) {
        const int64_t begin = offsets[e];
        const int M_e = (int)(offsets[e + 1] - begin);
        if (M_e == 0) continue;
        moe_expert_backward(M_e, C, F, x + (size_t)begin * C, pre_[layer].data() + (size_t)begin * F,
                            act_[layer].data() + (size_t)begin * F, dy + (size_t)begin * C, params[e],
                            params[e] + (size_t)C * F, grads[e], grads[e] + (size_t)C * F,
                            dpre_.data() + (size_t)begin * F, dx + (size_t)begin * C);
    }
}

}  // namespace prophet
