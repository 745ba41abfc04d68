// test_one_accounting.cpp: a placement that never changes costs the same transfer under Eq 6, Eq 8, FasterMoE's
// system model and the simulator: none when it only moves owners (the move is a one-off, moves.h), the replicas'
// per-iteration Trans and Agg when it replicates.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "../balance/balance_fixtures.h"
#include "balance/cluster.h"
#include "balance/evaluate.h"
#include "balance/moves.h"
#include "balance/options.h"
#include "core/config.h"
#include "sim/simulator.h"
#include "sim/trace_view.h"
#include "trace/trace.h"

namespace prophet {
namespace {

using testing::unit_cost_model;

constexpr int kD = 4, kE = 8, kI = 3, kL = 2;

// [I][L][D][E]: device d routes 1 + (d + e + i + l) % 3 tokens to expert e
std::vector<int64_t> counts() {
    std::vector<int64_t> c;
    for (int i = 0; i < kI; ++i)
        for (int l = 0; l < kL; ++l)
            for (int d = 0; d < kD; ++d)
                for (int e = 0; e < kE; ++e) c.push_back(1 + (d + e + i + l) % 3);
    return c;
}

// every expert owned by the device after its home: a permutation of the static layout, no replicas
Placement shifted() {
    std::vector<int> owner(kE);
    for (int e = 0; e < kE; ++e) owner[e] = (e / (kE / kD) + 1) % kD;
    return Placement::make_owners(kD, owner);
}

Placement shifted_with_replica() {
    Placement p = shifted();
    p.add_replica(0, 3);
    return p;
}

struct Case {
    const char* name;
    Placement (*placement)();
    bool transfers;  // replicas: Trans and Agg every iteration
};

const Case kCases[] = {{"owners_moved", shifted, false}, {"with_replica", shifted_with_replica, true}};

class OneAccounting : public ::testing::TestWithParam<Case> {
  protected:
    std::vector<int64_t> counts_ = counts();
    TraceView view() const { return view_of(counts_, kI, kL, kD, kE); }
};

// Eq 6, Eq 8 and FasterMoE's model of every (iteration, layer): Trans and Agg are zero exactly for owner moves.
TEST_P(OneAccounting, CostModelEquationsChargeOnlyReplicas) {
    const Placement p = GetParam().placement();
    const TraceView v = view();
    for (int i = 0; i < kI; ++i)
        for (int l = 0; l < kL; ++l) {
            const CostModel m = model_for_layer(unit_cost_model(kD), l);
            const CostBreakdown c = predict_layer(m, compute_flow(v.layer(i, l), kD, kE, p, RouteRule::kOwner), p);
            const double base = 4 * c.a2a_s + 3 * c.fec_s;
            EXPECT_EQ(c.trans_s > 0, GetParam().transfers) << "iteration " << i << ", layer " << l;
            EXPECT_EQ(c.agg_s > 0, GetParam().transfers);
            EXPECT_EQ(c.eq6_s > base, GetParam().transfers);
            if (!GetParam().transfers) {
                EXPECT_DOUBLE_EQ(c.eq6_s, base);
                EXPECT_DOUBLE_EQ(c.eq8_s, base);
                EXPECT_DOUBLE_EQ(c.fastermoe_s, base);
            }
        }
}

// The simulator under each schedule: no Trans/Agg op time for owner moves (a block's MoE time is then Eq 6's),
// the replica's Trans in every iteration otherwise.
TEST_P(OneAccounting, SimulatorChargesOnlyReplicas) {
    const Placement p = GetParam().placement();
    const std::vector<std::vector<Placement>> placements(kI, std::vector<Placement>(kL, p));
    for (sim::ScheduleKind kind :
         {sim::ScheduleKind::kNone, sim::ScheduleKind::kBlockwise, sim::ScheduleKind::kFasterMoE}) {
        sim::SimOptions o;
        o.schedule = kind;
        const sim::SimResult r = sim::simulate(view(), placements, unit_cost_model(kD), o);
        for (const sim::IterationResult& it : r.iterations)
            for (const sim::BlockResult& b : it.blocks) {
                EXPECT_EQ(b.trans_s > 0, GetParam().transfers)
                    << sim::schedule_kind_name(kind) << " iteration " << it.iteration;
                EXPECT_EQ(b.agg_s > 0, GetParam().transfers);
                if (!GetParam().transfers) {
                    EXPECT_NEAR(b.moe_s, 4 * b.cost.a2a_s + 3 * b.cost.fec_s, 1e-9) << sim::schedule_kind_name(kind);
                }
            }
    }
}

INSTANTIATE_TEST_SUITE_P(Placements, OneAccounting, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The move itself: every expert changes owner once (static -> shifted), carrying weights and AdamW's m and v;
// the same placement again moves nothing.
TEST(OwnerMoves, PricedOnceWithOptimizerState) {
    const CostModel m = unit_cost_model(kD);  // expert_bytes = 2 B, trans 1 B/s
    const MoveCost first = price_owner_moves(m, Placement::make_static(kD, kE), shifted(), kTrainingStateCopies);
    EXPECT_EQ(first.experts, kE);
    EXPECT_DOUBLE_EQ(first.bytes, kE * 2.0 * 3.0);
    EXPECT_DOUBLE_EQ(first.seconds, 2 * 2.0 * 3.0);  // each device sends 2 experts and receives 2: 12 B at 1 B/s
    const MoveCost again = price_owner_moves(m, shifted(), shifted(), kTrainingStateCopies);
    EXPECT_EQ(again.experts, 0);
    EXPECT_DOUBLE_EQ(again.seconds, 0.0);
}

// An offline policy's placement moves owners in iteration 0 only; its owner-only layers pay no Trans per iteration.
TEST(OwnerMoves, OfflinePolicyMovesOnce) {
    const std::vector<int64_t> c = counts();
    const TraceView v = view_of(c, kI, kL, kD, kE);
    EvalSettings settings;
    settings.plan_repeats = 1;
    const PolicyScore s = evaluate_policy("eplb", v, unit_cost_model(kD), settings, false);
    for (const LayerScore& ls : s.layers)
        if (ls.replicas == 0) {
            EXPECT_DOUBLE_EQ(ls.cost.trans_s, 0.0);
        }
    std::vector<int> per_iteration;
    const MoveCost moves = owner_moves_of(s, unit_cost_model(kD), kL, kTrainingStateCopies, &per_iteration);
    EXPECT_EQ(per_iteration, (std::vector<int>{moves.experts, 0, 0}));
}

// The real GPT-MoE trace (../shared/data/smartmoe-gpt, GPL-3.0, read in place; skipped where absent) on hpwnv-16:
// moetuner planned on the first half of 40 snapshots and scored on all (the second half held out). Its placement
// never changes and has no replicas, so Eq 6, Eq 8 and the simulator's MoE time per block agree within 2%.
TEST(OneAccountingRealTrace, MoetunerModelsAgreeOnTheHeldOutHalf) {
    const std::string path =
        std::string(PROPHET_SOURCE_DIR) + "/../shared/data/smartmoe-gpt/gpt-moe-16gpu-e32-iter1-2491.csv.gz";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "real trace absent: " << path << " (GPL-3.0 data, never copied into the repository)";
    const Trace trace = load_trace(path);
    const TraceView v =
        view_of(trace.counts, 40, trace.meta.num_layers, trace.meta.num_devices, trace.meta.num_experts);
    // the model `prophet plan --set plan.d_model=1024 --set plan.d_ffn=4096 --set plan.seq_len=1024` prices it with
    Schema schema;
    add_cost_model_keys(schema, "");
    Config config(schema);
    for (const char* set : {"plan.d_model=1024", "plan.d_ffn=4096", "plan.seq_len=1024"}) config.apply_set(set);
    const std::string cluster_file = std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/hpwnv-16.toml";
    const CostModel cost =
        cost_model_for_trace(load_cluster_file(cluster_file), cluster_file, shape_of(trace.meta), path, config, "");
    ASSERT_EQ(cost.model.bytes_per_elem, 4);
    EvalSettings settings;
    settings.plan_repeats = 1;
    settings.profile_iterations = 20;
    const PolicyScore score = evaluate_policy("moetuner", v, cost, settings, false);
    sim::SimOptions o;
    o.schedule = sim::system_schedule("moetuner");
    const sim::SimResult r = sim::simulate_score(score, v, cost, settings, o);
    double sim_ms = 0;
    for (const sim::IterationResult& it : r.iterations)
        for (const sim::BlockResult& b : it.blocks) sim_ms += b.moe_s * 1e3 / (40.0 * v.num_layers);
    EXPECT_DOUBLE_EQ(score.mean_trans_bytes, 0.0);
    EXPECT_NEAR(score.mean_eq8_ms, score.mean_eq6_ms, 0.02 * score.mean_eq6_ms);
    EXPECT_NEAR(sim_ms, score.mean_eq6_ms, 0.02 * score.mean_eq6_ms) << "Eq 6 " << score.mean_eq6_ms << " ms";
    std::vector<int> per_iteration;
    owner_moves_of(score, cost, v.num_layers, kTrainingStateCopies, &per_iteration);
    EXPECT_GT(per_iteration[0], 0) << "moetuner moves owners once, shown apart";
    for (int i = 1; i < 40; ++i) EXPECT_EQ(per_iteration[i], 0) << "iteration " << i;
}

}  // namespace
}  // namespace prophet
