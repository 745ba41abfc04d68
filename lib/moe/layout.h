// layout.h: the first two stages of an expert-parallel MoE layer, layout and notify, and the dispatch layout
// (DeepEP's "handle") that dispatch, combine and the whole backward reuse.
//
//   moe_layout_count     per-rank counts of the kept assignments per expert            [E]
//   moe_notify           all-gather of those counts: the global routing matrix        [D*E]
//   moe_layout_build     from the global matrix and the routing (balance/route_split.h: every (src, e) group's
//                        whole-token parts per holder, or one destination [D*E] per group), where each of this
//                        rank's assignments goes (send side) and how the rows it receives group by expert
//                        (receive side). No communication: both sides follow from the global matrix and the split.
//                        A group split over several holders hands its assignments, in (token, k) order, to its
//                        parts in ascending device order: the first part's rows to the lowest device, and so on.
//
// Row orders (every rank derives the same ones, so no index ever travels):
//   send buffer   [M_send, C]: by destination rank, then expert, then (token, k) -- "slot" s of this rank
//   recv buffer   [M_recv, C]: by source rank, then expert, then the source's (token, k) order
//   sorted buffer [M_recv, C]: by expert, then source rank, then the source's (token, k) order; expert e's rows
//                              are one contiguous block, so each expert is one GEMM
// Shape letters: D ranks, E experts, N this rank's tokens, K experts per token, C channels.
#pragma once

#include <cstdint>
#include <vector>

#include "balance/route_split.h"

namespace prophet {

class Communicator;

// A contiguous run of rows from one source rank for one expert, in the recv and in the sorted buffer.
struct MoeRecvSegment {
    int src = 0;               // source rank
    int expert = 0;            // expert index
    int64_t recv_begin = 0;    // first row in the recv buffer
    int64_t sorted_begin = 0;  // first row in the sorted buffer
    int64_t rows = 0;          // > 0
};

struct MoeDispatchLayout {
    int num_ranks = 0;    // D
    int rank = 0;         // this rank
    int num_experts = 0;  // E
    int num_tokens = 0;   // N, this rank's tokens
    int top_k = 0;        // K

    // ---- send side (this rank as the source of its tokens)
    int64_t num_send_rows = 0;             // M_send: kept assignments of this rank
    std::vector<int> assignment_slot;      // [N*K] send-buffer row of assignment n*K+k; -1 where dropped
    std::vector<int> slot_token;           // [M_send] token of each send row
    std::vector<int64_t> send_rows;        // [D] rows sent to each rank (the diagonal stays local)
    std::vector<int64_t> send_offsets;     // [D+1] first send row per destination rank

    // ---- receive side (this rank as the computing rank)
    int64_t num_recv_rows = 0;             // M_recv: rows this rank computes
    std::vector<int64_t> recv_rows;        // [D] rows received from each rank
    std::vector<int64_t> recv_offsets;     // [D+1] first recv row per source rank
    std::vector<int64_t> expert_offsets;   // [E+1] rows of expert e in the sorted buffer
    std::vector<MoeRecvSegment> segments;  // in recv-buffer order
};

// num_tokens_per_expert [E] (overwrite): kept assignments per expert; expert_idx [N*K], -1 = dropped.
void moe_layout_count(int N, int K, int E, const int* expert_idx, int64_t* num_tokens_per_expert);

// counts [D*E] (overwrite): counts[src*E + e] = rank src's num_tokens_per_expert[e]. One all_gather.
void moe_notify(Communicator* comm, int E, const int64_t* num_tokens_per_expert, int64_t* counts);

// layout (overwrite): rank, D, E, N, K; expert_idx [N*K]; counts [D*E] global (this rank's row must equal its
// own layout count); destination [D*E] from routing_destination(counts, placement, rule).
void moe_layout_build(int rank, int D, int E, int N, int K, const int* expert_idx, const int64_t* counts,
                      const int* destination, MoeDispatchLayout* layout);
// The same for a split routing: route from route_split(counts, placement, rule) (its groups must sum to counts).
void moe_layout_build_split(int rank, int D, int E, int N, int K, const int* expert_idx, const int64_t* counts,
                            const RouteSplit& route, MoeDispatchLayout* layout);

}  // namespace prophet
