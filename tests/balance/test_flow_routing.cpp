// balance.route_to = "flow" (balance/flow_routing.h): the routing LP against a brute-force oracle over every
// integer split on tiny instances, against the other routing rules, exact token counts, and the warm start.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <utility>

#include "balance/flow_routing.h"
#include "balance_fixtures.h"
#include "core/error.h"
#include "core/rng.h"

namespace prophet {
namespace {

using testing::unit_cost_model;

// Three pricings of the tiny cases: none (unit prices), Eq 1 (unit cost model), and a topology with NVLink,
// PCIe, NICs and injection limits of different rates.
CostModel topology_model(int D) {
    CostModel m = unit_cost_model(D);
    m.topology_aware = true;
    m.cluster.devices_per_node = D == 3 ? 1 : 2;  // D = 3: three nodes (NICs); D <= 2: one node, one NVLink pair
    m.cluster.nvlink_domain = D == 3 ? 1 : 2;
    m.cluster.nvlink_bytes_per_s = 4.0;
    m.cluster.pcie_bytes_per_s = 1.5;
    m.cluster.node_nic_bytes_per_s = 0.7;
    m.cluster.gpu_injection_bytes_per_s = 2.0;
    m.cluster.gpu_ejection_bytes_per_s = 1.2;
    return m;
}

struct TinyCase {
    int D, E;
    int max_count;  // counts uniform in [0, max_count]
    int pricing;    // 0: none, 1: Eq 1, 2: topology
    uint64_t seed;
};

class FlowOracle : public ::testing::TestWithParam<TinyCase> {};

// Every integer split of every replicated group, scored by route_objective: the least.
double brute_force(const std::vector<int64_t>& counts, int D, int E, const Placement& p, const RoutePricing& pr) {
    std::vector<std::pair<int, int>> groups;  // (src, expert) with a choice
    for (int s = 0; s < D; ++s)
        for (int e = 0; e < E; ++e)
            if (p.num_replicas_of(e) > 0 && counts[s * E + e] > 0) groups.emplace_back(s, e);
    std::vector<SplitPart> parts;
    double best = 1e300;
    std::function<void(size_t)> walk = [&](size_t i) {
        if (i == groups.size()) {
            best = std::min(best, route_objective(pr, flow_from_parts(counts.data(), D, E, p, parts)));
            return;
        }
        const auto [s, e] = groups[i];
        std::vector<int> holders;
        for (int g = 0; g < D; ++g)
            if (p.holds(e, g)) holders.push_back(g);
        std::function<void(size_t, int64_t)> split = [&](size_t h, int64_t left) {
            if (h + 1 == holders.size()) {
                parts.push_back({s, e, holders[h], left});
                walk(i + 1);
                parts.pop_back();
                return;
            }
            for (int64_t n = 0; n <= left; ++n) {
                parts.push_back({s, e, holders[h], n});
                split(h + 1, left - n);
                parts.pop_back();
            }
        };
        split(0, counts[s * E + e]);
    };
    walk(0);
    return best;
}

TEST_P(FlowOracle, RoundedSplitIsWithinOneTokenPerGroupOfTheBestIntegerSplit) {
    const TinyCase c = GetParam();
    Rng rng(c.seed);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<int64_t> counts(static_cast<size_t>(c.D) * c.E);
        for (int64_t& n : counts) n = static_cast<int64_t>(rng.below(c.max_count + 1));
        std::vector<int> owner(c.E);
        for (int& o : owner) o = static_cast<int>(rng.below(c.D));
        Placement p = Placement::make_owners(c.D, owner);
        for (int e = 0; e < c.E; ++e)
            for (int d = 0; d < c.D; ++d)
                if (rng.below(2)) p.add_replica(e, d);
        const CostModel model = c.pricing == 2 ? topology_model(c.D) : unit_cost_model(c.D);
        const CostModel* cost = c.pricing == 0 ? nullptr : &model;
        FlowRouteReport rep;
        const LayerFlow flow = flow_route_layer(counts.data(), c.D, c.E, p, cost, &rep);
        // the pricing the LP used (Eq 1's step: one bandwidth here, so the hint does not matter)
        const RoutePricing pr = route_pricing(cost, c.D, 0.0);
        const double oracle = brute_force(counts, c.D, c.E, p, pr);
        double worst_pair = 0;
        for (double v : pr.pair_cost) worst_pair = std::max(worst_pair, v);
        int groups = 0;
        for (int s = 0; s < c.D; ++s)
            for (int e = 0; e < c.E; ++e) groups += p.num_replicas_of(e) > 0 && counts[s * c.E + e] > 0;
        // tolerance: largest-remainder rounding moves each of a group's (at most D) columns by less than one token,
        // each token costing at most compute_weight on its device plus a2a_weight * the dearest pair price
        const double tolerance = groups * c.D * (pr.compute_weight + pr.a2a_weight * worst_pair) + 1e-9;
        EXPECT_NEAR(rep.rounded_objective, route_objective(pr, flow), 1e-9);
        if (rep.lp_columns > 0) {
            EXPECT_LE(rep.lp_objective, oracle + 1e-7) << "LP above the integer optimum";
            EXPECT_GE(rep.rounded_objective, rep.lp_objective - 1e-7) << "an integer split below the LP optimum";
        }
        EXPECT_LE(rep.rounded_objective, oracle + tolerance) << "trial " << trial;
        EXPECT_GE(rep.rounded_objective, oracle - 1e-9) << "below the brute force: the oracle missed a split";
    }
}

INSTANTIATE_TEST_SUITE_P(Tiny, FlowOracle,
                         ::testing::Values(TinyCase{2, 2, 4, 0, 1}, TinyCase{2, 3, 3, 1, 2}, TinyCase{3, 2, 3, 1, 3},
                                           TinyCase{3, 3, 2, 1, 4}, TinyCase{2, 2, 4, 2, 5}, TinyCase{3, 2, 3, 2, 6},
                                           TinyCase{3, 3, 2, 2, 7}));

// Medium instances: the flow split is never worse (by the objective it minimises) than owner, least_loaded or
// even_split on the same placement, and it moves tokens exactly: every source sends what it routed, every
// expert computes what it was sent.
struct RuleCase {
    int D, E, tokens_per_device;
    double zipf;
    bool topology;
    uint64_t seed;
};

class FlowAgainstRules : public ::testing::TestWithParam<RuleCase> {};

TEST_P(FlowAgainstRules, ObjectiveIsAtMostEveryOtherRule) {
    const RuleCase c = GetParam();
    const std::vector<int64_t> counts = testing::skewed_counts(c.D, c.E, c.tokens_per_device, c.zipf, c.seed);
    CostModel cost = testing::paper_cost_model(c.D, c.tokens_per_device);
    cost.topology_aware = c.topology;
    cost.cluster.pcie_bytes_per_s = 96e9 / 8;
    cost.cluster.node_nic_bytes_per_s = 100e9 / 8;
    Rng rng(c.seed + 100);
    Placement p = Placement::make_static(c.D, c.E);
    for (int i = 0; i < c.E; ++i) p.add_replica(static_cast<int>(rng.below(c.E)), static_cast<int>(rng.below(c.D)));
    FlowRouteReport rep;
    const LayerFlow flow = flow_route_layer(counts.data(), c.D, c.E, p, &cost, &rep);
    const LayerFlow owner = compute_flow(counts.data(), c.D, c.E, p, RouteRule::kOwner);
    const double largest = *std::max_element(owner.received.begin(), owner.received.end()) * cost.token_bytes();
    const RoutePricing pr = route_pricing(&cost, c.D, largest);
    const double worst_pair = *std::max_element(pr.pair_cost.begin(), pr.pair_cost.end());
    // rounding slack as in FlowOracle: under one token per split column
    const double slack = c.D * c.E * c.D * (pr.compute_weight + pr.a2a_weight * worst_pair);
    for (RouteRule rule : {RouteRule::kOwner, RouteRule::kLeastLoaded, RouteRule::kEvenSplit}) {
        const LayerFlow other = compute_flow(counts.data(), c.D, c.E, p, rule);
        EXPECT_LE(rep.lp_objective, route_objective(pr, other) * (1 + 1e-9)) << route_rule_name(rule);
        EXPECT_LE(rep.rounded_objective, route_objective(pr, other) * (1 + 1e-9) + slack) << route_rule_name(rule);
    }
    for (int s = 0; s < c.D; ++s) {
        int64_t routed = 0, sent = 0;
        for (int e = 0; e < c.E; ++e) routed += counts[s * c.E + e];
        for (int g = 0; g < c.D; ++g) sent += flow.route[s * c.D + g];
        EXPECT_EQ(sent, routed) << "source " << s;
    }
    for (int e = 0; e < c.E; ++e) {
        int64_t load = 0, computed = 0;
        for (int s = 0; s < c.D; ++s) load += counts[s * c.E + e];
        for (int g = 0; g < c.D; ++g) {
            computed += flow.expert_device[e * c.D + g];
            if (!p.holds(e, g)) {
                EXPECT_EQ(flow.expert_device[e * c.D + g], 0) << "expert " << e << " on a non-holder";
            }
        }
        EXPECT_EQ(computed, load) << "expert " << e;
    }
}

INSTANTIATE_TEST_SUITE_P(Medium, FlowAgainstRules,
                         ::testing::Values(RuleCase{8, 16, 2048, 1.2, false, 11}, RuleCase{8, 16, 2048, 1.2, true, 12},
                                           RuleCase{16, 32, 1024, 0.8, true, 13},
                                           RuleCase{16, 16, 4096, 1.5, false, 14}));

// The merged LP (experts with one holder set share a group per source) against the per-group LP it replaces: the
// same optimum objective (relative 1e-9), an exact integer split (flow_from_parts asserts every group's parts sum to
// its count and name holders; checked again here per expert), never below the optimum, and fewer columns where
// holder sets repeat. Patterns: every expert on every device (one class: D groups instead of D * E), experts in
// pairs on the same two devices, and random copies (mostly distinct sets: the same LP).
struct MergeCase {
    int D, E, tokens_per_device;
    int pattern;  // 0: full replication, 1: pairs of experts share two holders, 2: random copies
    bool topology;
    uint64_t seed;
};

class FlowMergedLp : public ::testing::TestWithParam<MergeCase> {};

Placement merge_placement(const MergeCase& c) {
    Placement p = Placement::make_static(c.D, c.E);
    Rng rng(c.seed + 7);
    for (int e = 0; e < c.E; ++e)
        for (int d = 0; d < c.D; ++d) {
            const bool add = c.pattern == 0 ? true : c.pattern == 1 ? d == (p.owner[e] + 1) % c.D : rng.below(3) == 0;
            if (add && !p.holds(e, d)) p.add_replica(e, d);
        }
    return p;
}

TEST_P(FlowMergedLp, SameOptimumAsThePerGroupLp) {
    const MergeCase c = GetParam();
    const std::vector<int64_t> counts = testing::skewed_counts(c.D, c.E, c.tokens_per_device, 1.2, c.seed);
    CostModel cost = testing::paper_cost_model(c.D, c.tokens_per_device);
    cost.topology_aware = c.topology;
    const Placement p = merge_placement(c);
    const RoutePricing pr = route_pricing(&cost, c.D, 0.0);
    FlowRouteReport merged, per_group;
    const LayerFlow flow = flow_route_priced(counts.data(), c.D, c.E, p, pr, &merged);
    flow_route_priced(counts.data(), c.D, c.E, p, pr, &per_group, RoutingLpForm::kPerGroup);
    EXPECT_NEAR(merged.lp_objective, per_group.lp_objective, 1e-9 * per_group.lp_objective);
    EXPECT_GE(merged.rounded_objective, merged.lp_objective * (1 - 1e-9));
    EXPECT_NEAR(merged.rounded_objective, route_objective(pr, flow), 1e-9 * merged.rounded_objective);
    if (c.pattern == 0) {
        EXPECT_EQ(merged.lp_columns, c.D * c.D) << "full replication: one class";
    }
    if (c.pattern != 2) {
        EXPECT_LT(merged.lp_columns, per_group.lp_columns);
    }
    for (int e = 0; e < c.E; ++e) {
        int64_t load = 0, computed = 0;
        for (int s = 0; s < c.D; ++s) load += counts[s * c.E + e];
        for (int g = 0; g < c.D; ++g) computed += flow.expert_device[e * c.D + g];
        EXPECT_EQ(computed, load) << "expert " << e;
    }
}

INSTANTIATE_TEST_SUITE_P(Patterns, FlowMergedLp,
                         ::testing::Values(MergeCase{8, 16, 2048, 0, false, 31}, MergeCase{8, 16, 2048, 0, true, 32},
                                           MergeCase{8, 16, 2048, 1, true, 33}, MergeCase{16, 32, 1024, 1, false, 34},
                                           MergeCase{8, 16, 2048, 2, true, 35}));

// the report of routing counts on p in a thread of its own: a fresh basis cache, so a cold solve
FlowRouteReport cold_route(const std::vector<int64_t>& counts, int D, int E, const Placement& p,
                           const CostModel& cost) {
    FlowRouteReport report;
    std::thread([&] { flow_route_layer(counts.data(), D, E, p, &cost, &report); }).join();
    return report;
}

// the reports of routing `first` and then `second` on p in a thread of its own (a fresh basis cache)
std::pair<FlowRouteReport, FlowRouteReport> route_in_turn(const std::vector<int64_t>& first,
                                                          const std::vector<int64_t>& second, int D, int E,
                                                          const Placement& p, const CostModel& cost) {
    std::pair<FlowRouteReport, FlowRouteReport> reports;
    std::thread([&] {
        flow_route_layer(first.data(), D, E, p, &cost, &reports.first);
        flow_route_layer(second.data(), D, E, p, &cost, &reports.second);
    }).join();
    return reports;
}

// one token of expert 0 moved from device 0 to device 1 (both keep some): the same LP structure, other bounds
std::vector<int64_t> one_token_moved(std::vector<int64_t> counts, int E) {
    PROPHET_ASSERT(counts[0] > 1 && counts[E] > 0);
    --counts[0], ++counts[E];
    return counts;
}

TEST(FlowRouting, WarmStartGivesTheColdOptimum) {
    const int D = 8, E = 16;
    const std::vector<int64_t> counts = testing::skewed_counts(D, E, 4096, 1.2, 21);
    const std::vector<int64_t> moved = one_token_moved(counts, E);
    const CostModel cost = testing::paper_cost_model(D, 4096);
    Placement p = Placement::make_static(D, E);
    for (int d = 1; d < D; ++d) p.add_replica(0, d);
    const FlowRouteReport cold = cold_route(moved, D, E, p, cost);
    const FlowRouteReport warm = route_in_turn(counts, moved, D, E, p, cost).second;
    EXPECT_FALSE(cold.warm_started);
    EXPECT_TRUE(warm.warm_started);
    EXPECT_FALSE(warm.reused);
    EXPECT_NEAR(warm.lp_objective, cold.lp_objective, 1e-9 * cold.lp_objective);
}

// The same LP again (same placement, same counts) returns the stored optimum: the same split without a solve, and
// the seconds of the solve it stands for.
TEST(FlowRouting, TheSameLpAgainReusesItsOptimum) {
    const int D = 8, E = 16;
    const std::vector<int64_t> counts = testing::skewed_counts(D, E, 4096, 1.2, 22);
    const CostModel cost = testing::paper_cost_model(D, 4096);
    Placement p = Placement::make_static(D, E);
    for (int d = 1; d < D; d += 2) p.add_replica(0, d);
    const auto [first, again] = route_in_turn(counts, counts, D, E, p, cost);
    EXPECT_FALSE(first.reused);
    EXPECT_TRUE(again.reused);
    EXPECT_EQ(again.lp_objective, first.lp_objective);
    EXPECT_GT(first.lp_solve_s, 0.0);
    EXPECT_EQ(again.lp_solve_s, first.lp_solve_s) << "the reuse carries the seconds of the solve it stands for";
    ASSERT_EQ(again.parts.size(), first.parts.size());
    for (size_t i = 0; i < first.parts.size(); ++i) {
        EXPECT_EQ(again.parts[i].src, first.parts[i].src);
        EXPECT_EQ(again.parts[i].expert, first.parts[i].expert);
        EXPECT_EQ(again.parts[i].dst, first.parts[i].dst);
        EXPECT_EQ(again.parts[i].tokens, first.parts[i].tokens);
    }
}

TEST(FlowRouting, ParsesItsRouteName) {
    EXPECT_EQ(parse_route_rule("flow"), RouteRule::kFlow);
    EXPECT_STREQ(route_rule_name(RouteRule::kFlow), "flow");
    EXPECT_EQ(paper_route_rule("flow"), RouteRule::kFlow);
}

}  // namespace
}  // namespace prophet
