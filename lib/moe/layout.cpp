// layout.cpp: layout counts, the counts exchange (notify) and the dispatch layout (see layout.h).
#include "moe/layout.h"

#include <string>

#include "comm/comm.h"
#include "core/error.h"

namespace prophet {

void moe_layout_count(int N, int K, int E, const int* expert_idx, int64_t* num_tokens_per_expert) {
    for (int e = 0; e < E; e++) num_tokens_per_expert[e] = 0;
    for (int64_t a = 0; a < (int64_t)N * K; a++) {
        const int e = expert_idx[a];
        PROPHET_ASSERT_MSG(e >= -1 && e < E, "expert index " + std::to_string(e) + " out of range");
        if (e >= 0) num_tokens_per_expert[e]++;
    }
}

void moe_notify(Communicator* comm, int E, const int64_t* num_tokens_per_expert, int64_t* counts) {
    comm->all_gather(num_tokens_per_expert, sizeof(int64_t) * (size_t)E, counts);
}

namespace {

// The send side of the layout: slots by destination, then expert, then (token, k). my_counts [E], destination
// [D,E], expert_idx [N*K].
void layout_send_side(MoeDispatchLayout& lo, int rank, const int* expert_idx, const int64_t* my_counts,
                      const int* destination) {
    const int D = lo.num_ranks, E = lo.num_experts, N = lo.num_tokens, K = lo.top_k;
    lo.send_rows.assign(D, 0);
    for (int e = 0; e < E; e++) lo.send_rows[destination[(size_t)rank * E + e]] += my_counts[e];
    lo.send_offsets.assign(D + 1, 0);
    for (int d = 0; d < D; d++) lo.send_offsets[d + 1] = lo.send_offsets[d] + lo.send_rows[d];
    lo.num_send_rows = lo.send_offsets[D];
    std::vector<int64_t> fill(E);  // [E] next free slot of expert e
    {
        std::vector<int64_t> next(lo.send_offsets.begin(), lo.send_offsets.end() - 1);  // [D]
        for (int e = 0; e < E; e++) {
            const int d = destination[(size_t)rank * E + e];
            fill[e] = next[d];
            next[d] += my_counts[e];
        }
    }
    std::vector<int64_t> end(E);  // [E] one past expert e's last slot, to check counts against expert_idx
    for (int e = 0; e < E; e++) end[e] = fill[e] + my_counts[e];
    lo.assignment_slot.assign((size_t)N * K, -1);
    lo.slot_token.assign((size_t)lo.num_send_rows, 0);
    for (int64_t a = 0; a < (int64_t)N * K; a++) {
        const int e = expert_idx[a];
        PROPHET_ASSERT_MSG(e >= -1 && e < E, "expert index " + std::to_string(e) + " out of range");
        if (e < 0) continue;
        PROPHET_ASSERT_MSG(fill[e] < end[e], "expert_idx has more assignments than this rank's row of counts");
        const int64_t s = fill[e]++;
        lo.assignment_slot[a] = (int)s;
        lo.slot_token[s] = (int)(a / K);
    }
    for (int e = 0; e < E; e++)
        PROPHET_ASSERT_MSG(fill[e] == end[e], "expert_idx has fewer assignments than this rank's row of counts");
}

// The receive side: recv rows by source, then expert; sorted rows by expert, then source. counts [D,E],
// destination [D,E].
void layout_recv_side(MoeDispatchLayout& lo, int rank, const int64_t* counts, const int* destination) {
    const int D = lo.num_ranks, E = lo.num_experts;
    lo.recv_rows.assign(D, 0);
    lo.expert_offsets.assign(E + 1, 0);
    for (int src = 0; src < D; src++)
        for (int e = 0; e < E; e++)
            if (destination[(size_t)src * E + e] == rank) {
                lo.recv_rows[src] += counts[(size_t)src * E + e];
                lo.expert_offsets[e + 1] += counts[(size_t)src * E + e];
            }
    lo.recv_offsets.assign(D + 1, 0);
    for (int d = 0; d < D; d++) lo.recv_offsets[d + 1] = lo.recv_offsets[d] + lo.recv_rows[d];
    for (int e = 0; e < E; e++) lo.expert_offsets[e + 1] += lo.expert_offsets[e];
    lo.num_recv_rows = lo.recv_offsets[D];
    PROPHET_ASSERT(lo.expert_offsets[E] == lo.num_recv_rows);
    std::vector<int64_t> sorted_next(lo.expert_offsets.begin(), lo.expert_offsets.end() - 1);  // [E]
    std::vector<int64_t> recv_next(lo.recv_offsets.begin(), lo.recv_offsets.end() - 1);       // [D]
    lo.segments.clear();
    // sorted order is expert-major, so walk experts outside and sources inside to hand out sorted rows, then put
    // the segments in recv order
    std::vector<MoeRecvSegment> by_src_expert((size_t)D * E);  // [D*E] rows = 0 where src does not send e here
    for (int e = 0; e < E; e++)
        for (int src = 0; src < D; src++) {
            const int64_t rows = counts[(size_t)src * E + e];
            if (destination[(size_t)src * E + e] != rank || rows == 0) continue;
            MoeRecvSegment& seg = by_src_expert[(size_t)src * E + e];
            seg.src = src;
            seg.expert = e;
            seg.rows = rows;
            seg.sorted_begin = sorted_next[e];
            sorted_next[e] += rows;
        }
    for (int src = 0; src < D; src++)
        for (int e = 0; e < E; e++) {
            MoeRecvSegment& seg = by_src_expert[(size_t)src * E + e];
            if (seg.rows == 0) continue;
            seg.recv_begin = recv_next[src];
            recv_next[src] += seg.rows;
            lo.segments.push_back(seg);
        }
}

}  // namespace

void moe_layout_build(int rank, int D, int E, int N, int K, const int* expert_idx, const int64_t* counts,
                      const int* destination, MoeDispatchLayout* layout) {
    PROPHET_ASSERT(rank >= 0 && rank < D && E > 0 && K > 0 && N >= 0);
    MoeDispatchLayout& lo = *layout;
    lo.num_ranks = D;
    lo.rank = rank;
    lo.num_experts = E;
    lo.num_tokens = N;
    lo.top_k = K;
    const int64_t* my_counts = counts + static_cast<size_t>(rank) * E;  // [E]
    for (int e = 0; e < E; e++) {
        const int d = destination[static_cast<size_t>(rank) * E + e];
        PROPHET_ASSERT_MSG(d >= 0 && d < D, "routing destination out of range");
    }
    layout_send_side(lo, rank, expert_idx, my_counts, destination);
    layout_recv_side(lo, rank, counts, destination);
}

}  // namespace prophet
