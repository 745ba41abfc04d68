// dense.cu: embedding, layernorm, matmul (bias and its gradient around cuBLAS), gelu, residual, row softmax.
// The CPU originals are in kernels/kernels.cpp; the math is the same line for line, the loops are spread over
// threads. Index math is size_t wherever N*C or N*V can pass 2^31.
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device_util.cuh"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {

// ---- embedding ---------------------------------------------------------------------------------------------

// Both encoder kernels: one thread per (token n, channel c) of [N,C], grid-stride; an id outside [0,V) raises
// kBadTokenId and is skipped. visit(i, n, c, token).
template <typename Visit>
__device__ void for_each_token_channel(const int* tokens, int N, int C, int V, unsigned* error_flags, Visit visit) {
    const size_t total = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int n = (int)(i / C), c = (int)(i % C);
        const int token = tokens[n];
        if (token < 0 || token >= V) {
            atomicOr(error_flags, kBadTokenId);
            continue;
        }
        visit(i, n, c, token);
    }
}

// out [N,C]
__global__ void encoder_forward_kernel(float* out, const int* tokens, const float* wte, const float* wpe, int N, int T,
                                       int C, int V, unsigned* error_flags) {
    for_each_token_channel(tokens, N, C, V, error_flags, [=] __device__(size_t i, int n, int c, int token) {
        out[i] = wte[(size_t)token * C + c] + wpe[(size_t)(n % T) * C + c];
    });
}

// dwte: atomicAdd (two tokens with the same id write the same row)
__global__ void encoder_backward_wte_kernel(float* dwte, const float* dout, const int* tokens, int N, int C, int V,
                                            unsigned* error_flags) {
    for_each_token_channel(tokens, N, C, V, error_flags, [=] __device__(size_t i, int n, int c, int token) {
        atomicAdd(dwte + (size_t)token * C + c, dout[i]);
    });
}

// dwpe [T,C]: one thread per (t, c), summing over b in order (deterministic)
__global__ void encoder_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
    const size_t total = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += dout[(size_t)b * T * C + i];
        dwpe[i] += s;
    }
}

// ---- layernorm ---------------------------------------------------------------------------------------------

// one warp per row; two passes over the row (mean, then variance about the mean, as the CPU op)
__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                         const float* bias, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (row >= N) return;  // whole warps leave together: row is uniform within a warp
    const float* x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += kWarp) s += x[c];
    const float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += kWarp) v += (x[c] - m) * (x[c] - m);
    v = warp_sum(v) / C;
    const float r = 1.0f / sqrtf(v + 1e-5f);
    float* o = out + (size_t)row * C;
    for (int c = lane; c < C; c += kWarp) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// dinp (+=): one warp per row, the two row reductions of the CPU op
__global__ void layernorm_backward_dinp_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                               const float* mean, const float* rstd, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (row >= N) return;
    const float* dout_n = dout + (size_t)row * C;
    const float* inp_n = inp + (size_t)row * C;
    const float m = mean[row], r = rstd[row];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = lane; c < C; c += kWarp) {
        const float norm = (inp_n[c] - m) * r;
        const float dnorm = weight[c] * dout_n[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean = warp_sum(dnorm_mean) / C;
    dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
    float* dinp_n = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += kWarp) {
        const float norm = (inp_n[c] - m) * r;
        const float dnorm = weight[c] * dout_n[c];
        dinp_n[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
    }
}

// ---- column sums (dweight, dbias): fixed-order two-stage reduction over the rows ----------------------------
// Stage 1: block (32 columns x 8 row lanes) over one chunk of kChunkRows rows -> partial [chunks, NV, C].
// Stage 2: one thread per column adds the chunks in order into the (+=) outputs. Deterministic, no atomics.
constexpr int kChunkRows = 256;
constexpr int kRowLanes = 8;

// Terms for the column sums: layernorm gives (dout * norm, dout); the bias gradient gives (dout).
struct LayernormTerms {
    const float *dout, *inp, *mean, *rstd;
    int C;
    __device__ void operator()(int n, int c, float* t) const {
        const size_t i = (size_t)n * C + c;
        t[0] = dout[i] * ((inp[i] - mean[n]) * rstd[n]);
        t[1] = dout[i];
    }
};
struct RowTerms {
    const float* dout;
    int C;
    __device__ void operator()(int n, int c, float* t) const { t[0] = dout[(size_t)n * C + c]; }
};

template <int NV, typename Terms>
__global__ void column_sum_partial_kernel(float* partial, Terms terms, int N, int C) {
    __shared__ float tile[NV][kRowLanes][kWarp];
    const int c = blockIdx.x * kWarp + threadIdx.x;
    const int chunk = blockIdx.y;
    const int row_end = min(N, (chunk + 1) * kChunkRows);
    float acc[NV] = {};
    if (c < C) {
        for (int n = chunk * kChunkRows + threadIdx.y; n < row_end; n += kRowLanes) {
            float t[NV];
            terms(n, c, t);
            for (int j = 0; j < NV; j++) acc[j] += t[j];
        }
    }
    for (int j = 0; j < NV; j++) tile[j][threadIdx.y][threadIdx.x] = acc[j];
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int j = 0; j < NV; j++) {
            float s = 0.0f;
            for (int y = 0; y < kRowLanes; y++) s += tile[j][y][threadIdx.x];
            partial[((size_t)chunk * NV + j) * C + c] = s;
        }
    }
}

