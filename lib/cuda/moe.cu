// moe.cu: the gate's top-K and the MoE data movement (layout, permute, unpermute) and the per-expert FFN.
//
// The CPU versions: kernels.cpp gate_topk_* and model/moe_executor.cpp (LocalMoeExecutor, the oracle). The
// layout reproduces the CPU's stable counting sort exactly (slots in expert order, then (token, k) order), so
// permute/unpermute move the same rows to the same places; the combine sums over k in k order, as the contract
// in model/moe_executor.h asks.
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device_util.cuh"
#include "cuda/ops.h"

namespace prophet::cuda {

namespace {

// ---- gate ----------------------------------------------------------------------------------------------------

// one thread per token: K selection passes over the E logits (strict '>' scanning upward keeps the lowest index
// among equal logits, as the CPU op), then a softmax over the K selected
__global__ void gate_topk_forward_kernel(int* expert_idx, float* gate_w, const float* logits, int N, int E, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float* l = logits + (size_t)n * E;
    int idx[kMaxTopK];
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= idx[j] == e;
            if (!taken && (best < 0 || l[e] > l[best])) best = e;
        }
        idx[k] = best;
    }
    const float maxval = l[idx[0]];
    float w[kMaxTopK];
    float sum = 0.0f;
    for (int k = 0; k < K; k++) {
        w[k] = expf(l[idx[k]] - maxval);
        sum += w[k];
    }
    for (int k = 0; k < K; k++) {
        expert_idx[(size_t)n * K + k] = idx[k];
        gate_w[(size_t)n * K + k] = w[k] / sum;
    }
}

__global__ void gate_topk_backward_kernel(float* dlogits, const float* dgate_w, const float* gate_w,
                                          const int* expert_idx, int N, int E, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float* dw = dgate_w + (size_t)n * K;
    const float* w = gate_w + (size_t)n * K;
    const int* idx = expert_idx + (size_t)n * K;
    float* dl = dlogits + (size_t)n * E;
    for (int e = 0; e < E; e++) dl[e] = 0.0f;
    float dot = 0.0f;
    for (int k = 0; k < K; k++) dot += w[k] * dw[k];
    for (int k = 0; k < K; k++) {
        const int e = idx[k];
        if (e >= 0 && e < E) dl[e] = w[k] * (dw[k] - dot);  // the selection is distinct and in range by contract
    }
}

// ---- layout: a stable counting sort without atomics ----------------------------------------------------------

constexpr int kScanThreads = 256;

// Block e walks all N*K assignments in order and gives each one routed to e its rank among them (a block-wide
// exclusive scan per chunk, carried across chunks): assignment_slot[a] = rank (the offset is added later),
// counts[e] = how many.
__global__ void layout_rank_kernel(int* assignment_slot, int* counts, const int* expert_idx, int NK) {
    using Scan = cub::BlockScan<int, kScanThreads>;
    __shared__ typename Scan::TempStorage scan_storage;
    const int e = blockIdx.x;
    int running = 0;
    for (int base = 0; base < NK; base += kScanThreads) {
        const int a = base + threadIdx.x;
        const int mine = a < NK && expert_idx[a] == e ? 1 : 0;
        int prefix = 0, chunk_total = 0;
        Scan(scan_storage).ExclusiveSum(mine, prefix, chunk_total);
        if (mine) assignment_slot[a] = running + prefix;
        running += chunk_total;
        __syncthreads();  // scan_storage is reused by the next chunk
    }
    if (threadIdx.x == 0) counts[e] = running;
}

// offsets [E+1] = exclusive prefix sum of counts [E]; one thread (E is small: tens to hundreds)
__global__ void layout_offsets_kernel(int* offsets, const int* counts, int E) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    int s = 0;
    for (int e = 0; e < E; e++) {
        offsets[e] = s;
        s += counts[e];
    }
    offsets[E] = s;
}

