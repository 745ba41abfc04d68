// route_split.cpp: the routing rule of one layer as whole-token parts per (device, expert) group (route_split.h).
#include "balance/route_split.h"

#include <algorithm>
#include <utility>

#include "balance/flow_routing.h"
#include "balance/route_max_flow.h"
#include "core/error.h"

namespace prophet {

namespace {

// Builds a split group by group: call add() for the parts of group 0, 1, ... in order (any device order inside a
// group), close() after each group.
struct SplitBuilder {
    RouteSplit split;
    size_t group_begin = 0;  // first part of the open group
    SplitBuilder(int D, int E) {
        split.num_devices = D;
        split.num_experts = E;
        split.group_start.assign(1, 0);
    }
    void add(int device, int64_t tokens) {
        if (tokens <= 0) return;
        split.part_device.push_back(device);
        split.part_tokens.push_back(tokens);
    }
    void close() {
        // devices ascending inside the group (insertion sort: a group has at most D parts)
        for (size_t i = group_begin + 1; i < split.part_device.size(); ++i)
            for (size_t j = i; j > group_begin && split.part_device[j - 1] > split.part_device[j]; --j) {
                std::swap(split.part_device[j - 1], split.part_device[j]);
                std::swap(split.part_tokens[j - 1], split.part_tokens[j]);
            }
        group_begin = split.part_device.size();
        split.group_start.push_back(static_cast<int>(group_begin));
    }
};

RouteSplit even_split(const int64_t* counts, const Placement& p) {
    const int D = p.num_devices, E = p.num_experts;
    std::vector<std::vector<int>> holders(E);  // [E] owner first, then replicas by device (compute_flow's order)
    for (int e = 0; e < E; ++e) {
        holders[e].push_back(p.owner[e]);
        for (int d = 0; d < D; ++d)
            if (p.replica[static_cast<size_t>(e) * D + d]) holders[e].push_back(d);
    }
    SplitBuilder b(D, E);
    for (int src = 0; src < D; ++src)
        for (int e = 0; e < E; ++e) {
            const int64_t n = counts[static_cast<size_t>(src) * E + e];
            const int64_t r = static_cast<int64_t>(holders[e].size());
            for (int64_t j = 0; j < r; ++j) b.add(holders[e][static_cast<size_t>(j)], even_split_share(n, r, src, j));
            b.close();
        }
    return std::move(b.split);
}

// The split whose replicated groups follow `solved` (a solver's parts, any order) and whose other groups follow the
// owner rule.
RouteSplit split_from_parts(const int64_t* counts, const Placement& p, const std::vector<SplitPart>& solved) {
    const int D = p.num_devices, E = p.num_experts;
    std::vector<std::vector<std::pair<int, int64_t>>> parts(static_cast<size_t>(D) * E);  // [D*E] (device, tokens)
    for (const SplitPart& part : solved)
        parts[static_cast<size_t>(part.src) * E + part.expert].emplace_back(part.dst, part.tokens);
    const std::vector<int> owner_rule = routing_destination(counts, p, RouteRule::kOwner);
    SplitBuilder b(D, E);
    for (size_t g = 0; g < parts.size(); ++g) {
        if (parts[g].empty()) b.add(owner_rule[g], counts[g]);
        for (const auto& [device, tokens] : parts[g]) b.add(device, tokens);
        b.close();
    }
    return std::move(b.split);
}

RouteSplit lp_split(const int64_t* counts, const Placement& p, const CostModel* pricing, FlowRouteReport* lp_report) {
    FlowRouteReport report;
    flow_route_layer(counts, p.num_devices, p.num_experts, p, pricing, &report);
    RouteSplit split = split_from_parts(counts, p, report.parts);
    if (lp_report) *lp_report = std::move(report);
    return split;
}

RouteSplit max_flow_split(const int64_t* counts, const Placement& p, const CostModel* pricing) {
    MaxFlowRouteReport report;
    max_flow_route_layer(counts, p.num_devices, p.num_experts, p, pricing, &report);
    return split_from_parts(counts, p, report.parts);
}

}  // namespace

int64_t RouteSplit::tokens_to(int src, int expert, int device) const {
    const size_t g = static_cast<size_t>(src) * num_experts + expert;
    for (int i = group_start[g]; i < group_start[g + 1]; ++i)
        if (part_device[i] == device) return part_tokens[i];
    return 0;
}

RouteSplit route_split_from_destination(const int64_t* counts, int D, int E, const int* destination) {
    SplitBuilder b(D, E);
    for (size_t g = 0; g < static_cast<size_t>(D) * E; ++g) {
        PROPHET_ASSERT_MSG(destination[g] >= 0 && destination[g] < D, "routing destination out of range");
        b.add(destination[g], counts[g]);
        b.close();
    }
    return std::move(b.split);
}

RouteSplit route_split(const int64_t* counts, const Placement& p, RouteRule rule, const CostModel* pricing,
                       FlowRouteReport* lp_report) {
    if (rule == RouteRule::kEvenSplit) return even_split(counts, p);
    if (rule == RouteRule::kFlow) return lp_split(counts, p, pricing, lp_report);
    if (rule == RouteRule::kMaxFlow) return max_flow_split(counts, p, pricing);
    const std::vector<int> destination = routing_destination(counts, p, rule);
    return route_split_from_destination(counts, p.num_devices, p.num_experts, destination.data());
}

LayerFlow flow_of_split(const int64_t* counts, const Placement& p, const RouteSplit& split) {
    const int D = p.num_devices, E = p.num_experts;
    PROPHET_ASSERT(split.num_devices == D && split.num_experts == E);
    std::vector<SplitPart> parts;
    parts.reserve(split.part_device.size());
    for (int src = 0; src < D; ++src)
        for (int e = 0; e < E; ++e) {
            const size_t g = static_cast<size_t>(src) * E + e;
            for (int i = split.group_start[g]; i < split.group_start[g + 1]; ++i)
                parts.push_back({src, e, split.part_device[i], split.part_tokens[i]});
        }
    return flow_from_parts(counts, D, E, p, parts);
}

RoutingTally tally_routing(const RouteSplit& split, const Placement& p) {
    const int D = split.num_devices, E = split.num_experts;
    PROPHET_ASSERT(p.num_devices == D && p.num_experts == E);
    RoutingTally t;
    for (int src = 0; src < D; ++src)
        for (int e = 0; e < E; ++e) {
            const size_t g = static_cast<size_t>(src) * E + e;
            for (int i = split.group_start[g]; i < split.group_start[g + 1]; ++i) {
                const int d = split.part_device[i];
                const int64_t n = split.part_tokens[i];
                if (d == p.owner[e]) {
                    t.to_owner += n;
                } else {
                    t.to_replicas += n;
                    if (d != src) t.sent_to_replicas += n;
                }
            }
        }
    return t;
}

}  // namespace prophet
