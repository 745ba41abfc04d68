// gpu_expert_compute.cpp: GpuExpertCompute (gpu_expert_compute.h).
#include "cuda/gpu_expert_compute.h"

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {
std::vector<int> int_offsets(const std::vector<int64_t>& offsets) {
    PROPHET_ASSERT_MSG(offsets.back() <= INT32_MAX, "GpuExpertCompute: more than 2^31 rows in one layer");
    return std::vector<int>(offsets.begin(), offsets.end());
}
}  // namespace

GpuExpertCompute::GpuExpertCompute(Context& ctx, GpuModel& model, Model<float>& host)
    : ctx_(ctx), model_(model), host_(host), L_(host.config.L), E_(host.config.E), C_(host.config.C),
      F_(host.config.hidden_size()), x_(L_), pre_(L_), act_(L_) {
    PROPHET_ASSERT_MSG(host.layout.num_params == model.layout().num_params, "GpuExpertCompute: another layout");
    for (int l = 0; l < L_; l++)
        for (int e = 0; e < E_; e++) {
            const size_t i = (size_t)l * E_ + e;
            PROPHET_ASSERT_MSG(host.layout.tensors[host.layout.expert_w2[i]].offset ==
                                   host.layout.tensors[host.layout.expert_w1[i]].offset + (size_t)C_ * F_,
                               "an expert's w1 and w2 must be contiguous (the executor moves them as one block)");
        }
    PROPHET_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    grads_ready_.assign(L_, nullptr);
    for (cudaEvent_t& ev : grads_ready_) {
        PROPHET_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        PROPHET_CUDA_CHECK(cudaEventRecord(ev, ctx_.stream()));  // "ready" until a backward records it again
    }
}

GpuExpertCompute::~GpuExpertCompute() {
    // best effort, no throwing from a destructor
    if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
    for (cudaEvent_t ev : grads_ready_)
        if (ev != nullptr) cudaEventDestroy(ev);
    if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
}

float* GpuExpertCompute::device_expert(Arena arena, int layer, int e) {
    const size_t offset = host_.layout.tensors[host_.layout.expert_w1[(size_t)layer * E_ + e]].offset;
    return (arena == Arena::kParams ? model_.device_params() : model_.device_grads()) + offset;
}

float* GpuExpertCompute::host_expert(Arena arena, int layer, int e) {
    return (arena == Arena::kParams ? model_expert_params(host_, layer, e) : model_expert_grads(host_, layer, e)).data;
}

void GpuExpertCompute::copy_experts(Arena arena, int layer, const std::vector<uint8_t>& experts, bool to_host) {
    PROPHET_ASSERT(layer >= 0 && layer < L_ && (int)experts.size() == E_);
    const size_t bytes = sizeof(float) * 2 * (size_t)C_ * F_;
    bool any = false;
    for (uint8_t v : experts) any |= v != 0;
    if (!any) return;
    // this may be the executor's communication thread: bind it to the context's device first
    PROPHET_CUDA_CHECK(cudaSetDevice(ctx_.device()));
    // gradients leave only after the layer's expert backward wrote them; parameters are final since the last
    // optimizer step (GpuStepModel::adamw_step synchronizes) or arrive from the host (copied before they are read:
    // the executor waits for the transfer before the layer's experts run)
    if (to_host && arena == Arena::kGrads) PROPHET_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, grads_ready_[layer], 0));
    for (int e = 0; e < E_; e++) {
        if (!experts[e]) continue;
        float* dev = device_expert(arena, layer, e);
        float* host = host_expert(arena, layer, e);
        if (to_host)
            PROPHET_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, copy_stream_));
        else
            PROPHET_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, copy_stream_));
    }
    PROPHET_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
}

void GpuExpertCompute::params_to_host(int layer, const std::vector<uint8_t>& experts) {
    copy_experts(Arena::kParams, layer, experts, true);
}
void GpuExpertCompute::params_from_host(int layer, const std::vector<uint8_t>& experts) {
    copy_experts(Arena::kParams, layer, experts, false);
}
void GpuExpertCompute::grads_to_host(int layer, const std::vector<uint8_t>& experts) {
    copy_experts(Arena::kGrads, layer, experts, true);
}
void GpuExpertCompute::grads_from_host(int layer, const std::vector<uint8_t>& experts) {
    copy_experts(Arena::kGrads, layer, experts, false);
}

void GpuExpertCompute::forward(int layer, const std::vector<int64_t>& offsets, const float* x, float* y) {
    PROPHET_ASSERT(layer >= 0 && layer < L_ && (int)offsets.size() == E_ + 1);
    const std::vector<int> off = int_offsets(offsets);
    const size_t M = (size_t)off[E_], C = C_, F = F_;
    x_[layer].resize(M * C), pre_[layer].resize(M * F), act_[layer].resize(M * F), rows_.resize(M * C);
    std::vector<const float*> w1(E_), w2(E_);  // [E] device pointers
    for (int e = 0; e < E_; e++) {
        w1[e] = device_expert(Arena::kParams, layer, e);
        w2[e] = w1[e] + C * F;
    }
    if (M > 0) PROPHET_CUDA_CHECK(cudaMemcpy(x_[layer].data(), x, sizeof(float) * M * C, cudaMemcpyHostToDevice));
    moe_experts_forward(ctx_, pre_[layer].data(), act_[layer].data(), rows_.data(), x_[layer].data(), off, w1.data(),
                        w2.data(), C_, F_);
    if (M > 0) PROPHET_CUDA_CHECK(cudaMemcpy(y, rows_.data(), sizeof(float) * M * C, cudaMemcpyDeviceToHost));
}

void GpuExpertCompute::backward(int layer, const std::vector<int64_t>& offsets, const float* x, const float* dy,
                                float* dx) {
    (void)x;  // the device copy of forward's rows is used
    PROPHET_ASSERT(layer >= 0 && layer < L_ && (int)offsets.size() == E_ + 1);
    const std::vector<int> off = int_offsets(offsets);
    const size_t M = (size_t)off[E_], C = C_, F = F_;
    PROPHET_ASSERT_MSG(x_[layer].size() == M * C, "GpuExpertCompute::backward: rows differ from forward's");
    rows_.resize(M * C), dpre_.resize(M * F), dx_.resize(M * C);
    std::vector<const float*> w1(E_), w2(E_);  // [E]
    std::vector<float*> dw1(E_), dw2(E_);
    for (int e = 0; e < E_; e++) {
        w1[e] = device_expert(Arena::kParams, layer, e), w2[e] = w1[e] + C * F;
        dw1[e] = device_expert(Arena::kGrads, layer, e), dw2[e] = dw1[e] + C * F;
    }
    if (M > 0) PROPHET_CUDA_CHECK(cudaMemcpy(rows_.data(), dy, sizeof(float) * M * C, cudaMemcpyHostToDevice));
    moe_experts_backward(ctx_, dx_.data(), dpre_.data(), rows_.data(), x_[layer].data(), pre_[layer].data(),
                         act_[layer].data(), off, w1.data(), w2.data(), dw1.data(), dw2.data(), C_, F_);
    PROPHET_CUDA_CHECK(cudaEventRecord(grads_ready_[layer], ctx_.stream()));
    if (M > 0) PROPHET_CUDA_CHECK(cudaMemcpy(dx, dx_.data(), sizeof(float) * M * C, cudaMemcpyDeviceToHost));
}

}  // namespace prophet::cuda