// assignment_slot[a] = offsets[e] + rank (or -1 if dropped / invalid), slot_token[slot] = a / K
__global__ void layout_slots_kernel(int* assignment_slot, int* slot_token, const int* offsets, const int* expert_idx,
                                    int NK, int K, int E, unsigned* error_flags) {
    const int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= NK) return;
    const int e = expert_idx[a];
    if (e < 0 || e >= E) {
        if (e < -1 || e >= E) atomicOr(error_flags, kBadExpertId);
        assignment_slot[a] = -1;
        return;
    }
    const int slot = offsets[e] + assignment_slot[a];
    assignment_slot[a] = slot;
    slot_token[slot] = a / K;
}

// ---- permute / unpermute -------------------------------------------------------------------------------------

// x[slot(a)] = h[a / K]; one thread per (assignment, channel)
__global__ void permute_kernel(float* x, const float* h, const int* assignment_slot, int NK, int K, int C) {
    const size_t total = (size_t)NK * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int a = (int)(i / C), c = (int)(i % C);
        const int s = assignment_slot[a];
        if (s >= 0) x[(size_t)s * C + c] = h[(size_t)(a / K) * C + c];
    }
}

// dh[n] = sum_k dx[slot(n,k)] in k order; one thread per (token, channel)
__global__ void permute_backward_kernel(float* dh, const float* dx, const int* assignment_slot, int N, int K, int C) {
    const size_t total = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int n = (int)(i / C), c = (int)(i % C);
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const int s = assignment_slot[(size_t)n * K + k];
            if (s >= 0) acc += dx[(size_t)s * C + c];
        }
        dh[i] = acc;
    }
}

// out[n] = sum_k gate_w[n,k] y[slot(n,k)] in k order
__global__ void unpermute_kernel(float* out, const float* y, const float* gate_w, const int* assignment_slot, int N,
                                 int K, int C) {
    const size_t total = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int n = (int)(i / C), c = (int)(i % C);
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const size_t a = (size_t)n * K + k;
            const int s = assignment_slot[a];
            if (s >= 0) acc += gate_w[a] * y[(size_t)s * C + c];
        }
        out[i] = acc;
    }
}

// one warp per assignment: dgate_w[a] = dout[n] . y[slot], dy[slot] = gate_w[a] dout[n]
__global__ void unpermute_backward_kernel(float* dy, float* dgate_w, const float* dout, const float* y,
                                          const float* gate_w, const int* assignment_slot, int NK, int K, int C) {
    const int a = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (a >= NK) return;
    const int s = assignment_slot[a];
    if (s < 0) {
        if (lane == 0) dgate_w[a] = 0.0f;
        return;
    }
    const float* dout_n = dout + (size_t)(a / K) * C;
    const float* y_s = y + (size_t)s * C;
    float* dy_s = dy + (size_t)s * C;
    const float w = gate_w[a];
    float dot = 0.0f;
    for (int c = lane; c < C; c += kWarp) {
        dot += dout_n[c] * y_s[c];
        dy_s[c] = w * dout_n[c];
    }
    dot = warp_sum(dot);
    if (lane == 0) dgate_w[a] = dot;
}

unsigned blocks_for(int n, int threads) { return (unsigned)((n + threads - 1) / threads); }

}  // namespace

