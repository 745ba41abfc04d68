// route_max_flow.h: balance.route_to = "max_flow": flow's per-batch split of every (source device, expert) token
// group over the expert's holders without the routing LP (flow_routing.h), for clusters where the LP costs more
// than the layer it routes (at E = 256, D = 64, top-8 it took about 136 ms a layer, twice flow's predicted layer).
//
// One MoE layer, counts [D*E]: flow_split.h's max-flow split (the compute-optimal fractional shares, rounded to
// whole tokens, each holder taking its own device's tokens first and then the nearest sources'; the node-local
// start) at each compute level T*(1 + slack) of kMaxFlowLevels, and with the holder-local start at T* (above T* that
// start won 6 of the real trace's 18,000 layers in a trial of all ten); of these six splits the one with the least
// routing objective (route_objective: the LP's own 3 t_tok max H + 4 max Q, under the same prices,
// layer_route_pricing) is kept, the first of equals. The LP's optimum bounds it from below (tests), and
// where the all-to-all is free (a2a_weight 0) the level-0 split is the LP's optimum within one token per
// replicated expert a device holds. Deterministic: every rank computes the same split from the same counts.
// Work: 6 max-flow splits of flow_split.h and as many route_objective passes (O(D^2 x resources per pair)).
#pragma once

#include <cstdint>
#include <vector>

#include "balance/cost_model.h"
#include "balance/flow_routing.h"
#include "balance/placement.h"

namespace prophet {

// The compute levels tried (slack over the compute optimum T*): flow's planner tries the same ones for its hot-set
// candidates (policy_flow.cpp, CandidateScore::at_best_level).
inline constexpr double kMaxFlowLevels[] = {0.0, 0.05, 0.1, 0.2, 0.4};

struct MaxFlowRouteReport {
    double objective = 0;  // route_objective of the kept split (t_tok units)
    int splits_tried = 0;  // 0: nothing replicated (the owner rule, no split)
    // the kept split's parts: every replicated expert's groups with tokens; groups not listed follow the owner rule
    std::vector<SplitPart> parts;
};

// The kept split's flow (destination names the owner, as under kFlow; route and expert_device exact). cost: the
// prices and the cluster's link classes for the nearest-source order (nullptr: one unit per token, device order).
LayerFlow max_flow_route_layer(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                               const CostModel* cost, MaxFlowRouteReport* report = nullptr);

// The same under given prices (max_flow_route_layer's own or any other: a test's compute-only prices); cluster: the
// link classes of the nearest-source order (nullptr: device order).
LayerFlow max_flow_route_priced(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                                const RoutePricing& pricing, const ClusterSpec* cluster,
                                MaxFlowRouteReport* report = nullptr);

}  // namespace prophet
