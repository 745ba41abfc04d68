// loss_optim.cu: tied output + cross-entropy, AdamW, sum of squares (kernels.cpp, optim.cpp on the CPU).
#include <cuda_runtime.h>

#include <cmath>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device_util.cuh"
#include "cuda/ops.h"
#include "kernels/adamw_scalars.h"

namespace prophet::cuda {

namespace {

// ---- cross-entropy: one block per row of V logits (V ~ 50k: a warp per row would be too narrow) ------------

constexpr int kRowThreads = 512;

// probs [N,V] holds the logits on entry, the softmax on exit; row_loss [N] (double) = -log p[target] computed
// from the logits (target - max - log sum), as the CPU op, so a confident wrong prediction gives no log(0)
__global__ void crossentropy_forward_kernel(float* probs, double* row_loss, const int* targets, int N, int V,
                                            unsigned* error_flags) {
    __shared__ float shared[kWarp];
    const int n = blockIdx.x;
    float* p = probs + (size_t)n * V;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, p[v]);
    m = block_max(m, shared);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(p[v] - m);
    s = block_sum(s, shared);
    const int target = targets[n];
    const bool target_ok = target >= 0 && target < V;
    const float target_logit = target_ok ? p[target] : 0.0f;  // read by every thread before the row is rewritten
    __syncthreads();
    const float inv = 1.0f / s;
    for (int v = threadIdx.x; v < V; v += blockDim.x) p[v] = expf(p[v] - m) * inv;
    if (threadIdx.x == 0) {
        if (!target_ok) atomicOr(error_flags, kBadTargetId);
        row_loss[n] = target_ok ? -(double(target_logit) - double(m) - log(double(s))) : 0.0;
    }
}

// one block sums values [n] in double in a fixed order into *out
__global__ void sum_double_kernel(double* out, const double* values, size_t n) {
    __shared__ double shared[kWarp];
    double s = 0.0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) s += values[i];
    s = block_sum(s, shared);
    if (threadIdx.x == 0) *out = s;
}

// dlogits in place: (p - onehot(target)) / loss_denominator
__global__ void crossentropy_backward_kernel(float* probs, const int* targets, int N, int V, float inv_denominator,
                                             unsigned* error_flags) {
    const size_t total = (size_t)N * V;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int n = (int)(i / V), v = (int)(i % V);
        const int target = targets[n];
        if (v == 0 && (target < 0 || target >= V)) atomicOr(error_flags, kBadTargetId);
        const float d = v == target ? probs[i] - 1.0f : probs[i];
        probs[i] = d * inv_denominator;
    }
}

// ---- AdamW: the CPU's element update (kernels/adamw_scalars.h adamw_element), one thread per element -----------

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, size_t n, AdamWScalars<float> k) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        adamw_element(param[i], grad[i], m[i], v[i], k);
}

// ---- sum of squares: per-block partial sums in double, then one block adds them in order -------------------

constexpr unsigned kSumBlocks = 1024;

__global__ void sum_squares_partial_kernel(double* partial, const float* x, size_t n) {
    __shared__ double shared[kWarp];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += double(x[i]) * double(x[i]);
    s = block_sum(s, shared);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Copies one double from the device after the stream is done (synchronize() also reports raised id errors).
double read_double(Context& ctx, const double* device_value) {
    double host = 0.0;
    PROPHET_CUDA_CHECK(cudaMemcpyAsync(&host, device_value, sizeof host, cudaMemcpyDeviceToHost, ctx.stream()));
    ctx.synchronize();
    return host;
}

}  // namespace

double crossentropy_tied_forward(Context& ctx, float* probs, const float* x, const float* wte, const int* targets,
                                 int N, int C, int V, double loss_denominator) {
    PROPHET_ASSERT(loss_denominator > 0);
    if (N == 0) return 0.0;
    // logits [N,V] = x [N,C] . wte^T [C,V], written into probs and normalised there
    gemm(ctx, false, true, N, V, C, 1.0f, x, C, wte, C, 0.0f, probs, V);
    double* scratch = static_cast<double*>(ctx.workspace(sizeof(double) * ((size_t)N + 1)));  // [N] rows + 1 total
    crossentropy_forward_kernel<<<N, kRowThreads, 0, ctx.stream()>>>(probs, scratch, targets, N, V, ctx.error_flags());
    PROPHET_CUDA_CHECK_LAUNCH();
    sum_double_kernel<<<1, 1024, 0, ctx.stream()>>>(scratch + N, scratch, (size_t)N);
    PROPHET_CUDA_CHECK_LAUNCH();
    return read_double(ctx, scratch + N) / loss_denominator;
}

void crossentropy_tied_backward(Context& ctx, float* dx, float* dwte, float* probs, const float* x, const float* wte,
                                const int* targets, int N, int C, int V, double loss_denominator) {
    PROPHET_ASSERT(loss_denominator > 0);
    if (N == 0) return;
    crossentropy_backward_kernel<<<grid_for((size_t)N * V), kThreads, 0, ctx.stream()>>>(
        probs, targets, N, V, float(1.0 / loss_denominator), ctx.error_flags());
    PROPHET_CUDA_CHECK_LAUNCH();
    // dx [N,C] = dlogits [N,V] . wte [V,C];  dwte [V,C] += dlogits^T [V,N] . x [N,C]
    gemm(ctx, false, false, N, C, V, 1.0f, probs, V, wte, C, 0.0f, dx, C);
    gemm(ctx, true, false, V, C, N, 1.0f, probs, V, x, C, 1.0f, dwte, C);
}

void adamw_update(Context& ctx, float* param, const float* grad, float* m, float* v, size_t n, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step_t, double grad_scale) {
    PROPHET_ASSERT(step_t >= 1);
    if (n == 0) return;
    // per-step scalars in double, rounded to float once (as optim.cpp)
    const AdamWScalars<float> k = adamw_scalars<float>(lr, beta1, beta2, eps, weight_decay, step_t, grad_scale);
    adamw_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(param, grad, m, v, n, k);
    PROPHET_CUDA_CHECK_LAUNCH();
}

double sum_squares(Context& ctx, const float* x, size_t n) {
    if (n == 0) return 0.0;
    const unsigned blocks = std::min<unsigned>(kSumBlocks, grid_for(n));
    double* partial = static_cast<double*>(ctx.workspace(sizeof(double) * (blocks + 1)));  // [blocks] + 1 total
    sum_squares_partial_kernel<<<blocks, kThreads, 0, ctx.stream()>>>(partial, x, n);
    PROPHET_CUDA_CHECK_LAUNCH();
    sum_double_kernel<<<1, 1024, 0, ctx.stream()>>>(partial + blocks, partial, blocks);
    PROPHET_CUDA_CHECK_LAUNCH();
    return read_double(ctx, partial + blocks);
}

}  // namespace prophet::cuda
