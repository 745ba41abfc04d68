// moe_executor.cpp: LocalMoeExecutor, the sequential per-expert reference for the MoeExecutor contract.
#include "model/moe_executor.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"

namespace prophet {

template <typename Float>
LocalMoeExecutor<Float>::LocalMoeExecutor(int L, int E, int K, int C, int F, std::vector<ExpertWeights<Float>> weights)
    : L_(L), E_(E), K_(K), C_(C), F_(F), weights_(std::move(weights)), layers_(L) {
    PROPHET_ASSERT((int)weights_.size() == L * E);
}

template <typename Float>
void LocalMoeExecutor<Float>::forward(int layer, int N, const Float* h, const int* expert_idx, const Float* gate_w,
                                      Float* out) {
    PROPHET_ASSERT(layer >= 0 && layer < L_);
    LayerState& st = layers_[layer];
    st.N = N;
    sort_assignments(st, N, expert_idx, gate_w);
    run_experts(layer, st, h);
    combine(st, N, out);
}

// A counting sort of the kept assignments by expert (stable, so slots follow (token, k) order).
template <typename Float>
void LocalMoeExecutor<Float>::sort_assignments(LayerState& st, int N, const int* expert_idx,
                                               const Float* gate_w) const {
    const int E = E_, K = K_;
    st.expert_offsets.assign(E + 1, 0);
    for (int a = 0; a < N * K; a++) {
        const int e = expert_idx[a];
        PROPHET_ASSERT_MSG(e >= -1 && e < E, "expert index out of range");
        if (e >= 0) st.expert_offsets[e + 1]++;
    }
    for (int e = 0; e < E; e++) st.expert_offsets[e + 1] += st.expert_offsets[e];
    st.M = st.expert_offsets[E];
    std::vector<int> fill(st.expert_offsets.begin(), st.expert_offsets.end() - 1);  // [E] next free slot
    st.slot_token.resize(static_cast<size_t>(N) * K);
    st.assignment_slot.resize(static_cast<size_t>(N) * K);
    for (int a = 0; a < N * K; a++) {
        const int e = expert_idx[a];
        if (e < 0) {
            st.assignment_slot[a] = -1;
            continue;
        }
        const int s = fill[e]++;
        st.assignment_slot[a] = s;
        st.slot_token[s] = a / K;
    }
    st.gate_w.assign(gate_w, gate_w + static_cast<size_t>(N) * K);
}

// Dispatch (gather h [N,C] into slot order), then each expert's FFN over its slots, in expert order.
template <typename Float>
void LocalMoeExecutor<Float>::run_experts(int layer, LayerState& st, const Float* h) const {
    const int E = E_, C = C_, F = F_, M = st.M;
    st.x.resize((size_t)M * C);
    st.pre.resize((size_t)M * F);
    st.act.resize((size_t)M * F);
    st.y.resize((size_t)M * C);
    for (int s = 0; s < M; s++)
        std::copy_n(h + static_cast<size_t>(st.slot_token[s]) * C, C, st.x.data() + static_cast<size_t>(s) * C);
    for (int e = 0; e < E; e++) {
        const int begin = st.expert_offsets[e];
        const int M_e = st.expert_offsets[e + 1] - begin;
        if (M_e == 0) continue;
        const ExpertWeights<Float>& w = weights_[static_cast<size_t>(layer) * E + e];
        Float* x_e = st.x.data() + (size_t)begin * C;      // [M_e,C]
        Float* pre_e = st.pre.data() + (size_t)begin * F;  // [M_e,F]
        Float* act_e = st.act.data() + (size_t)begin * F;  // [M_e,F]
        Float* y_e = st.y.data() + (size_t)begin * C;      // [M_e,C]
        gemm<Float>(false, false, M_e, F, C, static_cast<Float>(1), x_e, C, w.w1, F, static_cast<Float>(0), pre_e, F);
        gelu_forward(act_e, pre_e, (size_t)M_e * F);
        gemm<Float>(false, false, M_e, C, F, static_cast<Float>(1), act_e, F, w.w2, C, static_cast<Float>(0), y_e, C);
    }
}

// Combine, per token in k order (see the contract in moe_executor.h): out[n] = sum_k w[n,k] y[slot(n,k)].
template <typename Float>
void LocalMoeExecutor<Float>::combine(const LayerState& st, int N, Float* out) const {
    const int K = K_, C = C_;
    for (int n = 0; n < N; n++) {
        Float* out_n = out + static_cast<size_t>(n) * C;  // [C]
        std::fill_n(out_n, C, static_cast<Float>(0));
        for (int k = 0; k < K; k++) {
            const int s = st.assignment_slot[static_cast<size_t>(n) * K + k];
            if (s < 0) continue;
            const Float w = st.gate_w[static_cast<size_t>(n) * K + k];
            const Float* y_s = st.y.data() + (size_t)s * C;  // [C]
            for (int c = 0; c < C; c++) out_n[c] += w * y_s[c];
        }
    }
}

template <typename Float>
void LocalMoeExecutor<Float>::backward(int layer, int N, const Float* dout, Float* dh, Float* dgate_w) {
    PROPHET_ASSERT(layer >= 0 && layer < L_);
    const LayerState& st = layers_[layer];
    PROPHET_ASSERT_MSG(st.N == N, "backward called with a different N than forward");
    const int M = st.M;
    dy_.resize(static_cast<size_t>(M) * C_);
    dpre_.resize(static_cast<size_t>(M) * F_);
    dx_.resize(static_cast<size_t>(M) * C_);
    combine_backward(st, N, dout, dgate_w);
    experts_backward(layer, st);
    dispatch_backward(st, N, dh);
}

// Combine backward: out[n] = sum_k w[n,k] y[slot(n,k)], so dgate_w[n,k] = dout[n] . y[slot] and
// dy[slot] = w[n,k] dout[n].
template <typename Float>
void LocalMoeExecutor<Float>::combine_backward(const LayerState& st, int N, const Float* dout, Float* dgate_w) {
    const int K = K_, C = C_;
    for (int n = 0; n < N; n++) {
        const Float* dout_n = dout + static_cast<size_t>(n) * C;  // [C]
        for (int k = 0; k < K; k++) {
            const size_t a = static_cast<size_t>(n) * K + k;
            const int s = st.assignment_slot[a];
            if (s < 0) {
                dgate_w[a] = 0;
                continue;
            }
            const Float* y_s = st.y.data() + (size_t)s * C;  // [C]
            Float* dy_s = dy_.data() + (size_t)s * C;        // [C]
            const Float w = st.gate_w[a];
            Float dot = 0;
            for (int c = 0; c < C; c++) {
                dot += dout_n[c] * y_s[c];
                dy_s[c] = w * dout_n[c];
            }
            dgate_w[a] = dot;
        }
    }
}

// Experts backward, in expert order: dx from dy, accumulating dW1 and dW2.
template <typename Float>
void LocalMoeExecutor<Float>::experts_backward(int layer, const LayerState& st) {
    const int E = E_, C = C_, F = F_;
    for (int e = 0; e < E; e++) {
        const int begin = st.expert_offsets[e];
        const int M_e = st.expert_offsets[e + 1] - begin;
        if (M_e == 0) continue;
        const ExpertWeights<Float>& w = weights_[static_cast<size_t>(layer) * E + e];
        const Float* x_e = st.x.data() + (size_t)begin * C;      // [M_e,C]
        const Float* pre_e = st.pre.data() + (size_t)begin * F;  // [M_e,F]
        const Float* act_e = st.act.data() + (size_t)begin * F;  // [M_e,F]
        const Float* dy_e = dy_.data() + (size_t)begin * C;      // [M_e,C]
        Float* dpre_e = dpre_.data() + (size_t)begin * F;        // [M_e,F] (d act first, then d pre in place)
        Float* dx_e = dx_.data() + (size_t)begin * C;            // [M_e,C]
        // y = act W2: d act = dy W2^T, dW2 += act^T dy
        gemm<Float>(false, true, M_e, F, C, static_cast<Float>(1), dy_e, C, w.w2, C, static_cast<Float>(0), dpre_e, F);
        gemm<Float>(true, false, F, C, M_e, static_cast<Float>(1), act_e, F, dy_e, C, static_cast<Float>(1), w.dw2, C);
        gelu_backward(dpre_e, pre_e, dpre_e, (size_t)M_e * F);
        // pre = x W1: dW1 += x^T dpre, dx = dpre W1^T
        gemm<Float>(true, false, C, F, M_e, static_cast<Float>(1), x_e, C, dpre_e, F, static_cast<Float>(1), w.dw1, F);
        gemm<Float>(false, true, M_e, C, F, static_cast<Float>(1), dpre_e, F, w.w1, F, static_cast<Float>(0), dx_e, C);
    }
}

// Dispatch backward (scatter), per token in k order: dh[n] = sum_k dx[slot(n,k)].
template <typename Float>
void LocalMoeExecutor<Float>::dispatch_backward(const LayerState& st, int N, Float* dh) const {
    const int K = K_, C = C_;
    for (int n = 0; n < N; n++) {
        Float* dh_n = dh + static_cast<size_t>(n) * C;  // [C]
        std::fill_n(dh_n, C, static_cast<Float>(0));
        for (int k = 0; k < K; k++) {
            const int s = st.assignment_slot[static_cast<size_t>(n) * K + k];
            if (s < 0) continue;
            const Float* dx_s = dx_.data() + (size_t)s * C;  // [C]
            for (int c = 0; c < C; c++) dh_n[c] += dx_s[c];
        }
    }
}

template class LocalMoeExecutor<float>;
template class LocalMoeExecutor<double>;

}  // namespace prophet