// out0 (+=) [C] gets term 0, out1 (+=) [C] term 1 (NV == 2)
template <int NV>
__global__ void column_sum_final_kernel(float* out0, float* out1, const float* partial, int chunks, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s[NV] = {};
    for (int k = 0; k < chunks; k++)
        for (int j = 0; j < NV; j++) s[j] += partial[((size_t)k * NV + j) * C + c];
    out0[c] += s[0];
    if constexpr (NV > 1) out1[c] += s[1];
}

template <int NV, typename Terms>
void column_sums(Context& ctx, float* out0, float* out1, Terms terms, int N, int C) {
    if (N == 0 || C == 0) return;
    const int chunks = (N + kChunkRows - 1) / kChunkRows;
    PROPHET_ASSERT_MSG(chunks <= 65535, "column_sums: too many rows for gridDim.y");
    float* partial = static_cast<float*>(ctx.workspace(sizeof(float) * (size_t)chunks * NV * C));
    const dim3 grid((C + kWarp - 1) / kWarp, chunks), block(kWarp, kRowLanes);
    column_sum_partial_kernel<NV><<<grid, block, 0, ctx.stream()>>>(partial, terms, N, C);
    PROPHET_CUDA_CHECK_LAUNCH();
    column_sum_final_kernel<NV><<<(C + kThreads - 1) / kThreads, kThreads, 0, ctx.stream()>>>(out0, out1, partial,
                                                                                               chunks, C);
    PROPHET_CUDA_CHECK_LAUNCH();
}

// ---- matmul bias ---------------------------------------------------------------------------------------------

__global__ void broadcast_rows_kernel(float* out, const float* bias, int N, int OC) {
    const size_t total = (size_t)N * OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % OC];
}

// ---- elementwise ---------------------------------------------------------------------------------------------

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
    }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = inp[i];
        const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
        const float local =
            0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
        dinp[i] = local * dout[i];
    }
}

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

// ---- row softmax: one warp per row of E ----------------------------------------------------------------------

__global__ void softmax_forward_kernel(float* probs, const float* logits, int N, int E) {
    const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (row >= N) return;
    const float* l = logits + (size_t)row * E;
    float* p = probs + (size_t)row * E;
    float m = -INFINITY;
    for (int e = lane; e < E; e += kWarp) m = fmaxf(m, l[e]);
    m = warp_max(m);
    float s = 0.0f;
    for (int e = lane; e < E; e += kWarp) s += expf(l[e] - m);
    s = warp_sum(s);
    for (int e = lane; e < E; e += kWarp) p[e] = expf(l[e] - m) / s;
}

__global__ void softmax_backward_kernel(float* dlogits, const float* dprobs, const float* probs, int N, int E) {
    const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (row >= N) return;
    const float* dp = dprobs + (size_t)row * E;
    const float* p = probs + (size_t)row * E;
    float dot = 0.0f;
    for (int e = lane; e < E; e += kWarp) dot += p[e] * dp[e];
    dot = warp_sum(dot);
    float* dl = dlogits + (size_t)row * E;
    for (int e = lane; e < E; e += kWarp) dl[e] += p[e] * (dp[e] - dot);
}

