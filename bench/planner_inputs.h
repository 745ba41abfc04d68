// planner_inputs.h: the fixed inputs of the planner benchmarks (bench_planner, planner_instructions): Zipf(1.2)
// counts over experts (2048 routed tokens per device, a fixed seed) and a 100 Gbit/s cluster of 4-device nodes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "balance/cost_model.h"
#include "core/rng.h"

namespace prophet::bench {

// assignments: token-expert assignments per device (tokens x top-k). draw_seed != 0: the experts' ranks from seed,
// the tokens drawn with draw_seed (another batch of the same distribution)
inline std::vector<int64_t> zipf_counts(int D, int E, uint64_t seed, int assignments = 2048, uint64_t draw_seed = 0) {
    Rng rng(seed);
    std::vector<double> weight(E);
    std::vector<int> perm(E);
    for (int e = 0; e < E; ++e) perm[e] = e;
    rng.shuffle(perm.data(), E);
    if (draw_seed != 0) rng = Rng(draw_seed);
    double total = 0;
    for (int e = 0; e < E; ++e) total += weight[perm[e]] = 1.0 / std::pow(e + 1.0, 1.2);
    std::vector<double> cdf(E);
    double acc = 0;
    for (int e = 0; e < E; ++e) cdf[e] = (acc += weight[e] / total);
    std::vector<int64_t> counts(static_cast<size_t>(D) * E, 0);
    for (int d = 0; d < D; ++d)
        for (int t = 0; t < assignments; ++t) {
            const double u = rng.uniform();
            int e = 0;
            while (e < E - 1 && cdf[e] < u) ++e;
            ++counts[static_cast<size_t>(d) * E + e];
        }
    return counts;
}

// The next batch after `counts` [D*E]: zipf_counts(D, E, seed, assignments, draw_seed), its cells made zero where
// counts' are and at least one token where counts' are not (each device's surplus or deficit taken from or given
// to its largest cell), so that a routing LP over it has the structure of counts' (flow_routing.h) and warm-starts
// from that basis instead of reusing that optimum.
inline std::vector<int64_t> next_batch(const std::vector<int64_t>& counts, int D, int E, uint64_t seed, int assignments,
                                       uint64_t draw_seed) {
    std::vector<int64_t> next = zipf_counts(D, E, seed, assignments, draw_seed);
    for (int d = 0; d < D; ++d) {
        int64_t* row = next.data() + static_cast<size_t>(d) * E;
        const int64_t* was = counts.data() + static_cast<size_t>(d) * E;
        int64_t change = 0, *largest = row;
        for (int e = 0; e < E; ++e) {
            const int64_t fixed = was[e] == 0 ? 0 : std::max<int64_t>(row[e], 1);
            change += fixed - row[e];
            row[e] = fixed;
            if (row[e] > *largest) largest = row + e;
        }
        *largest -= change;  // the row keeps `assignments` tokens (the largest cell holds far more than the change)
    }
    return next;
}

inline CostModel cost_for(int D) {
    CostModel m;
    m.cluster.name = "bench";
    m.cluster.num_devices = D;
    m.cluster.devices_per_node = 4;
    m.cluster.compute_flops = 8.9e12;
    m.cluster.a2a_bandwidth = {{128.0 * 1024, 6e9 / 8}, {256.0 * 1024, 16e9 / 8}, {1024.0 * 1024, 42e9 / 8},
                               {INFINITY, 100e9 / 8}};
    m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = 15e9 / 8;
    m.cluster.intra_node_bytes_per_s = m.cluster.inter_node_bytes_per_s = 100e9 / 8;
    m.model.d_model = 1024;
    m.model.d_ffn = 2048;
    m.model.seq_len = 256;
    m.model.tokens_per_device = 1024;
    return m;
}

}  // namespace prophet::bench
