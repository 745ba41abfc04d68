// token_path_exchange.h: the layer-to-layer token path (balance/token_path.h, MoETuner's dispatch) on the real
// ranks. The CPU model runs attention on each token's home rank, so its forward combines every token at home after
// each layer. When the policy's path is layer_to_layer, the serving loop then moves, for every layer boundary,
// what that path would move: one activation of C floats per (e1, e2) pair of a token's K x K choices, from the
// rank that computed e1 at layer l to the rank computing e2 at layer l+1, counted from the batch's real token
// paths, over the real communicator, timed. Bytes and times are real; the payload is not the model's (a rank
// would need the sequence's context to run layer l+1's attention on a token it did not start: ExFlow's
// context-coherent attention, not built here).
#pragma once

#include <cstdint>
#include <vector>

#include "balance/placement.h"
#include "comm/comm.h"

namespace prophet::serve {

// Calls fn(e1, e2) for every (a, b) pair of a token's K choices at layers l and l+1, over N tokens;
// dispatch_idx [L][N][K], -1 = dropped (skipped).
template <typename Fn>
void for_each_layer_pair(const int* dispatch_idx, int l, int N, int K, Fn fn) {
    const int* here = dispatch_idx + static_cast<size_t>(l) * N * K;  // [N,K]
    const int* next = here + static_cast<size_t>(N) * K;              // [N,K] of layer l+1
    for (int n = 0; n < N; ++n)
        for (int a = 0; a < K; ++a) {
            const int e1 = here[static_cast<size_t>(n) * K + a];
            if (e1 < 0) continue;
            for (int b = 0; b < K; ++b) {
                const int e2 = next[static_cast<size_t>(n) * K + b];
                if (e2 >= 0) fn(e1, e2);
            }
        }
}

// This rank's part of the boundary routes: [L-1][D][D] pairs src -> dst (diagonal: stays local).
// dispatch_idx [L][N][K] of the rank's N tokens (-1: dropped, skipped), home = this rank; counts [L][D][E] global
// (the routing rule's destinations); placements [L].
std::vector<int64_t> local_boundary_routes(const int* dispatch_idx, int N, int K, int home,
                                           const std::vector<int64_t>& counts,
                                           const std::vector<Placement>& placements, RouteRule rule);

struct TokenPathExchange {
    std::vector<int64_t> route;       // [L-1][D][D] global pairs src -> dst at each boundary
    std::vector<double> boundary_ms;  // [L-1] wall time of each boundary's all-to-all-v, max over ranks
    std::vector<int64_t> sent_bytes;  // [L-1] bytes that left their rank at each boundary, all ranks together
};

// Collective. d_model floats (4 bytes each) per pair.
TokenPathExchange exchange_layer_to_layer(Communicator& comm, const int* dispatch_idx, int N, int K,
                                          const std::vector<int64_t>& counts,
                                          const std::vector<Placement>& placements, RouteRule rule, int d_model);

}  // namespace prophet::serve
