// inference.h: forward-only (serving) time of MoE layers on a cluster file, per device, from the cost model's
// terms (docs/serving.md, "Simulated nodes"). The training simulator (simulator.h) times whole training
// iterations; serving needs the per-device times of the forward pass only, so its tails can be taken.
//
// For one layer with global counts [D][E] (each multiplied by token_scale) under a placement, with the token flow
// of compute_flow (H_i rows computed on device i, S_i rows sent, R_i rows received, route[src][dst]):
//   expert_s[i] = H_i * 4CF / t                                                        (Eq 2 on device i)
//   a2a_s[i]    = dispatch + combine = 2 * (bytes_i / B̄(bytes_i) + a2a latency), bytes_i = max(S_i, R_i) * C * b
//                 topology-aware: 2 * (max over i's links and directions of route bytes / link bandwidth + latency)
//                 token path layer_to_layer (balance/token_path.h, MoETuner's dispatch): the same per-device time of
//                 the all-to-all into the layer (layer 0: from home; l > 0: from layer l-1's expert devices) plus
//                 latency, and for the last layer also that of the return home
//   trans_s[i]  = replicas device i receives * 2CF * b / B_trans, charged only when the layer's placement differs
//                 from the previous batch's (a serving system keeps parameters that stay put)
// Units: seconds; C = d_model, F = d_ffn, b = bytes_per_elem, t = compute_flops.
#pragma once

#include <cstdint>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"
#include "balance/token_path.h"

namespace prophet::sim {

struct InferenceLayerTime {
    std::vector<double> expert_s;   // [D]
    std::vector<double> a2a_s;      // [D]
    std::vector<double> trans_s;    // [D]
    std::vector<int64_t> computed;  // [D] H_i after scaling
};

InferenceLayerTime simulate_inference_layer(const CostModel& cost, const int64_t* counts, const Placement& placement,
                                            RouteRule rule, double token_scale, bool charge_trans);

// Batches [I] of L layers: counts [I][L][D][E], placements [I][L]. The first batch's Trans is charged against
// `initial` ([L]; empty: against the static placement, where a serving system starts). path layer_to_layer needs
// transitions [I][L-1][E][E] (scaled by token_scale like the counts).
std::vector<InferenceLayerTime> simulate_inference(const CostModel& cost, const std::vector<int64_t>& counts,
                                                   const std::vector<std::vector<Placement>>& placements,
                                                   RouteRule rule, double token_scale,
                                                   const std::vector<Placement>& initial = {},
                                                   TokenPath path = TokenPath::kHome,
                                                   const std::vector<int64_t>& transitions = {});

}  // namespace prophet::sim
