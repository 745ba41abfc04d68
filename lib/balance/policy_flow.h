// policy_flow.h: the `flow` policy: replica counts and places from the planning load, per-batch routing by the
// routing LP (flow_routing.h), a change only when it pays for itself, and a choice of what load to plan for.
//
// Per layer, from planning counts P [D*E] (the previous batch's counts, or their forecast: load_forecast.h):
//   candidates  R = 0, 1, 2, 3, 4, 6, 8, 12, ... extra copies (EPLB's rule: each to the expert with the largest
//               load / copies), in the families below, all scored by the cost model under the run's routing rule
//               (the routing LP's combinatorial stand-in, flow_split.h, when that rule is flow; FlowScoring):
//               anchored  owners stay where they are; each extra copy goes to a device without the expert and
//                         with replica room: the lightest by estimated load (load / copies of what it holds),
//                         ties to the owner's NVLink domain, then its node (a replica there is cheaper to send),
//                         or ("local") the device sending the expert the most tokens (its tokens stay local);
//               repacked  EPLB's packing of every copy (largest first to the lightest bin, no duplicates), bins
//                         relabelled to devices by the assignment of fewest weight moves (relabel.h).
//               The search over R stops after two rises in a row.
//               hot-set   (topology-aware models only) the h hottest experts held in every node / NVLink domain,
//                         their tokens computed inside the group, owners spread under a star broadcast
//                         (flow_hotset.h); h walked in doublings.
//   chain trims           (chain broadcast, topology-aware) the best so far with copies taken off until no
//                         device forwards or receives more than busiest - 1, - 2, ... copies (flow_chain_trim.h):
//                         the chain's Trans is a step in the busiest device's copies.
//   extra copies          after the families and the trims (balance.flow_extra_copy_rounds rounds, default 8):
//                         one more copy of an expert that has copies, on its heaviest sending non-holder or the
//                         least loaded one, the best of a few tries per round kept while it lowers the predicted
//                         time (copies EPLB's order never reaches: for the all-to-all they save, or on another
//                         device). Transfer-aware scoring only.
//   transfer    under the cost model a replica (or an owner away from its home) is Trans + Agg every iteration, so
//               the candidate with the least predicted time already weighs each copy's gain against its
//               transfer (R = 0 is a candidate). With balance.flow_horizon = H > 0 (serving: a move is one-off)
//               the planner keeps the current placement unless the gain over H batches exceeds the one-off
//               transfer of the weights it adds. An owner move (repacked only) adds price_owner_moves (weights and
//               AdamW state, moves.h) / max(1, H) to the candidate's time: the columns charge it in the iteration
//               it happens, so without a horizon one iteration's gain must pay for it.
//   ablation    balance.flow_transfer_aware = false scores candidates without Trans/Agg or owner moves (and skips
//               the gate);
//               balance.flow_topology = false plans on the flat cost model with no nearness tie-breaks (anchored
//               copies and the split's token sources). Both default to true.
#pragma once

#include <cstdint>
#include <vector>

#include "balance/cost_model.h"
#include "balance/flow_split.h"
#include "balance/policies.h"

namespace prophet {

struct FlowPlanReport {
    int candidates = 0;         // placements scored
    int replicas = 0;           // extra copies of the chosen one
    bool repacked = false;      // the chosen one came from the repacked family
    int hot_experts = 0;        // > 0: the chosen one came from the hot-set family (flow_hotset.h), with h = this
    int chain_trim = 0;         // > 0: the chosen one is (or grew from) a chain trim to this many copies per device
                                // (flow_chain_trim.h)
    bool kept_current = false;  // the transfer gate kept the current placement
    double predicted_s = 0;     // its predicted layer time on the planning counts, with its owner-move charge
};

// How candidates are scored under balance.route_to = "flow" or "max_flow": kFastSplit with the combinatorial split of
// flow_split.h (the planner's default: one max-flow per candidate), kRoutingLp with the routing LP itself (the
// slow reference the tests compare the choice against). Other routing rules score with their own routing.
enum class FlowScoring { kFastSplit, kRoutingLp };

// Buffers a caller that plans again and again keeps between plans (one per planning thread in the policy
// registry): the candidates' split. Its contents do not carry over: each plan starts it afresh
// (FastSplitter::reset). Not for two threads at once.
struct FlowScratch {
    FastSplitter splitter;
};

// One plan from planning counts P [D*E]; `current` is where the weights are now (owners and replicas). scratch:
// buffers to reuse (nullptr: the plan's own).
Placement plan_flow(const int64_t* planning_counts, int num_devices, int num_experts, const CostModel& cost,
                    const BalanceOptions& options, const Placement& current, FlowPlanReport* report = nullptr,
                    FlowScoring scoring = FlowScoring::kFastSplit, FlowScratch* scratch = nullptr);

}  // namespace prophet