unsigned warp_rows_grid(int rows) { return (unsigned)((rows + kThreads / kWarp - 1) / (kThreads / kWarp)); }

}  // namespace

// ---- launchers -----------------------------------------------------------------------------------------------

void encoder_forward(Context& ctx, float* out, const int* tokens, const float* wte, const float* wpe, int B, int T,
                     int C, int V) {
    const int N = B * T;
    if (N == 0) return;
    encoder_forward_kernel<<<grid_for((size_t)N * C), kThreads, 0, ctx.stream()>>>(out, tokens, wte, wpe, N, T, C, V,
                                                                                    ctx.error_flags());
    PROPHET_CUDA_CHECK_LAUNCH();
}

void encoder_backward(Context& ctx, float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C,
                      int V) {
    const int N = B * T;
    if (N == 0) return;
    encoder_backward_wte_kernel<<<grid_for((size_t)N * C), kThreads, 0, ctx.stream()>>>(dwte, dout, tokens, N, C, V,
                                                                                         ctx.error_flags());
    PROPHET_CUDA_CHECK_LAUNCH();
    encoder_backward_wpe_kernel<<<grid_for((size_t)T * C), kThreads, 0, ctx.stream()>>>(dwpe, dout, B, T, C);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void layernorm_forward(Context& ctx, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
    if (N == 0) return;
    layernorm_forward_kernel<<<warp_rows_grid(N), kThreads, 0, ctx.stream()>>>(out, mean, rstd, inp, weight, bias, N,
                                                                                C);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void layernorm_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C) {
    if (N == 0) return;
    layernorm_backward_dinp_kernel<<<warp_rows_grid(N), kThreads, 0, ctx.stream()>>>(dinp, dout, inp, weight, mean,
                                                                                      rstd, N, C);
    PROPHET_CUDA_CHECK_LAUNCH();
    column_sums<2>(ctx, dweight, dbias, LayernormTerms{dout, inp, mean, rstd, C}, N, C);
}

void matmul_forward(Context& ctx, float* out, const float* inp, const float* weight, const float* bias, int N, int IC,
                    int OC) {
    float beta = 0.0f;
    if (bias != nullptr && N > 0) {
        // seed every row with the bias, then the GEMM adds inp . weight on top (beta = 1), as the CPU op
        broadcast_rows_kernel<<<grid_for((size_t)N * OC), kThreads, 0, ctx.stream()>>>(out, bias, N, OC);
        PROPHET_CUDA_CHECK_LAUNCH();
        beta = 1.0f;
    }
    gemm(ctx, false, false, N, OC, IC, 1.0f, inp, IC, weight, OC, beta, out, OC);
}

void matmul_backward(Context& ctx, float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC, bool accumulate_dinp) {
    if (dinp != nullptr)
        gemm(ctx, false, true, N, IC, OC, 1.0f, dout, OC, weight, OC, accumulate_dinp ? 1.0f : 0.0f, dinp, IC);
    gemm(ctx, true, false, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dweight, OC);
    if (dbias != nullptr) column_sums<1>(ctx, dbias, nullptr, RowTerms{dout, OC}, N, OC);
}

void gelu_forward(Context& ctx, float* out, const float* inp, size_t n) {
    if (n == 0) return;
    gelu_forward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(out, inp, n);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void gelu_backward(Context& ctx, float* dinp, const float* inp, const float* dout, size_t n) {
    if (n == 0) return;
    gelu_backward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(dinp, inp, dout, n);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void residual_forward(Context& ctx, float* out, const float* a, const float* b, size_t n) {
    if (n == 0) return;
    residual_forward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(out, a, b, n);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void softmax_forward(Context& ctx, float* probs, const float* logits, int N, int E) {
    if (N == 0) return;
    softmax_forward_kernel<<<warp_rows_grid(N), kThreads, 0, ctx.stream()>>>(probs, logits, N, E);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void softmax_backward(Context& ctx, float* dlogits, const float* dprobs, const float* probs, int N, int E) {
    if (N == 0) return;
    softmax_backward_kernel<<<warp_rows_grid(N), kThreads, 0, ctx.stream()>>>(dlogits, dprobs, probs, N, E);
    PROPHET_CUDA_CHECK_LAUNCH();
}

}  // namespace prophet::cuda
