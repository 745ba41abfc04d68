// staged_compute.h: a second, real ExpertCompute for the CPU tests of the executor's host staging
// (model/expert_compute.h): the experts run on the CPU (CpuExpertCompute) but on an arena of their OWN, apart
// from the executor's ExpertStorage, the way a GPU's device memory is apart from the host copies. Only the
// staging calls around Trans and Agg connect the two, so an expert the executor forgets to stage shows up as a
// wrong output or gradient (the foreign copies start as NaN) exactly as it would on a GPU (GpuExpertCompute).
#pragma once

#include <cstdint>
#include <vector>

#include "moe/cpu_expert_compute.h"

namespace prophet::moe_test {

class StagedExpertCompute final : public ExpertCompute {
  public:
    // host [L*E]: the executor's storage (numel = 2*C*F each); the own arena starts as a copy of it
    StagedExpertCompute(int L, int E, int C, int F, const ExpertStorage& host)
        : E_(E), numel_(2 * (size_t)C * F), host_(host), inner_(L, E, C, F, own(host, L * E, 2 * (size_t)C * F)) {}
    const char* name() const override { return "staged-cpu"; }
    void forward(int layer, const std::vector<int64_t>& offsets, const float* x, float* y) override {
        inner_.forward(layer, offsets, x, y);
    }
    void backward(int layer, const std::vector<int64_t>& offsets, const float* x, const float* dy,
                  float* dx) override {
        inner_.backward(layer, offsets, x, dy, dx);
    }
    void params_to_host(int l, const std::vector<uint8_t>& ex) override { copy(l, ex, params, host_.params, true); }
    void params_from_host(int l, const std::vector<uint8_t>& ex) override { copy(l, ex, params, host_.params, false); }
    void grads_to_host(int l, const std::vector<uint8_t>& ex) override { copy(l, ex, grads, host_.grads, true); }
    void grads_from_host(int l, const std::vector<uint8_t>& ex) override { copy(l, ex, grads, host_.grads, false); }

    std::vector<std::vector<float>> params, grads;  // [L*E][2*C*F]: the "device" arena, authoritative for home

  private:
    ExpertStorage own(const ExpertStorage& host, int n, size_t numel) {
        ExpertStorage s;
        for (int i = 0; i < n; i++) {
            params.emplace_back(host.params[i], host.params[i] + numel);
            grads.emplace_back(host.grads[i], host.grads[i] + numel);
        }
        for (int i = 0; i < n; i++) s.params.push_back(params[i].data()), s.grads.push_back(grads[i].data());
        return s;
    }
    void copy(int layer, const std::vector<uint8_t>& experts, std::vector<std::vector<float>>& arena,
              const std::vector<float*>& host, bool to_host) {
        for (int e = 0; e < E_; e++) {
            if (!experts[e]) continue;
            const size_t i = (size_t)layer * E_ + e;
            if (to_host)
                std::copy(arena[i].begin(), arena[i].end(), host[i]);
            else
                std::copy(host[i], host[i] + numel_, arena[i].begin());
        }
    }
    int E_;
    size_t numel_;
    ExpertStorage host_;
    CpuExpertCompute inner_;
};

}  // namespace prophet::moe_test
