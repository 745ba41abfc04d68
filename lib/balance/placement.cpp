#include "balance/placement.h"

#include <limits>

#include "balance/flow_routing.h"
#include "balance/route_max_flow.h"
#include "core/enum_table.h"
#include "core/error.h"

namespace prophet {

Placement Placement::make_static(int num_devices, int num_experts) {
    PROPHET_ASSERT(num_devices > 0 && num_experts > 0 && num_experts % num_devices == 0);
    std::vector<int> owner(num_experts);
    const int experts_per_device = num_experts / num_devices;
    for (int e = 0; e < num_experts; ++e) owner[e] = e / experts_per_device;
    return make_owners(num_devices, owner);
}

Placement Placement::make_owners(int num_devices, const std::vector<int>& owner) {
    Placement p;
    p.num_devices = num_devices;
    p.num_experts = static_cast<int>(owner.size());
    p.owner = owner;
    p.replica.assign(owner.size() * static_cast<size_t>(num_devices), 0);
    for (int d : owner) PROPHET_ASSERT(d >= 0 && d < num_devices);
    return p;
}

void Placement::add_replica(int expert, int device) {
    PROPHET_ASSERT(expert >= 0 && expert < num_experts && device >= 0 && device < num_devices);
    if (owner[expert] != device) replica[static_cast<size_t>(expert) * num_devices + device] = 1;
}

int Placement::num_replicas() const {
    int n = 0;
    for (uint8_t r : replica) n += r;
    return n;
}

int Placement::transfer_receivers(int expert) const { return num_replicas_of(expert); }

int Placement::num_replicas_of(int expert) const {
    int n = 0;
    for (int d = 0; d < num_devices; ++d) n += replica[static_cast<size_t>(expert) * num_devices + d];
    return n;
}

std::vector<int> Placement::replicas_per_device() const {
    std::vector<int> per_device(num_devices, 0);
    for (int e = 0; e < num_experts; ++e)
        for (int d = 0; d < num_devices; ++d) per_device[d] += replica[static_cast<size_t>(e) * num_devices + d];
    return per_device;
}

std::vector<int> Placement::experts_per_device() const {
    std::vector<int> per_device(num_devices, 0);
    for (int d : owner) ++per_device[d];
    return per_device;
}

namespace {
constexpr EnumName<RouteRule> kRouteRuleNames[] = {{RouteRule::kOwner, "owner"},
                                                   {RouteRule::kLeastLoaded, "least_loaded"},
                                                   {RouteRule::kEvenSplit, "even_split"},
                                                   {RouteRule::kFlow, "flow"},
                                                   {RouteRule::kMaxFlow, "max_flow"}};
}  // namespace

RouteRule parse_route_rule(const std::string& name) {
    return parse_enum(kRouteRuleNames, "balance.route_to", name, "--set balance.route_to=owner");
}

const char* route_rule_name(RouteRule rule) { return enum_name(kRouteRuleNames, rule); }

void keep_replicas_within_groups(Placement& p, const std::vector<int>& group_of_device) {
    PROPHET_ASSERT(group_of_device.size() == static_cast<size_t>(p.num_devices));
    for (int e = 0; e < p.num_experts; ++e)
        for (int d = 0; d < p.num_devices; ++d)
            if (group_of_device[d] != group_of_device[p.owner[e]])
                p.replica[static_cast<size_t>(e) * p.num_devices + d] = 0;
}

std::string check_placement(const Placement& p, int max_replicas_per_device) {
    if (p.num_devices <= 0 || p.num_experts <= 0) return "empty placement";
    if (static_cast<int>(p.owner.size()) != p.num_experts) return "owner has the wrong size";
    if (p.replica.size() != static_cast<size_t>(p.num_experts) * p.num_devices) return "replica has the wrong size";
    for (int e = 0; e < p.num_experts; ++e) {
        if (p.owner[e] < 0 || p.owner[e] >= p.num_devices)
            return "expert " + std::to_string(e) + " has owner " + std::to_string(p.owner[e]) + " out of range";
        for (int d = 0; d < p.num_devices; ++d) {
            const uint8_t flag = p.replica[static_cast<size_t>(e) * p.num_devices + d];
            if (flag > 1) return "replica flag of expert " + std::to_string(e) + " on device " + std::to_string(d) + " is not 0/1";
            if (flag && d == p.owner[e])
                return "expert " + std::to_string(e) + " lists its owner " + std::to_string(d) + " as a replica";
        }
    }
    if (max_replicas_per_device > 0) {
        const std::vector<int> per_device = p.replicas_per_device();
        for (int d = 0; d < p.num_devices; ++d)
            if (per_device[d] > max_replicas_per_device)
                return "device " + std::to_string(d) + " holds " + std::to_string(per_device[d]) +
                       " replicas, above the cap " + std::to_string(max_replicas_per_device);
    }
    return "";
}

std::vector<int> routing_destination(const int64_t* counts, const Placement& p, RouteRule rule) {
    const int D = p.num_devices;
    const int E = p.num_experts;
    std::vector<int> destination(static_cast<size_t>(D) * E);
    if (rule != RouteRule::kLeastLoaded) {
        // owner rule (and even split's representative): a holder computes its own tokens, the rest go to the
        // owner; no running load is needed, so one pass over [D*E] (the planners call this per plan)
        for (int src = 0; src < D; ++src) {
            int* row = destination.data() + static_cast<size_t>(src) * E;
            for (int e = 0; e < E; ++e)
                row[e] = p.replica[static_cast<size_t>(e) * D + src] ? src : p.owner[e];  // owner[e] == src: src
        }
        return destination;
    }
    // local holders first: their tokens never leave the device
    std::vector<int64_t> computed(D, 0);
    for (int src = 0; src < D; ++src)
        for (int e = 0; e < E; ++e)
            if (p.holds(e, src)) {
                destination[static_cast<size_t>(src) * E + e] = src;
                computed[src] += counts[static_cast<size_t>(src) * E + e];
            }
    for (int e = 0; e < E; ++e) {
        for (int src = 0; src < D; ++src) {
            if (p.holds(e, src)) continue;
            // the holder (owner or replica) with the fewest tokens computed so far; ties to the owner, then to the
            // lower device index, so the rule is deterministic
            int target = p.owner[e];
            int64_t best = computed[target];
            for (int d = 0; d < D; ++d)
                if (p.holds(e, d) && computed[d] < best) {
                    best = computed[d];
                    target = d;
                }
            destination[static_cast<size_t>(src) * E + e] = target;
            computed[target] += counts[static_cast<size_t>(src) * E + e];
        }
    }
    return destination;
}

LayerFlow compute_flow(const int64_t* counts, int num_devices, int num_experts, const Placement& p, RouteRule rule,
                       const CostModel* pricing, FlowRouteReport* report) {
    PROPHET_ASSERT(p.num_devices == num_devices && p.num_experts == num_experts);
    if (rule == RouteRule::kFlow) return flow_route_layer(counts, num_devices, num_experts, p, pricing, report);
    if (rule == RouteRule::kMaxFlow) return max_flow_route_layer(counts, num_devices, num_experts, p, pricing);
    const int D = num_devices;
    const int E = num_experts;
    LayerFlow flow;
    flow.num_devices = D;
    flow.num_experts = E;
    flow.destination = routing_destination(counts, p, rule);
    flow.computed.assign(D, 0);
    flow.received.assign(D, 0);
    flow.sent.assign(D, 0);
    flow.route.assign(static_cast<size_t>(D) * D, 0);
    flow.replica_holders.assign(E, 0);
    auto add = [&](int src, int dst, int64_t n) {
        flow.computed[dst] += n;
        flow.route[static_cast<size_t>(src) * D + dst] += n;
        if (dst != src) {
            flow.sent[src] += n;
            flow.received[dst] += n;
        }
    };
    if (rule != RouteRule::kEvenSplit) {
        for (int src = 0; src < D; ++src)
            for (int e = 0; e < E; ++e) {
                const int64_t n = counts[static_cast<size_t>(src) * E + e];
                flow.total_tokens += n;
                add(src, flow.destination[static_cast<size_t>(src) * E + e], n);
            }
    } else {
        std::vector<int> holders;  // e's holders, owner first, then replicas by device index
        for (int e = 0; e < E; ++e) {
            holders.assign(1, p.owner[e]);
            for (int d = 0; d < D; ++d)
                if (p.replica[static_cast<size_t>(e) * D + d]) holders.push_back(d);
            const int64_t r = static_cast<int64_t>(holders.size());
            for (int src = 0; src < D; ++src) {
                const int64_t n = counts[static_cast<size_t>(src) * E + e];
                flow.total_tokens += n;
                for (int64_t j = 0; j < r; ++j)
                    add(src, holders[static_cast<size_t>(j)], even_split_share(n, r, src, j));
            }
        }
    }
    for (int e = 0; e < E; ++e) flow.replica_holders[e] = p.num_replicas_of(e);
    return flow;
}

}  // namespace prophet
