// balance_fixtures.h: small cost models and random count matrices shared by the balance tests.
#pragma once

#include <cmath>
#include <vector>

#include "balance/cost_model.h"
#include "core/rng.h"

namespace prophet::testing {

// A cost model whose terms are easy to hand-compute: 1 byte per token, 2 bytes per expert, 4 FLOP per token,
// compute 4 FLOP/s (FEC = max H seconds), all bandwidths 1 byte/s (A2A = max R seconds), FNEC 1 s, BNEC 2 s.
inline CostModel unit_cost_model(int num_devices) {
    CostModel m;
    m.cluster.name = "unit";
    m.cluster.num_devices = num_devices;
    m.cluster.devices_per_node = num_devices;
    m.cluster.compute_flops = 4.0;
    m.cluster.a2a_bandwidth = {{INFINITY, 1.0}};
    m.cluster.trans_bytes_per_s = 1.0;
    m.cluster.agg_bytes_per_s = 1.0;
    m.cluster.intra_node_bytes_per_s = 1.0;
    m.cluster.inter_node_bytes_per_s = 1.0;
    m.cluster.fnec_s = 1.0;
    m.cluster.bnec_s = 2.0;
    m.model.d_model = 1;
    m.model.d_ffn = 1;
    m.model.seq_len = 1;
    m.model.bytes_per_elem = 1;
    m.model.tokens_per_device = 1;
    return m;
}

// The authors' constants (4xHPWNV) with MoE-GPT-M dimensions, scaled to `num_devices`.
inline CostModel paper_cost_model(int num_devices, int tokens_per_device) {
    CostModel m;
    m.cluster.name = "hpwnv-like";
    m.cluster.num_devices = num_devices;
    m.cluster.devices_per_node = num_devices % 4 == 0 ? 4 : num_devices;
    m.cluster.compute_flops = 8.925e12;
    m.cluster.a2a_bandwidth = {{128.0 * 1024, 6e9 / 8}, {256.0 * 1024, 16e9 / 8}, {1024.0 * 1024, 42e9 / 8},
                               {INFINITY, 100e9 / 8}};
    m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = 15e9 / 8;
    m.cluster.intra_node_bytes_per_s = 96e9 / 8;
    m.cluster.inter_node_bytes_per_s = 100e9 / 8;
    m.model.d_model = 1024;
    m.model.d_ffn = 2048;
    m.model.seq_len = 256;
    m.model.tokens_per_device = tokens_per_device;
    return m;
}

// Skewed counts: Zipf(s) popularity over experts (random permutation), per-device multiplicative noise.
inline std::vector<int64_t> skewed_counts(int D, int E, int tokens_per_device, double s, uint64_t seed) {
    Rng rng(seed);
    std::vector<int> perm(E);
    for (int e = 0; e < E; ++e) perm[e] = e;
    rng.shuffle(perm.data(), E);
    std::vector<int64_t> counts(static_cast<size_t>(D) * E, 0);
    for (int d = 0; d < D; ++d) {
        std::vector<double> w(E);
        double total = 0;
        for (int e = 0; e < E; ++e) total += w[perm[e]] = (0.5 + rng.uniform()) / std::pow(e + 1.0, s);
        for (int t = 0; t < tokens_per_device; ++t) {
            double u = rng.uniform() * total;
            int e = 0;
            while (e < E - 1 && (u -= w[e]) > 0) ++e;
            ++counts[static_cast<size_t>(d) * E + e];
        }
    }
    return counts;
}

}  // namespace prophet::testing
