// placement.h: where each expert of one MoE layer lives, and where every token is computed.
//
// A placement names, per expert e, its owner (the device that keeps e's parameters and optimizer state and
// computes the tokens of every device that does not hold e) and its replica holders (devices that receive
// e's parameters by Trans before the layer, compute their own tokens for e locally, and send e's gradient
// back to the owner by Agg). The owner is never listed as a replica holder.
//
// Routing rule (routing_destination): a device holding e (owner or replica) computes its own tokens for e;
// every other device sends its tokens for e to the owner (RouteRule::kOwner, Pro-Prophet's and FasterMoE's
// rule) or to the holder with the fewest tokens computed so far (RouteRule::kLeastLoaded).
// RouteRule::kEvenSplit (DeepSeek EPLB's and the serving systems' rule): every device, holder or not, splits its
// tokens for e evenly over e's holders (owner and replicas; the remainder of an integer split goes round-robin,
// starting at a holder that depends on the source), so each holder of e computes about load(e) / holders(e).
// RouteRule::kFlow (flow_routing.h): the per-batch split of every group over e's holders that minimises the
// layer's modelled compute + all-to-all time (an LP on the batch's counts). RouteRule::kMaxFlow
// (route_max_flow.h): the same per-batch split without the LP: max-flow splits at a few compute levels, the one
// with the least of the LP's objective kept (cheaper where the LP is large). The MoE executor runs every rule:
// route_split.h gives each group's whole-token parts per holder, the integers compute_flow models.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace prophet {

struct CostModel;        // cost_model.h (kFlow's prices)
struct FlowRouteReport;  // flow_routing.h (kFlow's solve)

struct Placement {
    int num_devices = 0;               // D
    int num_experts = 0;               // E
    std::vector<int> owner;            // [E] device index
    std::vector<uint8_t> replica;      // [E*D] replica[e*D + d] = 1 if d holds a replica of e (d != owner[e])

    // contiguous layout: expert e on device e / (E/D) (DeepSpeed-MoE / Megatron); requires E % D == 0
    static Placement make_static(int num_devices, int num_experts);
    // owners only, no replicas
    static Placement make_owners(int num_devices, const std::vector<int>& owner);

    bool holds(int expert, int device) const {
        return owner[expert] == device || replica[static_cast<size_t>(expert) * num_devices + device] != 0;
    }
    // the static layout's device for e (E % D == 0): where e lives before any policy moves it; an owner elsewhere
    // received e's weights (and optimizer state) once (moves.h) and pays no Trans or Agg per step
    // (with E % D != 0, where static EP is undefined, the contiguous split rounded down, clamped to the last device)
    int home(int expert) const {
        const int per_device = num_experts >= num_devices ? num_experts / num_devices : 1;
        return std::min(expert / per_device, num_devices - 1);
    }
    // receivers of e's Trans (senders of its Agg) every step: its replica holders (an owner receives nothing)
    int transfer_receivers(int expert) const;
    void add_replica(int expert, int device);  // no-op for the owner; asserts range
    int num_replicas() const;                  // over all experts
    int num_replicas_of(int expert) const;
    std::vector<int> replicas_per_device() const;  // [D]
    std::vector<int> experts_per_device() const;   // [D] owned experts
};

enum class RouteRule { kOwner, kLeastLoaded, kEvenSplit, kFlow, kMaxFlow };
// The rules that solve each batch's split (kFlow, kMaxFlow): compute_flow fills LayerFlow::expert_device and its
// destination names the owner; the executor solves on one rank and broadcasts the parts.
inline bool solves_split_per_batch(RouteRule rule) { return rule == RouteRule::kFlow || rule == RouteRule::kMaxFlow; }
// kEvenSplit's tokens for holder j (0-based: the owner, then the replicas by device) of a group of n tokens from
// device src over r holders: n / r each, the n % r left over one each to the holders from index src % r on.
inline int64_t even_split_share(int64_t n, int64_t r, int src, int64_t j) {
    const int64_t rank = (j - src % r + r) % r;
    return n / r + (rank < n % r ? 1 : 0);
}
// "owner" | "least_loaded" | "even_split" | "flow" | "max_flow"
RouteRule parse_route_rule(const std::string& name);
const char* route_rule_name(RouteRule rule);
// The rule each policy's own paper uses (its registry row, policy_registry.cpp): even split for eplb (DeepSeek
// EPLB), the routing LP for flow, the owner rule for every other (Pro-Prophet, FasterMoE, the top-n broadcast,
// MoETuner and static EP compute a device's own tokens locally). Unknown names: the owner rule.
RouteRule paper_route_rule(const std::string& policy);

// Host-aware restriction: removes every replica of e on a device whose group (host) differs from its owner's.
// group_of_device: [D]. Owners never move, so the result is still a valid placement of the same experts.
void keep_replicas_within_groups(Placement& placement, const std::vector<int>& group_of_device);

// Invariant check used by tests and by every policy's caller: owners in range, replica flags only on
// non-owners, at most max_replicas_per_device replicas per device (0 = no cap). Returns "" or the problem.
std::string check_placement(const Placement& placement, int max_replicas_per_device);

// destination[src*E + e]: the device that computes the tokens src routes to e.  counts: [D*E]. Under
// kEvenSplit, kFlow and kMaxFlow the tokens go to several holders; destination then names the owner (compute_flow's
// route is exact).
std::vector<int> routing_destination(const int64_t* counts, const Placement& placement, RouteRule rule);

// Per-device token flow of one MoE layer under a placement (one direction; dispatch and combine are mirror
// images, and backward repeats both).
struct LayerFlow {
    int num_devices = 0;
    int num_experts = 0;
    std::vector<int> destination;     // [D*E] see routing_destination (split rules: the owner; route is exact)
    std::vector<int64_t> computed;    // [D] H_i: tokens (token-expert assignments) computed on device i
    std::vector<int64_t> received;    // [D] R_i: tokens device i receives from other devices
    std::vector<int64_t> sent;        // [D] tokens device i sends to other devices
    std::vector<int64_t> route;       // [D*D] route[src*D + dst] tokens src sends to dst (diagonal: local)
    std::vector<int> replica_holders; // [E] replica holders per expert (receivers of Trans, senders of Agg)
    int64_t total_tokens = 0;         // sum of counts
    std::vector<int64_t> expert_device;  // [E*D] kFlow, kMaxFlow: tokens of expert e computed on device d (else empty)
};
// pricing: kFlow's and kMaxFlow's prices (flow_routing.h route_pricing; nullptr: one unit per token computed or
// received);
// report: kFlow's routing report (flow_route_layer's; untouched under the other rules)
LayerFlow compute_flow(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                       RouteRule rule, const CostModel* pricing = nullptr, FlowRouteReport* report = nullptr);

}  // namespace prophet
