// flow_routing.h: balance.route_to = "flow": the per-batch split of every (source device, expert) token group
// over the expert's holders that minimises the layer's modelled time, for the batch's own counts (LPLB's
// per-batch LP, extended with the all-to-all).
//
// The problem, one MoE layer, counts c[s][e] (tokens device s routes to expert e), holders G(e) (owner and
// replicas). x[s][e][g] >= 0 tokens of group (s, e) computed on holder g, sum_g x[s][e][g] = c[s][e]. Experts
// with one holder have no choice (x = c on the owner); only replicated experts' groups are variables.
//   H_g  = sum_{s,e} x[s][e][g]                                  tokens computed on g (Eq 2's H)
//   Q_k  = token_bytes * sum_{(s,g) on resource k, s != g} x / rate_k   seconds resource k is busy
//   minimise  3 * t_tok * max_g H_g + 4 * max_k Q_k               (Eq 6/8's 3 T_FEC + 4 T_A2A)
// t_tok = FEC seconds per token. Resources k (RoutePricing): without the topology model, each device's
// received bytes at the all-to-all bandwidth of the owner rule's largest message (Eq 1); with it, the queues of
// topology.h a byte passes (NVLink / host port out and in, GPU injection / ejection, NIC out and in). Pair links
// are left out of the LP (on every shipped cluster a pair is no faster than the port it leaves through, so the
// port bounds it); the score (predict_layer) still times them. Trans / Agg do not depend on the split.
// The LP (COIN-OR CLP, warm-started from the last basis of the same structure this thread solved, kept per
// structure in an lp::BasisCache: `prophet plan` routes a trace's layers once per column, so the same layer's LP
// recurs hundreds of solves later; the very same LP again, as when two columns score one placement on one batch,
// returns the optimum stored beside that basis, lp::solve_lp_cached) is solved in units of t_tok;
// each group's fractional split is rounded by largest remainder, so every group's integers sum to its count
// (experts sharing a holder set share a group: RoutingLpForm below).
#pragma once

#include <cstdint>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"

namespace prophet {

// The linear prices of one layer's routing problem (see above), in units of t_tok (FEC seconds per token).
struct RoutePricing {
    int num_devices = 0;
    double compute_weight = 3.0;  // objective weight of max_g H_g (3 T_FEC)
    double a2a_weight = 4.0;      // objective weight of max_k Q_k (4 T_A2A)
    int num_resources = 0;
    // for each ordered pair (s, g), s != g: the resources a token from s to g loads and by how much
    // (t_tok units per token); pair_start[s*D + g] .. pair_start[s*D + g + 1] index pair_resource / pair_cost
    std::vector<int> pair_start;
    std::vector<int> pair_resource;
    std::vector<double> pair_cost;
};

// From a cost model: the topology's queues or Eq 1's received bytes (largest_message_bytes picks Eq 1's
// bandwidth step). Without a cost model (nullptr): every device's received tokens, one unit per token.
RoutePricing route_pricing(const CostModel* cost, int num_devices, double largest_message_bytes);

// The prices flow_route_layer solves one layer under: route_pricing with the owner rule's largest received message
// (Eq 1's bandwidth step; read only without the topology model).
RoutePricing layer_route_pricing(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                                 const CostModel* cost);

// One token group's part: `tokens` of (src, expert) computed on dst.
struct SplitPart {
    int src = 0, expert = 0, dst = 0;
    int64_t tokens = 0;
};

// The layer's flow when every (src, e) group follows `parts` where it has any and the owner rule otherwise
// (a holder computes its own tokens, others send to the owner). Fills LayerFlow::expert_device.
// Asserts that the parts of a group sum to its count and name holders only.
LayerFlow flow_from_parts(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                          const std::vector<SplitPart>& parts);

// The objective above for any flow (t_tok units).
double route_objective(const RoutePricing& pricing, const LayerFlow& flow);

struct FlowRouteReport {
    double lp_objective = 0;       // the LP optimum (a lower bound on every integer split's objective)
    double rounded_objective = 0;  // route_objective of the returned integer split
    int lp_columns = 0;            // split variables (0: nothing replicated, no LP)
    bool warm_started = false;
    bool reused = false;    // the same LP's stored optimum, no solve (lp::solve_lp_cached)
    double lp_solve_s = 0;  // the LP's solve (lp::LpResult::solve_s: when reused, the stored optimum's own solve)
    // the integer split of every replicated expert's groups with tokens, group by group (holders ascending; parts
    // of 0 tokens included); groups not listed follow the owner rule. The executor runs these (route_split.h).
    std::vector<SplitPart> parts;
};

// Forgets the routing LPs this thread solved (their bases and optima): the LPs after it start cold, so what they
// return does not depend on what the thread solved before (an LP with several optima returns the one its start
// leads to). plan::evaluate_models calls it before each policy.
void forget_routing_lps();

// Seconds routing one batch costs where it runs, from a call that took call_s: that, plus the stored solve's own
// seconds when the call reused the LP's optimum (no solve ran in it). An evaluation that routes a batch a second time
// (another column over the same placement) reuses the first optimum; the batch's routing still costs the solve.
inline double routing_seconds(double call_s, const FlowRouteReport& report) {
    return call_s + (report.reused ? report.lp_solve_s : 0.0);
}

// The optimal split of the layer (flow.destination names the owner, as under even_split; route is exact).
LayerFlow flow_route_layer(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                           const CostModel* cost, FlowRouteReport* report = nullptr);

// How the LP is written. kMergedHolderSets (flow_route_layer's): experts with the same holder set share one
// group per source, whose class total is split over the holders and then handed to the experts in turn (the
// same optimum, far fewer columns where copies are many: full replication has D groups, not D * E).
// kPerGroup: one group per (source, expert), the LP as written above (the merged form's oracle in tests).
enum class RoutingLpForm { kMergedHolderSets, kPerGroup };

// The same LP under given prices (flow_route_layer's own or any other: a test's compute-only prices).
LayerFlow flow_route_priced(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                            const RoutePricing& pricing, FlowRouteReport* report = nullptr,
                            RoutingLpForm form = RoutingLpForm::kMergedHolderSets);

}  // namespace prophet
