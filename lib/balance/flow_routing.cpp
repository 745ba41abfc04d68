// flow_routing.cpp: the per-batch routing LP of flow_routing.h, its pricing and its integer rounding.
#include "balance/flow_routing.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <utility>

#include "balance/flow_split.h"
#include "balance/lp_clp.h"
#include "core/error.h"

namespace prophet {
namespace {

// Resource indices of the topology-aware pricing: six per-device queues, then two per NIC.
enum DeviceQueue { kNvOut, kNvIn, kHostOut, kHostIn, kInjection, kEjection, kDeviceQueues };

// cost per token (t_tok units) of resource `rate` bytes/s; 0 when the resource has no limit
double per_token(double token_bytes, double rate, double scale, double t_tok) {
    return rate > 0 ? token_bytes / (rate * scale) / t_tok : 0.0;
}

// the resources a token from s to g (s != g) loads under the topology model (topology.h's queues)
void topology_pair(const ClusterSpec& cl, int s, int g, double tb, double scale, double t_tok,
                   std::vector<int>& resource, std::vector<double>& cost) {
    const int D = cl.num_devices;
    auto add = [&](int index, double rate) {
        const double c = per_token(tb, rate, scale, t_tok);
        if (c > 0) resource.push_back(index), cost.push_back(c);
    };
    const ClusterSpec::LinkClass c = cl.link_class(s, g);
    if (c == ClusterSpec::LinkClass::kNvlink) {
        add(kNvOut * D + s, cl.nvlink_bytes_per_s);
        add(kNvIn * D + g, cl.nvlink_bytes_per_s);
    } else {
        add(kHostOut * D + s, cl.pcie_bytes_per_s);
        add(kHostIn * D + g, cl.pcie_bytes_per_s);
        if (c == ClusterSpec::LinkClass::kInterNode) {
            add(kDeviceQueues * D + 2 * cl.nic_of(s), cl.node_nic_bytes_per_s);
            add(kDeviceQueues * D + 2 * cl.nic_of(g) + 1, cl.node_nic_bytes_per_s);
        }
    }
    add(kInjection * D + s, cl.gpu_injection_bytes_per_s);
    add(kEjection * D + g, cl.gpu_ejection_bytes_per_s);
}

// The LP's constant part: H and Q of every group with one holder (owner rule), [D] and [K].
void fixed_loads(const int64_t* counts, int D, int E, const Placement& p, const RoutePricing& pr,
                 const std::vector<uint8_t>& replicated, std::vector<double>& h, std::vector<double>& q) {
    h.assign(static_cast<size_t>(D), 0.0);
    q.assign(static_cast<size_t>(pr.num_resources), 0.0);
    for (int s = 0; s < D; ++s)
        for (int e = 0; e < E; ++e) {
            const int64_t n = counts[static_cast<size_t>(s) * E + e];
            if (n == 0 || replicated[e]) continue;
            const int g = p.owner[e];
            h[g] += static_cast<double>(n);
            if (s == g) continue;
            const int pair = s * D + g;
            for (int k = pr.pair_start[pair]; k < pr.pair_start[pair + 1]; ++k)
                q[pr.pair_resource[k]] += pr.pair_cost[k] * static_cast<double>(n);
        }
}

// the routing LPs' bases and last optima kept per thread: a trace's layers, each column's pass over them (about 90 kB
// per LP at E = 256, D = 64 with many copies; a 16-GPU trace of thousands of layers at a few kB each)
constexpr size_t kBasisCacheBytes = size_t{64} << 20;

// this thread's routing LPs: their bases and last optima
lp::BasisCache& routing_lps() {
    thread_local lp::BasisCache bases(kBasisCacheBytes);
    return bases;
}

}  // namespace

void forget_routing_lps() { routing_lps() = lp::BasisCache(kBasisCacheBytes); }

RoutePricing route_pricing(const CostModel* cost, int D, double largest_message_bytes) {
    RoutePricing pr;
    pr.num_devices = D;
    pr.pair_start.assign(static_cast<size_t>(D) * D + 1, 0);
    const bool topology = cost && cost->topology_aware;
    const double t_tok =
        cost ? cost->expert_flops_per_token() / (cost->cluster.compute_flops * cost->compute_scale) : 1.0;
    const double tb = cost ? cost->token_bytes() : 1.0;
    const double scale = cost ? cost->bandwidth_scale : 1.0;
    const int nics = topology ? D / cost->cluster.devices_per_node * cost->cluster.nics_per_node : 0;
    pr.num_resources = topology ? kDeviceQueues * D + 2 * nics : D;
    const double received =
        cost ? per_token(tb, cost->cluster.a2a_bytes_per_s(largest_message_bytes), scale, t_tok) : 1.0;
    for (int s = 0; s < D; ++s)
        for (int g = 0; g < D; ++g) {
            if (s != g && topology) {
                topology_pair(cost->cluster, s, g, tb, scale, t_tok, pr.pair_resource, pr.pair_cost);
            } else if (s != g && received > 0) {
                pr.pair_resource.push_back(g);
                pr.pair_cost.push_back(received);
            }
            pr.pair_start[static_cast<size_t>(s) * D + g + 1] = static_cast<int>(pr.pair_resource.size());
        }
    return pr;
}

LayerFlow flow_from_parts(const int64_t* counts, int D, int E, const Placement& p,
                          const std::vector<SplitPart>& parts) {
    LayerFlow flow;
    flow.num_devices = D;
    flow.num_experts = E;
    flow.destination = routing_destination(counts, p, RouteRule::kOwner);
    flow.computed.assign(D, 0);
    flow.received.assign(D, 0);
    flow.sent.assign(D, 0);
    flow.route.assign(static_cast<size_t>(D) * D, 0);
    flow.expert_device.assign(static_cast<size_t>(E) * D, 0);
    auto add = [&](int src, int e, int dst, int64_t n) {
        flow.computed[dst] += n;
        flow.expert_device[static_cast<size_t>(e) * D + dst] += n;
        flow.route[static_cast<size_t>(src) * D + dst] += n;
        if (dst != src) flow.sent[src] += n, flow.received[dst] += n;
    };
    std::vector<int64_t> covered(static_cast<size_t>(D) * E, -1);  // tokens of the group the parts place
    for (const SplitPart& part : parts) {
        PROPHET_ASSERT(part.src >= 0 && part.src < D && part.expert >= 0 && part.expert < E && part.tokens >= 0);
        PROPHET_ASSERT_MSG(p.holds(part.expert, part.dst), "a split part names a device that does not hold the expert");
        int64_t& c = covered[static_cast<size_t>(part.src) * E + part.expert];
        c = std::max<int64_t>(c, 0) + part.tokens;
        add(part.src, part.expert, part.dst, part.tokens);
    }
    for (int s = 0; s < D; ++s)
        for (int e = 0; e < E; ++e) {
            const size_t at = static_cast<size_t>(s) * E + e;
            flow.total_tokens += counts[at];
            if (covered[at] >= 0) {
                PROPHET_ASSERT_MSG(covered[at] == counts[at], "a group's split parts do not sum to its count");
                continue;
            }
            add(s, e, flow.destination[at], counts[at]);
        }
    flow.replica_holders.assign(E, 0);
    for (int e = 0; e < E; ++e) flow.replica_holders[e] = p.num_replicas_of(e);
    return flow;
}

double route_objective(const RoutePricing& pr, const LayerFlow& flow) {
    const int D = flow.num_devices;
    std::vector<double> q(static_cast<size_t>(pr.num_resources), 0.0);
    for (int s = 0; s < D; ++s)
        for (int g = 0; g < D; ++g) {
            const int64_t n = flow.route[static_cast<size_t>(s) * D + g];
            if (s == g || n == 0) continue;
            for (int k = pr.pair_start[s * D + g]; k < pr.pair_start[s * D + g + 1]; ++k)
                q[pr.pair_resource[k]] += pr.pair_cost[k] * static_cast<double>(n);
        }
    const double h = static_cast<double>(*std::max_element(flow.computed.begin(), flow.computed.end()));
    const double a2a = q.empty() ? 0.0 : *std::max_element(q.begin(), q.end());
    return pr.compute_weight * h + pr.a2a_weight * a2a;
}

namespace {

// The LP of flow_routing.h over the replicated experts' groups. Columns: one per (group, holder), then
// H_max and Q_max. Rows: [D] H rows, [K] resource rows, then one equality row per group. A group is (src, class):
// the experts of a class share one holder set (kMergedHolderSets; kPerGroup: one expert each), so their columns to
// a holder have the same H and Q coefficients and one column per holder carries them all (exact: any split of
// the class total over the holders splits over its experts, every expert's tokens going to any holder).
struct RoutingLp {
    lp::LpModel model;
    std::vector<SplitPart> columns;  // (src, first expert of the class, dst) of each split column, tokens unused
    std::vector<int> group_start;    // the columns of group i: group_start[i] .. group_start[i + 1]
    std::vector<int64_t> group_tokens;
    std::vector<std::vector<int>> members;  // [E] the experts of the class a first expert stands for (ascending)
};

// The replicated experts' holders (device order) and classes: members[first] lists the experts sharing first's
// holder set (first: the lowest of them); kPerGroup gives every expert its own class.
void holder_classes(int D, int E, const Placement& p, const std::vector<uint8_t>& replicated, RoutingLpForm form,
                    std::vector<std::vector<int>>& holders, std::vector<std::vector<int>>& members) {
    holders.assign(E, {});
    members.assign(E, {});
    std::map<std::vector<int>, int> first_with;  // holder set -> first expert holding it
    for (int e = 0; e < E; ++e) {
        if (!replicated[e]) continue;
        for (int g = 0; g < D; ++g)
            if (p.holds(e, g)) holders[e].push_back(g);
        const int first = form == RoutingLpForm::kPerGroup ? e : first_with.emplace(holders[e], e).first->second;
        members[first].push_back(e);
    }
}

// The columns of group (s, class of `first`) with n tokens, one per holder.
void add_group_columns(RoutingLp& lpm, int s, int first, int64_t n, const std::vector<int>& holders,
                       const RoutePricing& pr, int D, int K) {
    lp::LpModel& m = lpm.model;
    const int group_row = D + K + static_cast<int>(lpm.group_tokens.size());
    std::vector<int> rows;
    std::vector<double> coefs;
    for (int g : holders) {
        rows.assign({group_row, g});
        coefs.assign({1.0, 1.0});
        if (s != g)
            for (int k = pr.pair_start[s * D + g]; k < pr.pair_start[s * D + g + 1]; ++k)
                rows.push_back(D + pr.pair_resource[k]), coefs.push_back(pr.pair_cost[k]);
        m.add_col(0.0, lp::infinity(), 0.0, rows.data(), coefs.data(), static_cast<int>(rows.size()));
        lpm.columns.push_back({s, first, g, 0});
    }
    lpm.group_start.push_back(m.num_cols());
    lpm.group_tokens.push_back(n);
}

RoutingLp build_routing_lp(const int64_t* counts, int D, int E, const Placement& p, const RoutePricing& pr,
                           const std::vector<uint8_t>& replicated, RoutingLpForm form) {
    RoutingLp lpm;
    std::vector<double> h, q;
    fixed_loads(counts, D, E, p, pr, replicated, h, q);
    const int K = pr.num_resources;
    lp::LpModel& m = lpm.model;
    std::vector<std::vector<int>> holders;
    holder_classes(D, E, p, replicated, form, holders, lpm.members);
    std::vector<std::pair<int, int64_t>> groups;  // (src, tokens) of each group, classes in first-expert order
    std::vector<int> group_first;
    for (int e = 0; e < E; ++e)
        for (int s = 0; s < D && !lpm.members[e].empty(); ++s) {
            int64_t n = 0;
            for (int x : lpm.members[e]) n += counts[static_cast<size_t>(s) * E + x];
            if (n > 0) groups.emplace_back(s, n), group_first.push_back(e);
        }
    m.num_rows = D + K + static_cast<int>(groups.size());
    for (int g = 0; g < D; ++g) m.row_lb.push_back(-lp::infinity()), m.row_ub.push_back(-h[g]);
    for (int k = 0; k < K; ++k) m.row_lb.push_back(-lp::infinity()), m.row_ub.push_back(-q[k]);
    for (const auto& [s, n] : groups)
        m.row_lb.push_back(static_cast<double>(n)), m.row_ub.push_back(static_cast<double>(n));
    lpm.group_start.push_back(0);
    for (size_t i = 0; i < groups.size(); ++i)
        add_group_columns(lpm, groups[i].first, group_first[i], groups[i].second, holders[group_first[i]], pr, D, K);
    std::vector<int> rows(D);
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<double> coefs(D, -1.0);
    m.add_col(0.0, lp::infinity(), pr.compute_weight, rows.data(), coefs.data(), D);  // H_max
    rows.resize(K);
    std::iota(rows.begin(), rows.end(), D);
    coefs.assign(K, -1.0);
    m.add_col(0.0, lp::infinity(), pr.a2a_weight, rows.data(), coefs.data(), K);  // Q_max
    return lpm;
}

// One group's integer shares [n holders] handed to its class's experts: each expert in turn takes its count from
// the holders in order (a class of one expert takes every share, zeros included).
void split_group(const RoutingLp& lpm, size_t i, const std::vector<int64_t>& share, const int64_t* counts, int E,
                 std::vector<SplitPart>& parts) {
    const int first = lpm.group_start[i], n = lpm.group_start[i + 1] - first;
    const SplitPart& head = lpm.columns[first];
    const std::vector<int>& members = lpm.members[head.expert];
    if (members.size() == 1) {
        for (int j = 0; j < n; ++j) parts.push_back({head.src, head.expert, lpm.columns[first + j].dst, share[j]});
        return;
    }
    std::vector<int64_t> left = share;
    int j = 0;
    for (int e : members) {
        int64_t need = counts[static_cast<size_t>(head.src) * E + e];
        while (need > 0) {
            while (left[j] == 0) ++j;
            const int64_t take = std::min(need, left[j]);
            parts.push_back({head.src, e, lpm.columns[first + j].dst, take});
            left[j] -= take, need -= take;
        }
    }
}

}  // namespace

RoutePricing layer_route_pricing(const int64_t* counts, int D, int E, const Placement& p, const CostModel* cost) {
    double largest = 0;
    if (cost && !cost->topology_aware) {
        const LayerFlow owner = compute_flow(counts, D, E, p, RouteRule::kOwner);
        largest =
            static_cast<double>(*std::max_element(owner.received.begin(), owner.received.end())) * cost->token_bytes();
    }
    return route_pricing(cost, D, largest);
}

LayerFlow flow_route_layer(const int64_t* counts, int D, int E, const Placement& p, const CostModel* cost,
                           FlowRouteReport* report) {
    std::vector<uint8_t> replicated(E, 0);
    bool any = false;
    for (int e = 0; e < E; ++e) any |= (replicated[e] = p.num_replicas_of(e) > 0 ? 1 : 0) != 0;
    if (!any) {  // nothing to split: the owner rule
        LayerFlow flow = flow_from_parts(counts, D, E, p, {});
        if (report) {
            *report = FlowRouteReport{};
            report->rounded_objective = report->lp_objective =
                route_objective(layer_route_pricing(counts, D, E, p, cost), flow);
        }
        return flow;
    }
    return flow_route_priced(counts, D, E, p, layer_route_pricing(counts, D, E, p, cost), report);
}

LayerFlow flow_route_priced(const int64_t* counts, int D, int E, const Placement& p, const RoutePricing& pr,
                            FlowRouteReport* report, RoutingLpForm form) {
    std::vector<uint8_t> replicated(E, 0);
    for (int e = 0; e < E; ++e) replicated[e] = p.num_replicas_of(e) > 0 ? 1 : 0;
    const RoutingLp lpm = build_routing_lp(counts, D, E, p, pr, replicated, form);
    // warm start: the basis of the last LP of the same structure on this thread; that LP itself: its optimum
    const lp::LpResult r = lp::solve_lp_cached(lpm.model, routing_lps());
    PROPHET_ASSERT_MSG(r.optimal, "the flow routing LP did not solve to optimality (it is always feasible)");
    std::vector<SplitPart> parts;
    for (size_t i = 0; i + 1 < lpm.group_start.size(); ++i) {
        const int first = lpm.group_start[i], n = lpm.group_start[i + 1] - first;
        split_group(lpm, i, round_shares(r.x.data() + first, n, lpm.group_tokens[i]), counts, E, parts);
    }
    LayerFlow flow = flow_from_parts(counts, D, E, p, parts);
    if (report) {
        report->lp_objective = r.objective;
        report->rounded_objective = route_objective(pr, flow);
        report->lp_columns = static_cast<int>(lpm.columns.size());
        report->warm_started = r.warm_started;
        report->reused = r.reused;
        report->lp_solve_s = r.solve_s;
        report->parts = std::move(parts);
    }
    return flow;
}

}  // namespace prophet
