// attention.cu: causal multi-head self-attention on batched cuBLAS GEMMs, as kernels.cpp's attention_*.
//
// Per (b, h) the CPU op runs S = scale q k^T [T,T], a causal row softmax, y = P v on strided views of qkv (row
// stride 3C) and out (row stride C). Here the B*NH GEMMs of each kind are one cublasSgemmBatched call on
// pointer arrays built by a small kernel (the (b, h) views are not one constant stride apart: h moves hs
// columns, b moves T rows), and the softmax is a warp per row. Like the CPU op it computes the full T x T
// block and zeroes the masked upper triangle.
#include <cuda_runtime.h>

#include <cmath>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device_util.cuh"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {

// The per-(b, h) views, each an array [B*NH] of device pointers.
enum View { kQ, kK, kV, kAtt, kOut, kDq, kDk, kDv, kDatt, kDout, kNumViews };

// ptrs [kNumViews][B*NH]; base pointers that are nullptr (forward has no gradients) give nullptr views
__global__ void attention_views_kernel(float** ptrs, float* qkv, float* att, float* out, float* dqkv, float* datt,
                                       float* dout, int B, int T, int C, int NH) {
    const int count = B * NH;
    const int bh = blockIdx.x * blockDim.x + threadIdx.x;
    if (bh >= count) return;
    const int b = bh / NH, h = bh % NH, hs = C / NH;
    const size_t qkv_off = (size_t)b * T * 3 * C + (size_t)h * hs;  // head h's q columns in sequence b
    const size_t out_off = (size_t)b * T * C + (size_t)h * hs;
    const size_t att_off = (size_t)bh * T * T;
    auto at = [](float* base, size_t off) { return base == nullptr ? nullptr : base + off; };
    ptrs[kQ * count + bh] = at(qkv, qkv_off);
    ptrs[kK * count + bh] = at(qkv, qkv_off + C);
    ptrs[kV * count + bh] = at(qkv, qkv_off + 2 * (size_t)C);
    ptrs[kAtt * count + bh] = at(att, att_off);
    ptrs[kOut * count + bh] = at(out, out_off);
    ptrs[kDq * count + bh] = at(dqkv, qkv_off);
    ptrs[kDk * count + bh] = at(dqkv, qkv_off + C);
    ptrs[kDv * count + bh] = at(dqkv, qkv_off + 2 * (size_t)C);
    ptrs[kDatt * count + bh] = at(datt, att_off);
    ptrs[kDout * count + bh] = at(dout, out_off);
}

// att rows [rows = B*NH*T, T], row r is query i = r % T: softmax over j <= i, zero for j > i. In place.
__global__ void causal_softmax_forward_kernel(float* att, int rows, int T) {
    const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (row >= rows) return;
    const int i = row % T;
    float* a = att + (size_t)row * T;
    float m = -INFINITY;
    for (int j = lane; j <= i; j += kWarp) m = fmaxf(m, a[j]);
    m = warp_max(m);
    float s = 0.0f;
    for (int j = lane; j <= i; j += kWarp) s += expf(a[j] - m);
    s = warp_sum(s);
    const float inv = 1.0f / s;
    for (int j = lane; j < T; j += kWarp) a[j] = j <= i ? expf(a[j] - m) * inv : 0.0f;
}

// datt rows in place: dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij') for j <= i, 0 for j > i
__global__ void causal_softmax_backward_kernel(float* datt, const float* att, int rows, int T) {
    const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (row >= rows) return;
    const int i = row % T;
    const float* p = att + (size_t)row * T;
    float* d = datt + (size_t)row * T;
    float dot = 0.0f;
    for (int j = lane; j <= i; j += kWarp) dot += p[j] * d[j];
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += kWarp) d[j] = j <= i ? p[j] * (d[j] - dot) : 0.0f;
}

