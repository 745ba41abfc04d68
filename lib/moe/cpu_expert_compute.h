// cpu_expert_compute.h: the experts of the expert-parallel executor on the CPU (model/expert_compute.h), with
// their parameters and gradients in this process's host copies (the model arena): the executor's default.
#pragma once

#include <vector>

#include "core/huge_pages.h"
#include "model/expert_compute.h"

namespace prophet {

template <typename Float>
struct Model;

// This process's copy of every expert: params[l*E + e] -> w1 [C,F] then w2 [F,C] (2*C*F floats, contiguous);
// grads the same layout.
struct ExpertStorage {
    std::vector<float*> params;  // [L*E]
    std::vector<float*> grads;   // [L*E]
};
ExpertStorage expert_storage_from_model(Model<float>& model);

class CpuExpertCompute final : public ExpertCompute {
  public:
    // storage [L*E]: the host copies the executor's Trans/Agg move (they are this compute's parameters too)
    CpuExpertCompute(int L, int E, int C, int F, ExpertStorage storage);
    const char* name() const override { return "cpu"; }
    void forward(int layer, const std::vector<int64_t>& offsets, const float* x, float* y) override;
    void backward(int layer, const std::vector<int64_t>& offsets, const float* x, const float* dy,
                  float* dx) override;
    // the parameters already are the host copies: nothing to copy
    void params_to_host(int, const std::vector<uint8_t>&) override {}
    void params_from_host(int, const std::vector<uint8_t>&) override {}
    void grads_to_host(int, const std::vector<uint8_t>&) override {}
    void grads_from_host(int, const std::vector<uint8_t>&) override {}

  private:
    int L_, E_, C_, F_;
    ExpertStorage storage_;
    std::vector<RowsVector<float>> pre_, act_;  // [L][M,F] kept from forward for backward
    RowsVector<float> dpre_;                    // [M,F] backward scratch
};

}  // namespace prophet
