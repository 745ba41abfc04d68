// gpu_expert_compute.h: the expert-parallel executor's experts on this rank's GPU (model/expert_compute.h),
// host-staged: the executor's layout, dispatch, combine, Trans and Agg run on host buffers over its
// Communicator (MPI for ranks sharing one GPU; the NCCL communicator stages host buffers through its GPU);
// this class copies the sorted rows to the device, runs the experts' GEMMs there as grouped cuBLAS calls
// (ops.h moe_experts_forward/backward) on the GpuModel's own expert parameters, and copies the outputs back.
// Around Trans / Agg it copies the moving experts' parameters / gradients between the GpuModel and the host
// Model<float> arena the executor's ExpertStorage points into, on a copy stream of its own (non-blocking: under the
// block-wise schedule these calls come from the executor's communication thread while the main thread's kernels
// run on the context's stream; the gradient copies wait for an event recorded after the layer's expert backward).
//
//   cuda::GpuExpertCompute compute(ctx, gpu_model, host_model);
//   ExpertParallelExecutor ep(comm, host_model, RouteRule::kOwner);
//   ep.set_expert_compute(&compute);
//   gpu_model.set_moe_executor(&ep);      // the GpuModel's MoE layers now call ep on host copies of their rows
#pragma once

#include <vector>

#include "cuda/context.h"
#include "cuda/gpu_model.h"
#include "model/expert_compute.h"

namespace prophet::cuda {

class GpuExpertCompute final : public ExpertCompute {
  public:
    // host: the model whose expert arena the executor's Trans/Agg move (same layout as the GpuModel's)
    GpuExpertCompute(Context& ctx, GpuModel& model, Model<float>& host);
    ~GpuExpertCompute() override;
    GpuExpertCompute(const GpuExpertCompute&) = delete;
    GpuExpertCompute& operator=(const GpuExpertCompute&) = delete;
    const char* name() const override { return "cuda"; }
    void forward(int layer, const std::vector<int64_t>& offsets, const float* x, float* y) override;
    void backward(int layer, const std::vector<int64_t>& offsets, const float* x, const float* dy,
                  float* dx) override;
    void params_to_host(int layer, const std::vector<uint8_t>& experts) override;
    void params_from_host(int layer, const std::vector<uint8_t>& experts) override;
    void grads_to_host(int layer, const std::vector<uint8_t>& experts) override;
    void grads_from_host(int layer, const std::vector<uint8_t>& experts) override;

  private:
    // expert e of layer: its w1 (then w2, contiguous) in the device arena and the host one
    enum class Arena { kParams, kGrads };
    float* device_expert(Arena arena, int layer, int e);
    float* host_expert(Arena arena, int layer, int e);
    void copy_experts(Arena arena, int layer, const std::vector<uint8_t>& experts, bool to_host);

    Context& ctx_;
    GpuModel& model_;
    Model<float>& host_;
    int L_, E_, C_, F_;
    // per layer, kept from forward for backward: the rows and the hidden activations on the device
    std::vector<DeviceBuffer<float>> x_, pre_, act_;  // [L] of [M,C], [M,F], [M,F]
    DeviceBuffer<float> rows_, dpre_, dx_;           // scratch: [M,C] y or dy, [M,F], [M,C]
    cudaStream_t copy_stream_ = nullptr;             // the staging copies (non-blocking)
    std::vector<cudaEvent_t> grads_ready_;           // [L] recorded on ctx's stream after each layer's backward
};

}  // namespace prophet::cuda
