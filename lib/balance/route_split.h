// route_split.h: the routing rule of one MoE layer as whole-token parts, the form an executor follows: for every
// (source device, expert) token group, how many of its tokens each holder of the expert computes.
//
// The parts are the integers compute_flow (placement.h) models, rule by rule, so what plan and sim price and what
// `prophet train` executes are the same routing:
//   kOwner, kLeastLoaded  one part per group: routing_destination's device
//   kEvenSplit            every holder a part: even_split_share of the group (owner first, then replicas by device)
//   kFlow                 the routing LP's rounded split (flow_routing.h, FlowRouteReport::parts) for the
//                         replicated experts' groups, priced by `pricing` as compute_flow is; the owner rule for
//                         the rest
//   kMaxFlow              the max-flow split route_max_flow.h keeps (priced by `pricing` as compute_flow is) for the
//                         replicated experts' groups; the owner rule for the rest
// Shapes: D devices, E experts, counts [D*E] (counts[src*E + e] tokens src routes to e), P parts in all.
#pragma once

#include <cstdint>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"

namespace prophet {

struct FlowRouteReport;  // flow_routing.h

struct RouteSplit {
    int num_devices = 0;  // D
    int num_experts = 0;  // E
    // group g = src*E + e owns parts group_start[g] .. group_start[g+1]: devices ascending, every part > 0 tokens,
    // summing to counts[g] (a group with no tokens has no part)
    std::vector<int> group_start;      // [D*E + 1]
    std::vector<int> part_device;      // [P] the holder computing the part
    std::vector<int64_t> part_tokens;  // [P] tokens of the part

    int num_parts() const { return static_cast<int>(part_device.size()); }
    // tokens of group (src, expert) that `device` computes (0 when it has no part)
    int64_t tokens_to(int src, int expert, int device) const;
};

// The rule's split of one layer; pricing: kFlow's prices as in compute_flow (nullptr: one unit per token).
// lp_report (kFlow only, may be nullptr): the routing LP's report of this split's solve.
RouteSplit route_split(const int64_t* counts, const Placement& placement, RouteRule rule,
                       const CostModel* pricing = nullptr, FlowRouteReport* lp_report = nullptr);

// One part per group with tokens, on destination[src*E + e] (destination [D*E]).
RouteSplit route_split_from_destination(const int64_t* counts, int num_devices, int num_experts,
                                        const int* destination);

// The same split as compute_flow's LayerFlow (computed, received, sent, route, replica_holders, total_tokens,
// expert_device; destination names the owner): what the cost model and the trainer's load figure read.
LayerFlow flow_of_split(const int64_t* counts, const Placement& placement, const RouteSplit& split);

// Where a layer's tokens were computed, against its placement (token-expert assignments).
struct RoutingTally {
    int64_t to_owner = 0;          // computed by the expert's owner
    int64_t to_replicas = 0;       // computed by a replica holder (its own device's tokens included)
    int64_t sent_to_replicas = 0;  // of those, sent there from another device (only a split rule does that)
};
RoutingTally tally_routing(const RouteSplit& split, const Placement& placement);

}  // namespace prophet
