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

// The send side of the layout: slots by destination, then expert, then (token, k); a group's parts take its
// assignments in (token, k) order, devices ascending. my_counts [E], expert_idx [N*K].
void layout_send_side(MoeDispatchLayout& lo, int rank, const int* expert_idx, const int64_t* my_counts,
                      const RouteSplit& route) {
    const int D = lo.num_ranks, E = lo.num_experts, N = lo.num_tokens, K = lo.top_k;
    const int* group_start = route.group_start.data() + static_cast<size_t>(rank) * E;  // [E+1] this rank's groups
    const int first_part = group_start[0];
    lo.send_rows.assign(D, 0);
    for (int e = 0; e < E; e++) {
        int64_t group_rows = 0;
        for (int i = group_start[e]; i < group_start[e + 1]; i++) {
            lo.send_rows[route.part_device[i]] += route.part_tokens[i];
            group_rows += route.part_tokens[i];
        }
        PROPHET_ASSERT_MSG(group_rows == my_counts[e],
                           "the routing split of expert " + std::to_string(e) + " does not sum to this rank's count");
    }
    lo.send_offsets.assign(D + 1, 0);
    for (int d = 0; d < D; d++) lo.send_offsets[d + 1] = lo.send_offsets[d] + lo.send_rows[d];
    lo.num_send_rows = lo.send_offsets[D];
    // the first slot of each of this rank's parts: experts ascending within each destination's block
    std::vector<int64_t> part_slot(static_cast<size_t>(group_start[E] - first_part));  // [this rank's parts]
    {
        std::vector<int64_t> next(lo.send_offsets.begin(), lo.send_offsets.end() - 1);  // [D]
        for (int i = first_part; i < group_start[E]; i++) {
            part_slot[i - first_part] = next[route.part_device[i]];
            next[route.part_device[i]] += route.part_tokens[i];
        }
    }
    std::vector<int> part(group_start, group_start + E);  // [E] the part expert e's next assignment goes to
    std::vector<int64_t> used(E, 0);                      // [E] rows of that part already handed out
    lo.assignment_slot.assign(static_cast<size_t>(N) * K, -1);
    lo.slot_token.assign(static_cast<size_t>(lo.num_send_rows), 0);
    for (int64_t a = 0; a < static_cast<int64_t>(N) * K; a++) {
        const int e = expert_idx[a];
        PROPHET_ASSERT_MSG(e >= -1 && e < E, "expert index " + std::to_string(e) + " out of range");
        if (e < 0) continue;
        int& i = part[e];
        PROPHET_ASSERT_MSG(i < group_start[e + 1], "expert_idx has more assignments than this rank's row of counts");
        const int64_t s = part_slot[i - first_part] + used[e];
        lo.assignment_slot[a] = static_cast<int>(s);
        lo.slot_token[s] = static_cast<int>(a / K);
        if (++used[e] == route.part_tokens[i]) i++, used[e] = 0;
    }
    for (int e = 0; e < E; e++)
        PROPHET_ASSERT_MSG(part[e] == group_start[e + 1],
                           "expert_idx has fewer assignments than this rank's row of counts");
}

// The receive side: recv rows by source, then expert; sorted rows by expert, then source. counts [D,E].
void layout_recv_side(MoeDispatchLayout& lo, int rank, const int64_t* counts, const RouteSplit& route) {
    const int D = lo.num_ranks, E = lo.num_experts;
    std::vector<int64_t> here(static_cast<size_t>(D) * E);  // [D*E] rows of group (src, e) this rank computes
    for (int src = 0; src < D; src++)
        for (int e = 0; e < E; e++) {
            here[static_cast<size_t>(src) * E + e] = route.tokens_to(src, e, rank);
            PROPHET_ASSERT(here[static_cast<size_t>(src) * E + e] <= counts[static_cast<size_t>(src) * E + e]);
        }
    lo.recv_rows.assign(D, 0);
    lo.expert_offsets.assign(E + 1, 0);
    for (int src = 0; src < D; src++)
        for (int e = 0; e < E; e++) {
            lo.recv_rows[src] += here[static_cast<size_t>(src) * E + e];
            lo.expert_offsets[e + 1] += here[static_cast<size_t>(src) * E + e];
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
    std::vector<MoeRecvSegment> by_src_expert(static_cast<size_t>(D) * E);  // [D*E] rows = 0: nothing from src
    for (int e = 0; e < E; e++)
        for (int src = 0; src < D; src++) {
            const int64_t rows = here[static_cast<size_t>(src) * E + e];
            if (rows == 0) continue;
            MoeRecvSegment& seg = by_src_expert[static_cast<size_t>(src) * E + e];
            seg.src = src;
            seg.expert = e;
            seg.rows = rows;
            seg.sorted_begin = sorted_next[e];
            sorted_next[e] += rows;
        }
    for (int src = 0; src < D; src++)
        for (int e = 0; e < E; e++) {
            MoeRecvSegment& seg = by_src_expert[static_cast<size_t>(src) * E + e];
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
    moe_layout_build_split(rank, D, E, N, K, expert_idx, counts,
                           route_split_from_destination(counts, D, E, destination), layout);
}

void moe_layout_build_split(int rank, int D, int E, int N, int K, const int* expert_idx, const int64_t* counts,
                            const RouteSplit& route, MoeDispatchLayout* layout) {
    PROPHET_ASSERT(rank >= 0 && rank < D && E > 0 && K > 0 && N >= 0);
    PROPHET_ASSERT_MSG(
        route.num_devices == D && route.num_experts == E && route.group_start.size() == static_cast<size_t>(D) * E + 1,
        "the routing split is not of this layer's shape");
    MoeDispatchLayout& lo = *layout;
    lo.num_ranks = D;
    lo.rank = rank;
    lo.num_experts = E;
    lo.num_tokens = N;
    lo.top_k = K;
    layout_send_side(lo, rank, expert_idx, counts + static_cast<size_t>(rank) * E, route);
    layout_recv_side(lo, rank, counts, route);
}

}  // namespace prophet
