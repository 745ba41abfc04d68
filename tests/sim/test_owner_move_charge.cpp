// test_owner_move_charge.cpp: training's columns charge an owner move in the iteration it happens, once per move,
// the same seconds in Eq 6, Eq 8, FasterMoE's system model and the Sim column (moves.h charge_owner_moves), and
// the simulator's scored runs (simulate_score: the sweeps' engine "sim") add the same layer_owner_moves.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../balance/balance_fixtures.h"
#include "balance/evaluate.h"
#include "balance/moves.h"
#include "plan/policy_models.h"
#include "sim/simulator.h"
#include "sim/trace_view.h"

namespace prophet {
namespace {

using testing::unit_cost_model;

constexpr int kD = 4, kE = 16, kI = 2, kL = 1;

// [I][L][D][E]: device d routes 1 + (d + e + i) % 3 tokens to expert e
std::vector<int64_t> counts() {
    std::vector<int64_t> c;
    for (int i = 0; i < kI; ++i)
        for (int d = 0; d < kD; ++d)
            for (int e = 0; e < kE; ++e) c.push_back(1 + (d + e + i) % 3);
    return c;
}

// the static layout with the first `moved` experts of device 0 (experts 0..3) owned by device 1 instead
Placement with_moves(int moved) {
    Placement p = Placement::make_static(kD, kE);
    for (int e = 0; e < moved; ++e) p.owner[e] = 1;
    return Placement::make_owners(kD, p.owner);
}

// A static-named score (schedule none, owner rule) of two iterations: static, then `moved` owner moves; each layer
// scored uncharged by predict_layer.
PolicyScore score_of(const TraceView& v, const CostModel& cost, int moved) {
    PolicyScore s;
    s.name = "static";
    for (int it = 0; it < kI; ++it) {
        LayerScore ls;
        ls.iteration = it;
        ls.placement = it == 0 ? Placement::make_static(kD, kE) : with_moves(moved);
        const LayerFlow flow = compute_flow(v.layer(it, 0), kD, kE, ls.placement, RouteRule::kOwner);
        ls.cost = predict_layer(model_for_layer(cost, 0), flow, ls.placement);
        s.layers.push_back(ls);
    }
    return s;
}

// the score's placements as the simulator takes them, [I][L]
std::vector<std::vector<Placement>> placements_of(const PolicyScore& s) {
    std::vector<std::vector<Placement>> p(kI);
    for (const LayerScore& ls : s.layers) p[ls.iteration].push_back(ls.placement);
    return p;
}

// The trace (counts()), its view and the unit cost model every case below starts from.
class OwnerMoveTrace : public ::testing::Test {
  protected:
    const std::vector<int64_t> c_ = counts();
    const TraceView v_ = view_of(c_, kI, kL, kD, kE);
    const CostModel cost_ = unit_cost_model(kD);
};

class OwnerMoveCharge : public OwnerMoveTrace, public ::testing::WithParamInterface<int> {};

// unit model: expert_bytes 2 B, trans 1 B/s; every move leaves device 0 for device 1, so k moves are k x one
// move's 2 B x 3 (weights, AdamW m and v) at 1 B/s = 6 s each, charged in iteration 1 only
TEST_P(OwnerMoveCharge, EachColumnPaysKTimesOneMove) {
    const int k = GetParam();
    const double one_move_s = price_owner_moves(cost_, with_moves(0), with_moves(1), kTrainingStateCopies).seconds;
    ASSERT_DOUBLE_EQ(one_move_s, 6.0);
    const PolicyScore before = score_of(v_, cost_, k);
    PolicyScore charged = before;
    for (int it = 0; it < kI; ++it)
        charge_owner_moves(charged.layers, static_cast<size_t>(it) * kL, kL, cost_, kTrainingStateCopies);
    for (int it = 0; it < kI; ++it) {
        const CostBreakdown &a = before.layers[it].cost, &b = charged.layers[it].cost;
        const double expected = it == 0 ? 0.0 : k * one_move_s;
        EXPECT_DOUBLE_EQ(b.owner_move_s, expected) << "iteration " << it;
        EXPECT_DOUBLE_EQ(b.eq6_s - a.eq6_s, expected) << "Eq 6, iteration " << it;
        EXPECT_DOUBLE_EQ(b.eq8_s - a.eq8_s, expected) << "Eq 8, iteration " << it;
        EXPECT_DOUBLE_EQ(b.fastermoe_s - a.fastermoe_s, expected) << "FasterMoE sys, iteration " << it;
    }
    // the Sim column: the simulator's schedule of the same placements (none: static's system), plus the charge
    EvalSettings settings;
    const plan::SimColumn column = plan::simulate_column(charged, v_, cost_, settings);
    const sim::SimResult bare = sim::simulate(v_, placements_of(before), cost_, sim::SimOptions{});
    double bare_moe_ms = 0;
    for (const sim::IterationResult& ir : bare.iterations)
        for (const sim::BlockResult& b : ir.blocks) bare_moe_ms += b.moe_s * 1e3 / (kI * kL);
    const double mean_ms = k * one_move_s * 1e3 / (kI * kL);  // per block, mean over iterations and layers
    EXPECT_NEAR(column.moe_ms - bare_moe_ms, mean_ms, 1e-9 * (1 + mean_ms)) << "Sim";
    EXPECT_NEAR(column.owner_move_ms, mean_ms, 1e-9 * (1 + mean_ms));
    EXPECT_NEAR(column.iteration_ms - bare.mean_iteration_s * 1e3, k * one_move_s * 1e3 / kI, 1e-9 * (1 + mean_ms));
}

INSTANTIATE_TEST_SUITE_P(Moves, OwnerMoveCharge, ::testing::Values(0, 1, 2, 3));

// The sweeps' simulated time (simulate_score, what engine "sim" times a policy with): k owner moves in iteration 1
// cost k x one move (6 s, as above) more than the schedule of the same placements, blocking, in that iteration's
// block and nowhere else; the iteration still splits into compute and exposed communication.
class SimulatedOwnerMoveCharge : public OwnerMoveTrace, public ::testing::WithParamInterface<int> {};

TEST_P(SimulatedOwnerMoveCharge, KMovesCostKTimesOne) {
    const int k = GetParam();
    const PolicyScore s = score_of(v_, cost_, k);
    EvalSettings settings;
    const sim::SimOptions o;  // schedule none, as static's system
    const sim::SimResult bare = sim::simulate(v_, placements_of(s), cost_, o);
    const sim::SimResult charged = sim::simulate_score(s, v_, cost_, settings, o);
    const double one_move_s = 6.0, tol = 1e-9;
    ASSERT_EQ(charged.iterations.size(), static_cast<size_t>(kI));
    for (int it = 0; it < kI; ++it) {
        const sim::IterationResult &a = bare.iterations[it], &b = charged.iterations[it];
        const double expected = it == 1 ? k * one_move_s : 0.0;
        EXPECT_NEAR(b.iteration_s - a.iteration_s, expected, tol) << "iteration " << it;
        EXPECT_NEAR(b.owner_move_s, expected, tol) << "iteration " << it;
        EXPECT_NEAR(b.blocks[0].moe_s - a.blocks[0].moe_s, expected, tol) << "iteration " << it;
        EXPECT_NEAR(b.blocks[0].owner_move_s, expected, tol) << "iteration " << it;
        EXPECT_NEAR(b.iteration_s, b.compute_s + b.exposed_comm_s, tol) << "iteration " << it;
    }
    EXPECT_NEAR(charged.mean_iteration_s - bare.mean_iteration_s, k * one_move_s / kI, tol);
    EXPECT_NEAR(charged.total_s - bare.total_s, k * one_move_s, tol);
}

INSTANTIATE_TEST_SUITE_P(Moves, SimulatedOwnerMoveCharge, ::testing::Values(0, 1, 2, 3));

// Validation against the trainer turns the charge off (its homes keep the state; sweep/validate.cpp): then the
// scored placements simulate exactly as bare ones.
class SimulatedOwnerMoveChargeOff : public OwnerMoveTrace {};

TEST_F(SimulatedOwnerMoveChargeOff, MatchesTheBareSchedule) {
    const PolicyScore s = score_of(v_, cost_, 2);
    sim::SimOptions o;
    o.charge_owner_moves = false;
    const sim::SimResult bare = sim::simulate(v_, placements_of(s), cost_, o);
    const sim::SimResult off = sim::simulate_score(s, v_, cost_, EvalSettings{}, o);
    EXPECT_DOUBLE_EQ(off.total_s, bare.total_s);
    EXPECT_DOUBLE_EQ(off.iterations[1].owner_move_s, 0.0);
}

// evaluate_policy charges what the summary line sums: eplb re-packs owners in iteration 0 and keeps them, so every
// column's layer time exceeds its uncharged prediction by exactly that layer's owner moves.
class OwnerMoveChargeEvaluate : public OwnerMoveTrace {};

TEST_F(OwnerMoveChargeEvaluate, ColumnsCarryTheSummaryLinesMoves) {
    EvalSettings settings;
    settings.plan_repeats = 1;
    const PolicyScore s = evaluate_policy("eplb", v_, cost_, settings, false);
    const MoveCost summary = owner_moves_of(s, cost_, kL, kTrainingStateCopies);
    ASSERT_GT(summary.experts, 0) << "eplb moves no owner on this trace: the case tests nothing";
    double charged = 0;
    for (size_t k = 0; k < s.layers.size(); ++k) {
        const LayerScore& ls = s.layers[k];
        const RouteRule rule = effective_route_rule("eplb", settings.options);
        const LayerFlow flow = compute_flow(v_.layer(ls.iteration, ls.layer), kD, kE, ls.placement, rule, &cost_);
        const CostBreakdown bare = predict_layer(model_for_layer(cost_, ls.layer), flow, ls.placement);
        const double move_s = layer_owner_moves(s.layers, k, kL, cost_, kTrainingStateCopies).seconds;
        EXPECT_DOUBLE_EQ(ls.cost.eq6_s - bare.eq6_s, move_s) << "layer score " << k;
        EXPECT_DOUBLE_EQ(ls.cost.eq8_s - bare.eq8_s, move_s) << "layer score " << k;
        EXPECT_DOUBLE_EQ(ls.cost.fastermoe_s - bare.fastermoe_s, move_s) << "layer score " << k;
        charged += ls.cost.owner_move_s;
    }
    EXPECT_DOUBLE_EQ(charged, summary.seconds);
}

}  // namespace
}  // namespace prophet
