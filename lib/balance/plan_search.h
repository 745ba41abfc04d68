// plan_search.h: a slow, strong local search for a better placement of one MoE layer under a cost model: the
// gap probe of docs/bounds.md ("Where the gap comes from"). An analysis tool, not a policy: it scores candidates
// on the counts they are judged on (like an oracle), so what it finds is an upper bound on the best buildable
// plan, which splits a policy's gap to the lower bound (bounds.h) into the policy's part and the bound's.
//
// Owners stay where `start` has them; the search changes replicas only. Simulated annealing over three moves
// (add a replica of an expert to a device without it, remove a replica, move a replica to another device), each
// candidate scored by compute_flow under `route_rule` (the routing LP for kFlow) and predict_layer's Eq 6 or Eq 8
// (cost_eq). Temperature: start_s * initial_temperature, falling linearly to 0 over `iterations` proposals.
// Seeded (core/rng.h) and deterministic. The result is the best placement seen, never worse than `start`.
#pragma once

#include <cstdint>

#include "balance/cost_model.h"
#include "balance/placement.h"

namespace prophet {

struct PlanSearchOptions {
    int iterations = 2000;  // proposals
    uint64_t seed = 1;
    int cost_eq = 6;  // 6 or 8 (layer_cost)
    RouteRule route_rule = RouteRule::kFlow;
    int max_replicas_per_device = 0;    // 0: no cap (check_placement's rule)
    double initial_temperature = 0.02;  // fraction of the start's time an uphill step may cost at first
};

struct PlanSearchReport {
    double start_s = 0;  // the start's predicted layer time
    double best_s = 0;   // the returned placement's (<= start_s)
    int accepted = 0;    // proposals accepted (uphill included)
    int improved = 0;    // proposals that set a new best
};

// The layer time the search minimises: layer_cost(predict_layer(...compute_flow(counts, ..., route_rule)), cost_eq).
double search_layer_cost(const int64_t* counts, const Placement& placement, const CostModel& cost,
                         const PlanSearchOptions& options);

// counts [D*E] (D, E from start). Throws prophet::Error (exit 3) for cost_eq not 6 or 8 or iterations < 0.
Placement search_plan(const int64_t* counts, const CostModel& cost, const Placement& start,
                      const PlanSearchOptions& options, PlanSearchReport* report = nullptr);

}  // namespace prophet
