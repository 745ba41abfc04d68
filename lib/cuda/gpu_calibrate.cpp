// gpu_calibrate.cpp: measure_gpu_compute (gpu_calibrate.h).
#include "cuda/gpu_calibrate.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/stats.h"
#include "cuda/check.h"
#include "cuda/gpu_model.h"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {
constexpr int kWarmup = 2;
constexpr int kRepeats = 7;

bool forward_kind(OpKind k) {
    return k == OpKind::kEmbed || k == OpKind::kAttn || k == OpKind::kGate || k == OpKind::kHead;
}
bool backward_kind(OpKind k) {
    return k == OpKind::kHeadBwd || k == OpKind::kGateBwd || k == OpKind::kAttnBwd || k == OpKind::kEmbedBwd;
}

// The expert FFN on M rows: one expert, so one GEMM of each kind; the median seconds of kRepeats after kWarmup.
double time_expert_ffn(Context& ctx, int M, int C, int F) {
    DeviceBuffer<float> x(static_cast<size_t>(M) * C), w1(static_cast<size_t>(C) * F), w2(static_cast<size_t>(F) * C),
        pre(static_cast<size_t>(M) * F), act(static_cast<size_t>(M) * F), y(static_cast<size_t>(M) * C);
    x.upload(std::vector<float>(x.size(), 0.01f));
    w1.upload(std::vector<float>(w1.size(), 0.02f));
    w2.upload(std::vector<float>(w2.size(), 0.02f));
    const std::vector<int> offsets = {0, M};
    const float* pw1 = w1.data();
    const float* pw2 = w2.data();
    cudaEvent_t start = nullptr, stop = nullptr;
    PROPHET_CUDA_CHECK(cudaEventCreate(&start));
    PROPHET_CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<double> samples;
    for (int r = 0; r < kWarmup + kRepeats; r++) {
        PROPHET_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
        moe_experts_forward(ctx, pre.data(), act.data(), y.data(), x.data(), offsets, &pw1, &pw2, C, F);
        PROPHET_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
        PROPHET_CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0.0f;
        PROPHET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (r >= kWarmup) samples.push_back(ms * 1e-3);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return median(samples);
}

// Non-expert block time: the model's own op spans (every expert local), all but the experts'; out.fnec_s and
// out.bnec_s per block, medians of kRepeats steps after kWarmup.
void time_non_expert(Context& ctx, const Model<float>& model, const int* inputs, const int* targets, int B_local,
                     double loss_denominator, GpuComputeFigures& out) {
    const int L = model.config.L;
    GpuModel gpu(ctx, model);
    OpTimeline timeline;
    gpu.set_timeline(&timeline);
    std::vector<double> fnec, bnec;
    for (int r = 0; r < kWarmup + kRepeats; r++) {
        gpu.zero_grad();
        gpu.forward(inputs, targets, B_local, loss_denominator);
        gpu.backward();
        ctx.synchronize();
        gpu.flush_timeline();
        int64_t fwd_ns = 0, bwd_ns = 0;
        for (const OpRecord& op : timeline.take()) {
            if (forward_kind(op.kind)) fwd_ns += op.end_ns - op.start_ns;
            if (backward_kind(op.kind)) bwd_ns += op.end_ns - op.start_ns;
        }
        if (r >= kWarmup) {
            fnec.push_back(fwd_ns * 1e-9 / L);
            bnec.push_back(bwd_ns * 1e-9 / L);
        }
    }
    out.fnec_s = median(fnec);
    out.bnec_s = median(bnec);
}

}  // namespace

GpuComputeFigures measure_gpu_compute(Context& ctx, const Model<float>& model, const int* inputs, const int* targets,
                                      int B_local, double loss_denominator, int M) {
    PROPHET_ASSERT(M > 0 && B_local > 0);
    GpuComputeFigures out;
    out.expert_s = time_expert_ffn(ctx, M, model.config.C, model.config.hidden_size());
    time_non_expert(ctx, model, inputs, targets, B_local, loss_denominator, out);
    return out;
}

}  // namespace prophet::cuda
