// flow's combinatorial split (balance/flow_split.h) against the routing LP as the slow oracle: the least
// max_g H_g equals the LP optimum under compute-only prices; tokens move exactly; the planner's lean totals equal
// the full flow; Dinic's max-flow against hand-computed cuts; and the planner's choice under the split against
// its choice under the LP.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "balance/flow_routing.h"
#include "balance/flow_split.h"
#include "balance/max_flow.h"
#include "balance/moves.h"
#include "balance/policy_flow.h"
#include "balance_fixtures.h"
#include "core/rng.h"

namespace prophet {
namespace {

// relative tolerance of the split's T* against the LP optimum (both are the same rational; CLP's and the
// max-flow's rounding only)
constexpr double kRelative = 1e-9;

enum class Shape { kRandom, kTies, kSparse, kOneHolder, kAllReplicated };

struct SplitCase {
    const char* name;
    int D, E;
    int max_count;
    Shape shape;
    uint64_t seed;
};

std::vector<int64_t> case_counts(const SplitCase& c, Rng& rng) {
    std::vector<int64_t> counts(static_cast<size_t>(c.D) * c.E);
    for (int64_t& n : counts) {
        n = static_cast<int64_t>(rng.below(c.max_count + 1));
        if (c.shape == Shape::kTies) n = c.max_count;
        if (c.shape == Shape::kSparse && rng.below(3) != 0) n = 0;  // two in three groups empty
    }
    return counts;
}

Placement case_placement(const SplitCase& c, Rng& rng) {
    std::vector<int> owner(c.E);
    for (int& o : owner) o = static_cast<int>(rng.below(c.D));
    Placement p = Placement::make_owners(c.D, owner);
    for (int e = 0; e < c.E; ++e) {
        if (c.shape == Shape::kOneHolder && e % 2 == 0) continue;  // every other expert keeps one holder
        for (int d = 0; d < c.D; ++d)
            if (c.shape == Shape::kAllReplicated || rng.below(3) == 0) p.add_replica(e, d);
    }
    return p;
}

// what predict_layer reads of a split: route, per-device totals, replica flags, tokens
void expect_same_totals(const LayerFlow& a, const LayerFlow& b) {
    EXPECT_EQ(a.route, b.route);
    EXPECT_EQ(a.computed, b.computed);
    EXPECT_EQ(a.received, b.received);
    EXPECT_EQ(a.sent, b.sent);
    EXPECT_EQ(a.replica_holders, b.replica_holders);
    EXPECT_EQ(a.total_tokens, b.total_tokens);
}

// every source sends exactly what it routed, and no expert's tokens are computed on a device not holding it
void expect_tokens_move_exactly(const std::vector<int64_t>& counts, int D, int E, const Placement& p,
                                const LayerFlow& flow) {
    for (int s = 0; s < D; ++s) {
        int64_t routed = 0, sent = 0;
        for (int e = 0; e < E; ++e) routed += counts[static_cast<size_t>(s) * E + e];
        for (int g = 0; g < D; ++g) sent += flow.route[static_cast<size_t>(s) * D + g];
        EXPECT_EQ(sent, routed) << "source " << s;
    }
    for (int e = 0; e < E; ++e)
        for (int g = 0; g < D; ++g)
            if (!p.holds(e, g)) {
                EXPECT_EQ(flow.expert_device[static_cast<size_t>(e) * D + g], 0) << "expert " << e;
            }
}

// the routing LP with only the compute term priced: its optimum is the least max_g H_g
double lp_least_max_computed(const std::vector<int64_t>& counts, int D, int E, const Placement& p) {
    RoutePricing pr = route_pricing(nullptr, D, 0.0);
    pr.compute_weight = 1.0;
    pr.a2a_weight = 0.0;
    FlowRouteReport rep;
    flow_route_priced(counts.data(), D, E, p, pr, &rep);
    return rep.lp_objective;
}

class FastSplitOracle : public ::testing::TestWithParam<SplitCase> {};

TEST_P(FastSplitOracle, LeastMaxComputedEqualsTheLpOptimum) {
    const SplitCase c = GetParam();
    Rng rng(c.seed);
    for (int trial = 0; trial < 25; ++trial) {
        const std::vector<int64_t> counts = case_counts(c, rng);
        const Placement p = case_placement(c, rng);
        FastSplitReport rep;
        fast_split_layer(counts.data(), c.D, c.E, p, nullptr, &rep);
        const double lp = lp_least_max_computed(counts, c.D, c.E, p);
        EXPECT_NEAR(rep.max_computed, lp, kRelative * std::max(1.0, lp)) << c.name << " trial " << trial;
    }
}

TEST_P(FastSplitOracle, TokensMoveExactly) {
    const SplitCase c = GetParam();
    Rng rng(c.seed + 1);
    for (int trial = 0; trial < 25; ++trial) {
        const std::vector<int64_t> counts = case_counts(c, rng);
        const Placement p = case_placement(c, rng);
        FastSplitReport rep;
        const LayerFlow flow = fast_split_layer(counts.data(), c.D, c.E, p, nullptr, &rep);
        expect_tokens_move_exactly(counts, c.D, c.E, p, flow);
        int replicated_held_most = 0;  // the rounding's slack: one token per replicated expert a device holds
        for (int g = 0; g < c.D; ++g) {
            int held = 0;
            for (int e = 0; e < c.E; ++e) {
                int64_t w = 0;
                for (int s = 0; s < c.D; ++s) w += counts[static_cast<size_t>(s) * c.E + e];
                held += p.num_replicas_of(e) > 0 && p.holds(e, g) && w > 0;
            }
            replicated_held_most = std::max(replicated_held_most, held);
        }
        const int64_t most = *std::max_element(flow.computed.begin(), flow.computed.end());
        EXPECT_LE(static_cast<double>(most), rep.max_computed + replicated_held_most + 1e-6);
        EXPECT_GE(static_cast<double>(most), rep.max_computed - 1e-6);
    }
}

TEST_P(FastSplitOracle, TotalsEqualTheFullFlow) {
    const SplitCase c = GetParam();
    Rng rng(c.seed + 2);
    const std::vector<int64_t> counts = case_counts(c, rng);
    FastSplitter splitter(counts.data(), c.D, c.E, nullptr);
    for (int trial = 0; trial < 25; ++trial) {  // random owners on odd trials: the cached owner routes are redone
        Placement p = case_placement(c, rng);
        for (int e = 0; e < c.E && trial % 2 == 0; ++e) {  // fixed owners on even trials: the cache is reused
            p.owner[e] = e % c.D;
            p.replica[static_cast<size_t>(e) * c.D + p.owner[e]] = 0;
        }
        SCOPED_TRACE("trial " + std::to_string(trial));
        expect_same_totals(splitter.split_totals(p), splitter.split(p));
    }
}

// The splitter keeps its buffers (instance, max-flow, rounding, fill) and the owner routes' totals across
// placements: a splitter reused over a sequence of placements gives what a fresh splitter gives for each.
TEST_P(FastSplitOracle, ReusedSplitterEqualsAFreshOne) {
    const SplitCase c = GetParam();
    Rng rng(c.seed + 3);
    const std::vector<int64_t> counts = case_counts(c, rng);
    FastSplitter reused(counts.data(), c.D, c.E, nullptr);
    for (int trial = 0; trial < 25; ++trial) {
        Placement p = case_placement(c, rng);
        for (int e = 0; e < c.E && trial % 3 != 0; ++e) {  // mostly fixed owners: the cached totals are reused
            p.owner[e] = e % c.D;
            p.replica[static_cast<size_t>(e) * c.D + p.owner[e]] = 0;
        }
        FastSplitter fresh(counts.data(), c.D, c.E, nullptr);
        FastSplitReport reused_report, fresh_report;
        SCOPED_TRACE("trial " + std::to_string(trial));
        expect_same_totals(reused.split_totals(p, &reused_report), fresh.split_totals(p, &fresh_report));
        EXPECT_EQ(reused_report.max_computed, fresh_report.max_computed) << "trial " << trial;
        EXPECT_EQ(reused_report.max_flow_solves, fresh_report.max_flow_solves) << "trial " << trial;
    }
}

// The fill's nearest-source order under a topology against the triple loop it replaces: the holders' quotas read
// back from the split's expert_device, each source's tokens go to its own device first, then to the holders at
// distance 0 (NVLink domain), 1 (node), 2 in turn, each distance in device order.
struct NearCase {
    const char* name;
    int D, E, devices_per_node, nvlink_domain;
    uint64_t seed;
};

std::vector<int64_t> triple_loop_route(const std::vector<int64_t>& counts, int D, int E, const Placement& p,
                                       const LayerFlow& flow, const ClusterSpec& cl) {
    auto distance = [&](int s, int g) {
        const ClusterSpec::LinkClass c = cl.link_class(s, g);
        return c == ClusterSpec::LinkClass::kNvlink ? 0 : c == ClusterSpec::LinkClass::kIntraNode ? 1 : 2;
    };
    std::vector<int64_t> route(static_cast<size_t>(D) * D, 0), quota(D), left(D);
    for (int e = 0; e < E; ++e) {
        std::vector<int> holders;
        for (int g = 0; g < D; ++g)
            if (p.holds(e, g)) holders.push_back(g);
        for (int s = 0; s < D; ++s) left[s] = counts[static_cast<size_t>(s) * E + e];
        if (holders.size() == 1) {
            for (int s = 0; s < D; ++s) route[static_cast<size_t>(s) * D + p.owner[e]] += left[s];
            continue;
        }
        for (int g = 0; g < D; ++g) quota[g] = flow.expert_device[static_cast<size_t>(e) * D + g];
        auto give = [&](int s, int g) {
            const int64_t n = std::min(left[s], quota[g]);
            route[static_cast<size_t>(s) * D + g] += n, left[s] -= n, quota[g] -= n;
        };
        for (int g : holders) give(g, g);
        for (int s = 0; s < D; ++s)
            for (int d = 0; d < 3; ++d)
                for (int g : holders)
                    if (distance(s, g) == d) give(s, g);
    }
    return route;
}

// A splitter reset onto other counts (FlowScratch keeps one across plans) forgets the owner routes it cached: its
// split of a placement with the same owners as its last one equals a fresh splitter's of the new counts.
TEST_P(FastSplitOracle, ResetSplitterEqualsAFreshOne) {
    const SplitCase c = GetParam();
    Rng rng(c.seed + 5);
    const std::vector<int64_t> before = case_counts(c, rng), after = case_counts(c, rng);
    const Placement p = case_placement(c, rng);
    FastSplitter reused(before.data(), c.D, c.E, nullptr);
    reused.split_totals(p);  // caches p's owner routes of `before`
    reused.reset(after.data(), c.D, c.E, nullptr);
    FastSplitter fresh(after.data(), c.D, c.E, nullptr);
    FastSplitReport reused_report, fresh_report;
    expect_same_totals(reused.split_totals(p, &reused_report), fresh.split_totals(p, &fresh_report));
    EXPECT_EQ(reused_report.max_computed, fresh_report.max_computed);
}

class NearestFillOracle : public ::testing::TestWithParam<NearCase> {};

TEST_P(NearestFillOracle, SameRouteAsTheTripleLoop) {
    const NearCase c = GetParam();
    Rng rng(c.seed);
    const SplitCase shape{c.name, c.D, c.E, 40, Shape::kRandom, c.seed};
    const std::vector<int64_t> counts = case_counts(shape, rng);
    ClusterSpec cl = testing::paper_cost_model(c.D, 1024).cluster;
    cl.devices_per_node = c.devices_per_node;
    cl.nvlink_domain = c.nvlink_domain;
    FastSplitter splitter(counts.data(), c.D, c.E, &cl);
    for (int trial = 0; trial < 10; ++trial) {
        const Placement p = case_placement(shape, rng);
        const LayerFlow flow = splitter.split(p);
        EXPECT_EQ(flow.route, triple_loop_route(counts, c.D, c.E, p, flow, cl)) << "trial " << trial;
    }
}

INSTANTIATE_TEST_SUITE_P(Table, NearestFillOracle,
                         ::testing::Values(NearCase{"nodes_of_4", 8, 12, 4, 1, 11},
                                           NearCase{"nvlink_pairs", 8, 16, 4, 2, 12},
                                           NearCase{"nvswitch_nodes", 16, 32, 8, 8, 13},
                                           NearCase{"one_node", 4, 8, 4, 1, 14}),
                         [](const ::testing::TestParamInfo<NearCase>& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Table, FastSplitOracle,
                         ::testing::Values(SplitCase{"random", 4, 6, 9, Shape::kRandom, 1},
                                           SplitCase{"random_large", 8, 16, 50, Shape::kRandom, 2},
                                           SplitCase{"ties", 4, 4, 6, Shape::kTies, 3},
                                           SplitCase{"zero_groups", 5, 8, 7, Shape::kSparse, 4},
                                           SplitCase{"one_holder", 4, 6, 9, Shape::kOneHolder, 5},
                                           SplitCase{"one_device", 1, 5, 9, Shape::kRandom, 6},
                                           SplitCase{"every_device_holds", 3, 4, 9, Shape::kAllReplicated, 7}),
                         [](const ::testing::TestParamInfo<SplitCase>& info) { return std::string(info.param.name); });

// The split at a compute level above the optimum (FastSplitter::set_slack) on nodes of devices_per_node: tokens
// still move exactly, no device computes more than the level (beyond the rounding's token per replicated expert
// held), T* is reported unchanged, and with every replicated expert held in every node and room for all of it, no
// token of a replicated expert leaves its node (at slack 0 the compute optimum moves some: the case's point).
struct SlackCase {
    const char* name;
    int D, E, devices_per_node, hot;  // the `hot` experts of lowest index are held in every node, the rest once
    double slack;
    uint64_t seed;
};

class SlackSplit : public ::testing::TestWithParam<SlackCase> {
  protected:
    void SetUp() override {
        const SlackCase c = GetParam();
        Rng rng(c.seed);
        counts_ = case_counts(SplitCase{c.name, c.D, c.E, 60, Shape::kRandom, c.seed}, rng);
        for (int s = 0; s < c.D; ++s)  // the hot experts take most tokens, unevenly over sources
            for (int e = 0; e < c.hot; ++e) counts_[static_cast<size_t>(s) * c.E + e] *= 3 + s % 4;
        cluster_ = testing::paper_cost_model(c.D, 1024).cluster;
        cluster_.devices_per_node = c.devices_per_node;
        cluster_.nvlink_domain = 1;
        std::vector<int> owner(c.E);
        for (int& o : owner) o = static_cast<int>(rng.below(c.D));
        placement_ = Placement::make_owners(c.D, owner);
        const int nodes = c.D / c.devices_per_node;
        for (int e = 0; e < c.hot; ++e)
            for (int n = 0; n < nodes; ++n)
                if (cluster_.node_of(owner[e]) != n)
                    placement_.add_replica(e, n * c.devices_per_node + static_cast<int>(rng.below(c.devices_per_node)));
    }
    LayerFlow split(double slack, FastSplitReport* report) {
        const SlackCase c = GetParam();
        FastSplitter splitter(counts_.data(), c.D, c.E, &cluster_);
        splitter.set_near_start(true);
        splitter.set_slack(slack);
        return splitter.split(placement_, report);
    }
    int64_t hot_tokens_leaving_nodes(const LayerFlow& flow) const {  // tokens of hot experts computed off-node
        const SlackCase c = GetParam();
        int64_t left = 0;
        for (int s = 0; s < c.D; ++s)
            for (int g = 0; g < c.D; ++g)
                if (cluster_.node_of(s) != cluster_.node_of(g)) left += hot_route(flow, s, g);
        return left;
    }
    // tokens of hot experts s sends g: the route minus the single-holder experts' tokens g owns
    int64_t hot_route(const LayerFlow& flow, int s, int g) const {
        const SlackCase c = GetParam();
        int64_t cold = 0;
        for (int e = c.hot; e < c.E; ++e)
            if (placement_.owner[e] == g) cold += counts_[static_cast<size_t>(s) * c.E + e];
        return flow.route[static_cast<size_t>(s) * c.D + g] - cold;
    }
    std::vector<int64_t> counts_;
    ClusterSpec cluster_;
    Placement placement_;
};

TEST_P(SlackSplit, TokensMoveExactlyWithinTheLevel) {
    const SlackCase c = GetParam();
    FastSplitReport even, raised;
    split(0.0, &even);
    const LayerFlow flow = split(c.slack, &raised);
    EXPECT_EQ(raised.max_computed, even.max_computed);  // T* itself
    expect_tokens_move_exactly(counts_, c.D, c.E, placement_, flow);
    const int64_t most = *std::max_element(flow.computed.begin(), flow.computed.end());
    EXPECT_LE(static_cast<double>(most), even.max_computed * (1 + c.slack) + c.hot + 1e-6);
}

TEST_P(SlackSplit, RoomyLevelKeepsReplicatedTokensInTheirNode) {
    const SlackCase c = GetParam();
    if (c.slack < 10) GTEST_SKIP() << "a level without room for every node's tokens";
    EXPECT_GT(hot_tokens_leaving_nodes(split(0.0, nullptr)), 0) << "the compute optimum keeps them anyway";
    EXPECT_EQ(hot_tokens_leaving_nodes(split(c.slack, nullptr)), 0);
}

// flow scores a hot-set candidate at several levels in turn on one splitter (policy_flow.cpp at_best_level), which
// then keeps the placement's instance and, above slack 0, its search's level: each split is a fresh splitter's,
// with the near start on and off, and after another placement in between.
TEST_P(SlackSplit, OneSplitterAcrossLevelsEqualsAFreshOneAtEach) {
    const SlackCase c = GetParam();
    FastSplitter reused(counts_.data(), c.D, c.E, &cluster_);
    Placement other = placement_;  // expert 0's copies dropped: another instance and level
    std::fill_n(other.replica.begin(), c.D, uint8_t{0});
    const struct {
        bool near;
        double slack;
        const Placement* p;
    } steps[] = {{true, 0.0, &placement_},      {true, c.slack, &placement_}, {true, c.slack / 2, &placement_},
                 {false, c.slack, &placement_}, {true, c.slack, &other},      {true, c.slack, &placement_},
                 {true, 0.0, &placement_},      {false, 0.0, &placement_},    {false, c.slack, &placement_}};
    for (const auto& step : steps) {
        SCOPED_TRACE("near " + std::to_string(step.near) + " slack " + std::to_string(step.slack));
        FastSplitter fresh(counts_.data(), c.D, c.E, &cluster_);
        FastSplitReport reused_report, fresh_report;
        for (FastSplitter* s : {&reused, &fresh}) s->set_near_start(step.near), s->set_slack(step.slack);
        expect_same_totals(reused.split(*step.p, &reused_report), fresh.split(*step.p, &fresh_report));
        EXPECT_EQ(reused_report.max_computed, fresh_report.max_computed);
    }
}

INSTANTIATE_TEST_SUITE_P(Table, SlackSplit,
                         ::testing::Values(SlackCase{"two_nodes_tenth", 8, 12, 4, 3, 0.1, 41},
                                           SlackCase{"four_nodes_fifth", 16, 24, 4, 5, 0.2, 42},
                                           SlackCase{"two_nodes_roomy", 8, 12, 4, 3, 10.0, 43},
                                           SlackCase{"four_nodes_roomy", 16, 24, 4, 5, 10.0, 44}),
                         [](const ::testing::TestParamInfo<SlackCase>& info) { return std::string(info.param.name); });

// Constructed cases with a known optimum (tokens), counts [D*E], each expert's holders as a bit mask.
struct KnownCase {
    const char* name;
    int D, E;
    std::vector<int64_t> counts;
    std::vector<int> holders;  // [E] bit d: device d holds the expert (the lowest bit set is the owner)
    double least_max;
};

class FastSplitKnown : public ::testing::TestWithParam<KnownCase> {};

TEST_P(FastSplitKnown, LeastMaxComputedIsTheHandOptimum) {
    const KnownCase c = GetParam();
    std::vector<int> owner(c.E);
    for (int e = 0; e < c.E; ++e) owner[e] = __builtin_ctz(static_cast<unsigned>(c.holders[e]));
    Placement p = Placement::make_owners(c.D, owner);
    for (int e = 0; e < c.E; ++e)
        for (int d = 0; d < c.D; ++d)
            if ((c.holders[e] >> d) & 1) p.add_replica(e, d);
    FastSplitReport rep;
    fast_split_layer(c.counts.data(), c.D, c.E, p, nullptr, &rep);
    EXPECT_NEAR(rep.max_computed, c.least_max, kRelative * c.least_max);
    EXPECT_NEAR(lp_least_max_computed(c.counts, c.D, c.E, p), c.least_max, kRelative * c.least_max);
}

// fractional: 3 tokens over two holders -> 1.5; a bottleneck set: expert 0 (30 tokens) on devices {0, 1}, which
// also own expert 1 (10 fixed tokens on device 1), device 2 idle -> (30 + 10) / 2 = 20; a zero-load replicated
// expert changes nothing; one holder each -> the largest owner's load
INSTANTIATE_TEST_SUITE_P(
    Table, FastSplitKnown,
    ::testing::Values(KnownCase{"half_token", 2, 1, {3, 0}, {0b11}, 1.5},
                      KnownCase{"bottleneck_set", 3, 3, {30, 10, 0, 0, 0, 0, 0, 0, 0}, {0b011, 0b010, 0b100}, 20.0},
                      KnownCase{"zero_load_replica", 2, 2, {5, 0, 3, 0}, {0b01, 0b11}, 8.0},
                      KnownCase{"one_holder_each", 2, 2, {5, 1, 3, 4}, {0b01, 0b10}, 8.0}),
    [](const ::testing::TestParamInfo<KnownCase>& info) { return std::string(info.param.name); });

// Dinic against hand-computed minimum cuts, fresh and resumed after a capacity is raised.
struct FlowNetworkCase {
    const char* name;
    int nodes;
    std::vector<std::array<double, 3>> arcs;  // from, to, capacity (node 0 source, node 1 sink)
    int raised_arc = -1;                      // arc raised to `raised_to` after the first solve (-1: none)
    double raised_to = 0;
    double max_flow, max_flow_after;
};

class MaxFlowTable : public ::testing::TestWithParam<FlowNetworkCase> {};

TEST_P(MaxFlowTable, ValueIsTheMinimumCut) {
    const FlowNetworkCase c = GetParam();
    MaxFlow mf(c.nodes);
    std::vector<int> index;
    for (const auto& a : c.arcs) index.push_back(mf.add_arc(static_cast<int>(a[0]), static_cast<int>(a[1]), a[2]));
    EXPECT_NEAR(mf.solve(0, 1, 1e-12), c.max_flow, 1e-9);
    if (c.raised_arc < 0) return;
    mf.raise_capacity(index[c.raised_arc], c.raised_to);
    EXPECT_NEAR(mf.solve(0, 1, 1e-12), c.max_flow_after, 1e-9);
}

// reset() empties the graph but keeps the buffers: the same network built again after a solve gives the same value
TEST_P(MaxFlowTable, ResetGraphSolvesAsAFreshOne) {
    const FlowNetworkCase c = GetParam();
    MaxFlow mf(c.nodes + 3);
    mf.add_arc(0, c.nodes + 2, 7.0);  // a network of another size first, solved, then reset away
    mf.add_arc(c.nodes + 2, 1, 7.0);
    mf.solve(0, 1, 1e-12);
    mf.reset(c.nodes);
    for (const auto& a : c.arcs) mf.add_arc(static_cast<int>(a[0]), static_cast<int>(a[1]), a[2]);
    EXPECT_NEAR(mf.solve(0, 1, 1e-12), c.max_flow, 1e-9);
}

// diamond: 0->2 (3), 0->3 (2), 2->1 (2), 3->1 (9), 2->3 (1): the cut at the source is 5; raising 0->3 to 9 moves the
// minimum cut to the sink side, 2->1 + 3->1 = 11 (paths 0-2-1: 2, 0-2-3-1: 1, 0-3-1: 8)
INSTANTIATE_TEST_SUITE_P(
    Table, MaxFlowTable,
    ::testing::Values(
        FlowNetworkCase{"single_arc", 2, {{0, 1, 2.5}}, 0, 4.0, 2.5, 4.0},
        FlowNetworkCase{"diamond", 4, {{0, 2, 3}, {0, 3, 2}, {2, 1, 2}, {3, 1, 9}, {2, 3, 1}}, 1, 9.0, 5.0, 11.0},
        FlowNetworkCase{
            "needs_reverse_arc", 4, {{0, 2, 1}, {0, 3, 1}, {2, 3, 1}, {2, 1, 1}, {3, 1, 1}}, -1, 0, 2.0, 2.0},
        FlowNetworkCase{"disconnected", 3, {{0, 2, 5}}, -1, 0, 0.0, 0.0}),
    [](const ::testing::TestParamInfo<FlowNetworkCase>& info) { return std::string(info.param.name); });

// The planner's choice under the split against its choice under the LP, both timed as the batch is (the LP's
// split on the planning counts), on FlowCap's fixtures and more: never slower where the choice is the same or
// better, and at most `max_slowdown` slower on the two Eq 8 cases where the split's compute-first proxy picks a
// placement the LP times 3.6% (5.3% with the topology, whose Eq 8 times each expert's copies alone: a star's
// copies of one expert queue on its owner's egress) slower: the known cost of the proxy, pinned so that it
// cannot grow unseen. Both choices are timed with the owner moves flow charges itself; since it does, the split's
// choice on uncapped_d8 is 2.2% slower than the LP's (it was equal when moves were free). NIC relief copies
// (flow_extra_copies.h) made both topology rows faster, the LP's choice more: cap2_d8_topology 28.12 -> 26.55 ms
// (split) and 25.23 ms (LP), so the split's is 5.2% slower there (it was equal).
struct ChoiceCase {
    const char* name;
    int D, E, cap, cost_eq;
    bool topology;
    double max_slowdown;  // allowed relative excess of the split's choice over the LP's choice
};

class FlowScoringChoice : public ::testing::TestWithParam<ChoiceCase> {};

TEST_P(FlowScoringChoice, SplitChoiceIsNoSlowerThanTheLpChoice) {
    const ChoiceCase c = GetParam();
    const std::vector<int64_t> counts = testing::skewed_counts(c.D, c.E, 4096, 1.4, 3);
    CostModel cost = testing::paper_cost_model(c.D, 4096);
    cost.topology_aware = c.topology;
    cost.cluster.pcie_bytes_per_s = 96e9 / 8;
    cost.cluster.node_nic_bytes_per_s = 100e9 / 8;
    BalanceOptions o;
    o.max_replicas_per_device = c.cap;
    o.route_rule = RouteRule::kFlow;
    o.cost_eq = c.cost_eq;
    const Placement current = Placement::make_static(c.D, c.E);
    const Placement fast = plan_flow(counts.data(), c.D, c.E, cost, o, current, nullptr, FlowScoring::kFastSplit);
    const Placement lp = plan_flow(counts.data(), c.D, c.E, cost, o, current, nullptr, FlowScoring::kRoutingLp);
    auto timed = [&](const Placement& p) {  // with the owner moves the planner charges itself (moves.h)
        return layer_cost(predict_layer(cost, compute_flow(counts.data(), c.D, c.E, p, RouteRule::kFlow, &cost), p),
                          c.cost_eq) +
               price_owner_moves(cost, current, p, kTrainingStateCopies).seconds;
    };
    EXPECT_LE(timed(fast), timed(lp) * (1 + c.max_slowdown + 1e-9)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Table, FlowScoringChoice,
                         ::testing::Values(ChoiceCase{"cap1_d4", 4, 8, 1, 6, false, 0.0},
                                           ChoiceCase{"cap1_d8", 8, 16, 1, 6, false, 0.0},
                                           ChoiceCase{"cap2_d8", 8, 16, 2, 6, false, 0.0},
                                           ChoiceCase{"uncapped_d8", 8, 8, 0, 6, false, 0.023},
                                           ChoiceCase{"uncapped_d8_eq8", 8, 8, 0, 8, false, 0.04},
                                           ChoiceCase{"cap2_d8_topology", 8, 16, 2, 6, true, 0.053},
                                           ChoiceCase{"uncapped_d8_eq8_topology", 8, 16, 0, 8, true, 0.055}),
                         [](const ::testing::TestParamInfo<ChoiceCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
