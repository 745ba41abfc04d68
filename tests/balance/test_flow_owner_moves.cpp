// flow prices owner moves (policy_flow.h): a candidate that re-packs owners pays the move's transfer (weights and
// AdamW state, moves.h) over the horizon it will last, so with a horizon too short for the gain to pay for it the
// owners stay, and with one long enough they move.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "balance/moves.h"
#include "balance/policy_flow.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

constexpr int kD = 4, kE = 8;

// device 0 owns the two hot experts (0 and 1) under the static layout; every device sends the same counts
std::vector<int64_t> hot_counts() {
    const std::vector<int64_t> per_device = {40, 40, 1, 1, 1, 1, 1, 1};
    std::vector<int64_t> c;
    for (int d = 0; d < kD; ++d) c.insert(c.end(), per_device.begin(), per_device.end());
    return c;
}

// replicas are dear (Trans and Agg every iteration at 1 GB/s), so re-packing owners is flow's way to balance
CostModel dear_replicas() {
    CostModel cost = testing::paper_cost_model(kD, 4096);
    cost.cluster.trans_bytes_per_s = cost.cluster.agg_bytes_per_s = 1e9;
    return cost;
}

BalanceOptions owner_rule(int horizon) {
    BalanceOptions o;
    o.route_rule = RouteRule::kOwner;
    o.cost_eq = 6;
    o.flow_horizon = horizon;
    return o;
}

double predicted_s(const Placement& p, const std::vector<int64_t>& counts, const CostModel& cost) {
    return layer_cost(predict_layer(cost, compute_flow(counts.data(), kD, kE, p, RouteRule::kOwner), p), 6);
}

struct HorizonCase {
    double paid_fraction;  // horizon x gain / move cost: < 1 the gain does not pay for the move
    bool owners_move;
};

class FlowOwnerMoves : public ::testing::TestWithParam<HorizonCase> {};

TEST_P(FlowOwnerMoves, MovesOwnersOnlyWhenTheGainOverTheHorizonPays) {
    const HorizonCase c = GetParam();
    const std::vector<int64_t> counts = hot_counts();
    const CostModel cost = dear_replicas();
    const Placement home = Placement::make_static(kD, kE);
    // the re-packing a horizon long enough to make any move free chooses, its gain and its move's cost
    const Placement repack = plan_flow(counts.data(), kD, kE, cost, owner_rule(1 << 30), home);
    const MoveCost move = price_owner_moves(cost, home, repack, kTrainingStateCopies);
    ASSERT_GT(move.experts, 0) << "flow moves no owner even for free: the case tests nothing";
    const double gain_s = predicted_s(home, counts, cost) - predicted_s(repack, counts, cost);
    ASSERT_GT(gain_s, 0.0);
    const int horizon = static_cast<int>(std::ceil(c.paid_fraction * move.seconds / gain_s));
    ASSERT_GT(horizon, 1);
    FlowPlanReport rep;
    const Placement p = plan_flow(counts.data(), kD, kE, cost, owner_rule(horizon), home, &rep);
    EXPECT_EQ(p.owner != home.owner, c.owners_move)
        << "horizon " << horizon << " batches, gain " << gain_s << " s per batch, move " << move.seconds << " s";
}

INSTANTIATE_TEST_SUITE_P(Horizons, FlowOwnerMoves,
                         ::testing::Values(HorizonCase{0.5, false}, HorizonCase{0.9, false}, HorizonCase{2.0, true}));

}  // namespace
}  // namespace prophet
