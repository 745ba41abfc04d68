// moetuner_ilp2_search.h: MoETuner's ILP 2 instance (clusters of ILP 1 onto GPUs, the cluster-to-cluster traffic
// C between consecutive layers) and its heuristic search: three deterministic starts improved by local search
// on a lexicographic key. The exact solvers (chain DP, CBC) in moetuner_ilp2.cpp start from it. Internal to
// lib/balance.
#pragma once

#include <utility>
#include <vector>

#include "balance/moetuner_internal.h"

namespace prophet::moetuner_detail {

struct Ilp2Data {
    int L = 0, D = 0, E = 0;
    std::vector<int> size;     // [L*D] experts in cluster c of layer l
    std::vector<double> C;     // [(L-1)*D*D] tokens from cluster c1 (layer l) to cluster c2 (layer l+1)
    std::vector<double> link;  // [D*D] link cost, diagonal forced to 0
    bool has_traffic = false;  // some C * link > 0
    double target = 0;         // E*L/D experts per GPU over all layers (Eq 13)
    double memory_lb = 0;      // smallest possible max_g |mem_g - target| (rounding)

    double c_at(int l, int c1, int c2) const { return C[(static_cast<size_t>(l) * D + c1) * D + c2]; }
};

// clusters [L*E] (ILP 1's cluster of every expert per layer), transitions [L-1][E][E] (may be empty),
// link_cost [D*D] (s/byte, diagonal ignored)
Ilp2Data make_ilp2_data(const std::vector<int>& clusters, const std::vector<double>& transitions, int L, int D, int E,
                        const std::vector<double>& link_cost);

// lexicographic quality of an assignment
struct Ilp2Key {
    double memory_dev = 0;  // max_g |mem_g - target|
    double memory_sq = 0;   // sum_g (mem_g - target)^2
    double traffic = 0;     // sum_l u_l
    double total = 0;       // sum_l sum_{g1 != g2} link * traffic (tie-breaker for the bottleneck plateaus)
    bool operator<(const Ilp2Key& o) const {
        if (less_tol(memory_dev, o.memory_dev)) return true;
        if (less_tol(o.memory_dev, memory_dev)) return false;
        if (less_tol(memory_sq, o.memory_sq)) return true;
        if (less_tol(o.memory_sq, memory_sq)) return false;
        if (less_tol(traffic, o.traffic)) return true;
        if (less_tol(o.traffic, traffic)) return false;
        return less_tol(total, o.total);
    }
};

// gpu [L*D]: the GPU of cluster c of layer l (a permutation per layer)
// (u_l, total cross cost) of layer pair l; scratch is resized to D*D
std::pair<double, double> layer_pair_cost(const Ilp2Data& data, const std::vector<int>& gpu, int l,
                                          std::vector<double>& scratch);
std::vector<double> memory_of(const Ilp2Data& data, const std::vector<int>& gpu);  // [D] experts per GPU
void memory_key(const Ilp2Data& data, const std::vector<double>& mem, Ilp2Key& key);
Ilp2Key full_key(const Ilp2Data& data, const std::vector<int>& gpu);
// improves gpu in place (see moetuner_ilp2_search.cpp)
void local_search(const Ilp2Data& data, std::vector<int>& gpu, double max_seconds);
// identity, memory-LPT per layer, traffic greedy layer by layer
std::vector<std::vector<int>> heuristic_starts(const Ilp2Data& data);
// the best start after local search
std::vector<int> heuristic_assignment(const Ilp2Data& data, double max_seconds);

}  // namespace prophet::moetuner_detail