void gate_topk_forward(Context& ctx, int* expert_idx, float* gate_w, const float* logits, int N, int E, int K) {
    PROPHET_ASSERT_MSG(K >= 1 && K <= E && K <= kMaxTopK, "gate_topk_forward: need 1 <= K <= min(E, kMaxTopK)");
    if (N == 0) return;
    gate_topk_forward_kernel<<<blocks_for(N, kThreads), kThreads, 0, ctx.stream()>>>(expert_idx, gate_w, logits, N, E,
                                                                                      K);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void gate_topk_backward(Context& ctx, float* dlogits, const float* dgate_w, const float* gate_w, const int* expert_idx,
                        int N, int E, int K) {
    PROPHET_ASSERT_MSG(K >= 1 && K <= E, "gate_topk_backward: need 1 <= K <= E");
    if (N == 0) return;
    gate_topk_backward_kernel<<<blocks_for(N, kThreads), kThreads, 0, ctx.stream()>>>(dlogits, dgate_w, gate_w,
                                                                                       expert_idx, N, E, K);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void moe_layout(Context& ctx, int* expert_offsets, int* assignment_slot, int* slot_token, const int* expert_idx, int N,
                int K, int E) {
    PROPHET_ASSERT(E >= 1 && K >= 1 && N >= 0);
    PROPHET_ASSERT_MSG((size_t)N * K <= (size_t)INT32_MAX, "moe_layout: N*K must fit in int");
    const int NK = N * K;
    int* counts = static_cast<int*>(ctx.workspace(sizeof(int) * (size_t)E));
    layout_rank_kernel<<<E, kScanThreads, 0, ctx.stream()>>>(assignment_slot, counts, expert_idx, NK);
    PROPHET_CUDA_CHECK_LAUNCH();
    layout_offsets_kernel<<<1, 1, 0, ctx.stream()>>>(expert_offsets, counts, E);
    PROPHET_CUDA_CHECK_LAUNCH();
    if (NK == 0) return;
    layout_slots_kernel<<<blocks_for(NK, kThreads), kThreads, 0, ctx.stream()>>>(
        assignment_slot, slot_token, expert_offsets, expert_idx, NK, K, E, ctx.error_flags());
    PROPHET_CUDA_CHECK_LAUNCH();
}

std::vector<int> moe_offsets_to_host(Context& ctx, const int* expert_offsets, int E) {
    std::vector<int> offsets((size_t)E + 1);
    PROPHET_CUDA_CHECK(cudaMemcpyAsync(offsets.data(), expert_offsets, sizeof(int) * offsets.size(),
                                       cudaMemcpyDeviceToHost, ctx.stream()));
    ctx.synchronize();  // also reports a bad expert id raised by moe_layout
    return offsets;
}

void moe_permute(Context& ctx, float* x, const float* h, const int* assignment_slot, int N, int K, int C) {
    if (N == 0) return;
    permute_kernel<<<grid_for((size_t)N * K * C), kThreads, 0, ctx.stream()>>>(x, h, assignment_slot, N * K, K, C);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void moe_permute_backward(Context& ctx, float* dh, const float* dx, const int* assignment_slot, int N, int K, int C) {
    if (N == 0) return;
    permute_backward_kernel<<<grid_for((size_t)N * C), kThreads, 0, ctx.stream()>>>(dh, dx, assignment_slot, N, K, C);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void moe_unpermute(Context& ctx, float* out, const float* y, const float* gate_w, const int* assignment_slot, int N,
                   int K, int C) {
    if (N == 0) return;
    unpermute_kernel<<<grid_for((size_t)N * C), kThreads, 0, ctx.stream()>>>(out, y, gate_w, assignment_slot, N, K, C);
    PROPHET_CUDA_CHECK_LAUNCH();
}

void moe_unpermute_backward(Context& ctx, float* dy, float* dgate_w, const float* dout, const float* y,
                            const float* gate_w, const int* assignment_slot, int N, int K, int C) {
    if (N == 0) return;
    const int NK = N * K;
    unpermute_backward_kernel<<<blocks_for(NK, kThreads / kWarp), kThreads, 0, ctx.stream()>>>(
        dy, dgate_w, dout, y, gate_w, assignment_slot, NK, K, C);
    PROPHET_CUDA_CHECK_LAUNCH();
}

// ---- the experts: one GEMM pair per non-empty expert, gelu over all rows at once ----------------------------

namespace {
// The experts' GEMMs of one kind as one group: expert e (non-empty) multiplies its rows [offsets[e], offsets[e+1])
// of `rows` (row stride rows_ld) with its matrix (mats[e]) into out (row stride out_ld). shape(M_e) gives the
// (M, N, K) of that GEMM. a_is_rows: the rows are operand A (else B: the weight-gradient GEMMs, rows^T x ...).
template <typename Shape>
std::vector<GemmProblem> expert_group(const std::vector<int>& offsets, Shape shape, const float* a, int a_ld,
                                      bool a_per_row, const float* const* a_mats, const float* b, int b_ld,
                                      bool b_per_row, const float* const* b_mats, float* c, int c_ld, bool c_per_row,
                                      float* const* c_mats) {
    const int E = (int)offsets.size() - 1;
    std::vector<GemmProblem> group;  // [non-empty experts]
    for (int e = 0; e < E; e++) {
        const int begin = offsets[e], M_e = offsets[e + 1] - begin;
        if (M_e == 0) continue;
        GemmProblem p{};
        shape(M_e, &p.M, &p.N, &p.K);
        p.A = a_per_row ? a + (size_t)begin * a_ld : a_mats[e], p.lda = a_ld;
        p.B = b_per_row ? b + (size_t)begin * b_ld : b_mats[e], p.ldb = b_ld;
        p.C = c_per_row ? c + (size_t)begin * c_ld : c_mats[e], p.ldc = c_ld;
        group.push_back(p);
    }
    return group;
}
}  // namespace

// Each GEMM kind is one grouped call over the non-empty experts (gemm_grouped), not one cuBLAS call per expert.
void moe_experts_forward(Context& ctx, float* pre, float* act, float* y, const float* x,
                         const std::vector<int>& offsets, const float* const* w1, const float* const* w2, int C,
                         int F) {
    const int E = (int)offsets.size() - 1;
    // pre [M_e,F] = x [M_e,C] W1 [C,F]
    gemm_grouped(ctx, false, false, 1.0f, 0.0f,
                 expert_group(offsets, [&](int M_e, int* M, int* N, int* K) { *M = M_e, *N = F, *K = C; }, x, C, true,
                              nullptr, nullptr, F, false, w1, pre, F, true, nullptr));
    const size_t M = (size_t)offsets[E];
    gelu_forward(ctx, act, pre, M * F);
    // y [M_e,C] = act [M_e,F] W2 [F,C]
    gemm_grouped(ctx, false, false, 1.0f, 0.0f,
                 expert_group(offsets, [&](int M_e, int* M, int* N, int* K) { *M = M_e, *N = C, *K = F; }, act, F,
                              true, nullptr, nullptr, C, false, w2, y, C, true, nullptr));
}

void moe_experts_backward(Context& ctx, float* dx, float* dpre, const float* dy, const float* x, const float* pre,
                          const float* act, const std::vector<int>& offsets, const float* const* w1,
                          const float* const* w2, float* const* dw1, float* const* dw2, int C, int F) {
    const int E = (int)offsets.size() - 1;
    // y = act W2: d act [M_e,F] = dy [M_e,C] W2^T (into dpre), dW2 [F,C] += act^T dy
    gemm_grouped(ctx, false, true, 1.0f, 0.0f,
                 expert_group(offsets, [&](int M_e, int* M, int* N, int* K) { *M = M_e, *N = F, *K = C; }, dy, C, true,
                              nullptr, nullptr, C, false, w2, dpre, F, true, nullptr));
    gemm_grouped(ctx, true, false, 1.0f, 1.0f,
                 expert_group(offsets, [&](int M_e, int* M, int* N, int* K) { *M = F, *N = C, *K = M_e; }, act, F,
                              true, nullptr, dy, C, true, nullptr, nullptr, C, false, dw2));
    const size_t M = (size_t)offsets[E];
    gelu_backward(ctx, dpre, pre, dpre, M * F);
    // pre = x W1: dW1 [C,F] += x^T dpre, dx [M_e,C] = dpre W1^T
    gemm_grouped(ctx, true, false, 1.0f, 1.0f,
                 expert_group(offsets, [&](int M_e, int* M, int* N, int* K) { *M = C, *N = F, *K = M_e; }, x, C, true,
                              nullptr, dpre, F, true, nullptr, nullptr, F, false, dw1));
    gemm_grouped(ctx, false, true, 1.0f, 0.0f,
                 expert_group(offsets, [&](int M_e, int* M, int* N, int* K) { *M = M_e, *N = C, *K = F; }, dpre, F,
                              true, nullptr, nullptr, F, false, w1, dx, C, true, nullptr));
}

}  // namespace prophet::cuda
