// dispatch.cpp: dispatch and combine stages (see dispatch.h).
#include "moe/dispatch.h"

#include <algorithm>
#include <vector>

#include "comm/comm.h"
#include "core/error.h"

namespace prophet {

namespace {

// one all_to_all_v of float rows: send_rows/recv_rows [D] with prefix offsets [D+1]
void exchange_rows(Communicator* comm, int C, const float* send, const std::vector<int64_t>& send_rows,
                   const std::vector<int64_t>& send_offsets, float* recv, const std::vector<int64_t>& recv_rows,
                   const std::vector<int64_t>& recv_offsets) {
    const int D = (int)send_rows.size();
    PROPHET_ASSERT(comm->size() == D);
    const size_t row_bytes = sizeof(float) * (size_t)C;
    std::vector<size_t> send_bytes(D), send_off(D), recv_bytes(D), recv_off(D);  // [D] each
    for (int d = 0; d < D; d++) {
        send_bytes[d] = (size_t)send_rows[d] * row_bytes;
        send_off[d] = (size_t)send_offsets[d] * row_bytes;
        recv_bytes[d] = (size_t)recv_rows[d] * row_bytes;
        recv_off[d] = (size_t)recv_offsets[d] * row_bytes;
    }
    comm->all_to_all_v(send, send_bytes.data(), send_off.data(), recv, recv_bytes.data(), recv_off.data());
}

}  // namespace

void moe_dispatch_pack(const MoeDispatchLayout& lo, int C, const float* h, float* send) {
    for (int64_t s = 0; s < lo.num_send_rows; s++)
        std::copy_n(h + (size_t)lo.slot_token[s] * C, C, send + (size_t)s * C);
}

void moe_dispatch_exchange(Communicator* comm, const MoeDispatchLayout& lo, int C, const float* send, float* recv) {
    exchange_rows(comm, C, send, lo.send_rows, lo.send_offsets, recv, lo.recv_rows, lo.recv_offsets);
}

void moe_dispatch_sort(const MoeDispatchLayout& lo, int C, const float* recv, float* sorted) {
    for (const MoeRecvSegment& seg : lo.segments)
        std::copy_n(recv + (size_t)seg.recv_begin * C, (size_t)seg.rows * C, sorted + (size_t)seg.sorted_begin * C);
}

void moe_combine_unsort(const MoeDispatchLayout& lo, int C, const float* sorted, float* recv) {
    for (const MoeRecvSegment& seg : lo.segments)
        std::copy_n(sorted + (size_t)seg.sorted_begin * C, (size_t)seg.rows * C, recv + (size_t)seg.recv_begin * C);
}

void moe_combine_exchange(Communicator* comm, const MoeDispatchLayout& lo, int C, const float* recv, float* send) {
    exchange_rows(comm, C, recv, lo.recv_rows, lo.recv_offsets, send, lo.send_rows, lo.send_offsets);
}

void moe_combine_reduce(const MoeDispatchLayout& lo, int C, const float* gate_w, const float* rows, float* out) {
    const int N = lo.num_tokens, K = lo.top_k;
    for (int n = 0; n < N; n++) {
        float* out_n = out + (size_t)n * C;  // [C]
        std::fill_n(out_n, C, 0.0f);
        for (int k = 0; k < K; k++) {
            const int s = lo.assignment_slot[(size_t)n * K + k];
            if (s < 0) continue;
            const float w = gate_w[(size_t)n * K + k];
            const float* y_s = rows + (size_t)s * C;  // [C]
            for (int c = 0; c < C; c++) out_n[c] += w * y_s[c];
        }
    }
}

void moe_combine_reduce_backward(const MoeDispatchLayout& lo, int C, const float* gate_w, const float* dout,
                                 const float* rows, float* dgate_w, float* drows) {
    const int N = lo.num_tokens, K = lo.top_k;
    for (int n = 0; n < N; n++) {
        const float* dout_n = dout + (size_t)n * C;  // [C]
        for (int k = 0; k < K; k++) {
            const size_t a = (size_t)n * K + k;
            const int s = lo.assignment_slot[a];
            if (s < 0) {
                dgate_w[a] = 0.0f;
                continue;
            }
            const float* y_s = rows + (size_t)s * C;  // [C]
            float* dy_s = drows + (size_t)s * C;      // [C]
            const float w = gate_w[a];
            float dot = 0.0f;
            for (int c = 0; c < C; c++) {
                dot += dout_n[c] * y_s[c];
                dy_s[c] = w * dout_n[c];
            }
            dgate_w[a] = dot;
        }
    }
}

void moe_dispatch_pack_backward(const MoeDispatchLayout& lo, int C, const float* drows, float* dh) {
    const int N = lo.num_tokens, K = lo.top_k;
    for (int n = 0; n < N; n++) {
        float* dh_n = dh + (size_t)n * C;  // [C]
        std::fill_n(dh_n, C, 0.0f);
        for (int k = 0; k < K; k++) {
            const int s = lo.assignment_slot[(size_t)n * K + k];
            if (s < 0) continue;
            const float* dx_s = drows + (size_t)s * C;  // [C]
            for (int c = 0; c < C; c++) dh_n[c] += dx_s[c];
        }
    }
}

}  // namespace prophet
