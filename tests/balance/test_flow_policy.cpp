// The `flow` policy (balance/policy_flow.h): device relabelling against brute force, the slot cap, the transfer
// gate.
#include <gtest/gtest.h>

#include <cmath>

#include "balance/policy_flow.h"
#include "balance/relabel.h"
#include "balance_fixtures.h"
#include "core/rng.h"

namespace prophet {
namespace {

TEST(Relabel, HungarianMatchesBruteForce) {
    Rng rng(5);
    for (int n = 1; n <= 7; ++n)
        for (int trial = 0; trial < 30; ++trial) {
            std::vector<int64_t> cost(static_cast<size_t>(n) * n);
            for (int64_t& c : cost) c = static_cast<int64_t>(rng.below(trial % 2 ? 4 : 100));  // ties on odd trials
            const std::vector<int> col = min_cost_assignment(cost, n);
            std::vector<int> seen(n, 0);
            int64_t total = 0;
            for (int r = 0; r < n; ++r) {
                ASSERT_GE(col[r], 0);
                ASSERT_LT(col[r], n);
                ++seen[col[r]];
                total += cost[static_cast<size_t>(r) * n + col[r]];
            }
            for (int v : seen) EXPECT_EQ(v, 1) << "not a permutation, n = " << n;
            EXPECT_EQ(total, min_cost_assignment_brute_force(cost, n)) << "n = " << n << " trial " << trial;
        }
}

struct CapCase {
    int D, E, cap;
};

class FlowCap : public ::testing::TestWithParam<CapCase> {};

TEST_P(FlowCap, PlacementIsValidUnderTheCap) {
    const CapCase c = GetParam();
    const std::vector<int64_t> counts = testing::skewed_counts(c.D, c.E, 4096, 1.4, 3);
    const CostModel cost = testing::paper_cost_model(c.D, 4096);
    BalanceOptions o;
    o.max_replicas_per_device = c.cap;
    o.route_rule = RouteRule::kFlow;
    const Placement p = plan_flow(counts.data(), c.D, c.E, cost, o, Placement::make_static(c.D, c.E));
    EXPECT_EQ(check_placement(p, c.cap), "");
}

INSTANTIATE_TEST_SUITE_P(Caps, FlowCap,
                         ::testing::Values(CapCase{4, 8, 1}, CapCase{8, 16, 1}, CapCase{8, 16, 2}, CapCase{8, 8, 0}));

// Transfer gate: with a one-off move priced over the horizon, a slow Trans link keeps the current placement and a
// long horizon lets the planner move.
struct GateCase {
    double trans_bytes_per_s;
    int horizon;
    bool keeps_current;
};

class FlowGate : public ::testing::TestWithParam<GateCase> {};

TEST_P(FlowGate, KeepsTheCurrentPlacementUnlessTheGainPaysForTheMove) {
    const GateCase c = GetParam();
    const int D = 4, E = 4;
    const std::vector<int64_t> counts = {400, 10, 10, 10, 400, 10, 10, 10, 400, 10, 10, 10, 400, 10, 10, 10};
    CostModel cost = testing::unit_cost_model(D);
    cost.cluster.trans_bytes_per_s = c.trans_bytes_per_s;  // the one-off move only: Trans below stays cheap
    cost.cluster.agg_bytes_per_s = 1e9;
    BalanceOptions o;
    o.route_rule = RouteRule::kFlow;
    o.flow_horizon = c.horizon;
    o.cost_eq = 8;
    // Eq 8 hides per-iteration transfers behind the windows; the gate prices the move at trans_bytes_per_s
    cost.cluster.fnec_s = cost.cluster.bnec_s = 1e9;
    FlowPlanReport rep;
    const Placement p = plan_flow(counts.data(), D, E, cost, o, Placement::make_static(D, E), &rep);
    EXPECT_EQ(rep.kept_current, c.keeps_current);
    EXPECT_EQ(p.num_replicas() == 0, c.keeps_current);
}

INSTANTIATE_TEST_SUITE_P(Gate, FlowGate,
                         ::testing::Values(GateCase{1e-6, 1, true}, GateCase{1e-6, 1 << 30, false},
                                           GateCase{1e6, 1, false}));

}  // namespace
}  // namespace prophet