// Builds the pointer arrays in the workspace; returns them ([kNumViews][B*NH]).
float** attention_views(Context& ctx, const float* qkv, float* att, float* out, float* dqkv, float* datt,
                        const float* dout, int B, int T, int C, int NH) {
    const int count = B * NH;
    float** ptrs = static_cast<float**>(ctx.workspace(sizeof(float*) * (size_t)kNumViews * count));
    attention_views_kernel<<<(count + kThreads - 1) / kThreads, kThreads, 0, ctx.stream()>>>(
        ptrs, const_cast<float*>(qkv), att, out, dqkv, datt, const_cast<float*>(dout), B, T, C, NH);
    PROPHET_CUDA_CHECK_LAUNCH();
    return ptrs;
}

unsigned warp_rows_grid(size_t rows) { return (unsigned)((rows + kThreads / kWarp - 1) / (kThreads / kWarp)); }

// The sizes both directions use.
struct AttentionShape {
    int hs, C3, count, rows;  // head size, qkv row stride, B*NH GEMMs, B*NH*T softmax rows
    float scale;              // 1/sqrt(hs)
    AttentionShape(int B, int T, int C, int NH) {
        PROPHET_ASSERT(NH > 0 && C % NH == 0);
        PROPHET_ASSERT_MSG((size_t)B * NH * T <= (size_t)INT32_MAX, "attention: B*NH*T must fit in int");
        hs = C / NH, C3 = 3 * C, count = B * NH, rows = B * NH * T;
        scale = 1.0f / std::sqrt(float(hs));
    }
};

}  // namespace

void attention_forward(Context& ctx, float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    if (B == 0 || T == 0) return;
    const AttentionShape sh(B, T, C, NH);
    const int hs = sh.hs, C3 = sh.C3, count = sh.count;
    float** v = attention_views(ctx, qkv, att, out, nullptr, nullptr, nullptr, B, T, C, NH);
    auto view = [&](View k) { return v + (size_t)k * count; };
    // S = scale q k^T  [T,T] per (b, h)
    gemm_batched(ctx, false, true, T, T, hs, sh.scale, view(kQ), C3, view(kK), C3, 0.0f, view(kAtt), T, count);
    causal_softmax_forward_kernel<<<warp_rows_grid(sh.rows), kThreads, 0, ctx.stream()>>>(att, sh.rows, T);
    PROPHET_CUDA_CHECK_LAUNCH();
    // y = P v  [T,hs] per (b, h), into out's head columns
    gemm_batched(ctx, false, false, T, hs, T, 1.0f, view(kAtt), T, view(kV), C3, 0.0f, view(kOut), C, count);
}

void attention_backward(Context& ctx, float* dqkv, float* datt, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH) {
    if (B == 0 || T == 0) return;
    const AttentionShape sh(B, T, C, NH);
    const int hs = sh.hs, C3 = sh.C3, count = sh.count;
    float** v = attention_views(ctx, qkv, const_cast<float*>(att), nullptr, dqkv, datt, dout, B, T, C, NH);
    auto view = [&](View k) { return v + (size_t)k * count; };
    // y = P v: dP = dy v^T, dv = P^T dy
    gemm_batched(ctx, false, true, T, T, hs, 1.0f, view(kDout), C, view(kV), C3, 0.0f, view(kDatt), T, count);
    gemm_batched(ctx, true, false, T, hs, T, 1.0f, view(kAtt), T, view(kDout), C, 0.0f, view(kDv), C3, count);
    causal_softmax_backward_kernel<<<warp_rows_grid(sh.rows), kThreads, 0, ctx.stream()>>>(datt, att, sh.rows, T);
    PROPHET_CUDA_CHECK_LAUNCH();
    // S = scale q k^T: dq = scale dS k, dk = scale dS^T q
    gemm_batched(ctx, false, false, T, hs, T, sh.scale, view(kDatt), T, view(kK), C3, 0.0f, view(kDq), C3, count);
    gemm_batched(ctx, true, false, T, hs, T, sh.scale, view(kDatt), T, view(kQ), C3, 0.0f, view(kDk), C3, count);
}

}  // namespace prophet::cuda
