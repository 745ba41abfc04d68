// Hand-computed timelines of tiny cases (D = 2, E = 2, unit cost model), and the schedules' structure.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "../balance/balance_fixtures.h"
#include "core/error.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/simulator.h"
#include "timeline_check.h"
#include "tiny_case.h"

using namespace prophet;
using namespace prophet::sim;
using prophet::testing::unit_cost_model;
using prophet::sim::timeline_check::Expected;
using prophet::sim::timeline_check::expect_timeline;
using prophet::sim::tiny_case::kCounts;
using prophet::sim::tiny_case::replica_e1_on_d0;
using prophet::sim::tiny_case::Tiny;

namespace {

constexpr OpPart W = OpPart::kWhole;
constexpr OpPart N = OpPart::kUnderNec;
constexpr OpPart X = OpPart::kUnderExpert;

}  // namespace

TEST(Schedule, StructureOfBothSchedules) {
    for (int L = 1; L <= 5; ++L) {
        const Schedule none = build_schedule(ScheduleKind::kNone, L, true);
        const Schedule bw = build_schedule(ScheduleKind::kBlockwise, L, true);
        EXPECT_EQ(check_schedule(none), "");
        EXPECT_EQ(check_schedule(bw), "");
        EXPECT_EQ(none.ops.size(), static_cast<size_t>(12 * L + 1));
        EXPECT_EQ(bw.ops.size(), static_cast<size_t>(14 * L - 2 + 1));  // Trans and Agg of blocks >= 1 in two parts
        for (int l = 0; l < L; ++l)
            for (OpKind k : {OpKind::kGate, OpKind::kPlan, OpKind::kDispatchA2a, OpKind::kFec, OpKind::kCombineA2a,
                             OpKind::kFnec, OpKind::kBnec, OpKind::kCombineA2aBwd, OpKind::kBec,
                             OpKind::kDispatchA2aBwd}) {
                EXPECT_GE(none.find(k, l), 0);
                EXPECT_GE(bw.find(k, l), 0);
            }
        EXPECT_GE(bw.find(OpKind::kTrans, 0, W), 0);
        EXPECT_GE(bw.find(OpKind::kAgg, 0, W), 0);
        for (int l = 1; l < L; ++l)
            for (OpKind k : {OpKind::kTrans, OpKind::kAgg}) {
                EXPECT_EQ(bw.find(k, l, W), -1);
                EXPECT_GE(bw.find(k, l, N), 0);
                EXPECT_GE(bw.find(k, l, X), 0);
            }
        EXPECT_TRUE(bw.ops[bw.find(OpKind::kPlan, 0)].next_iteration);
        EXPECT_FALSE(none.ops[none.find(OpKind::kPlan, 0)].next_iteration);
        // the optimizer waits for every Agg
        const ScheduleOp& opt = bw.ops.back();
        ASSERT_EQ(opt.kind, OpKind::kOptimizer);
        for (size_t i = 0; i < bw.ops.size(); ++i) {
            if (bw.ops[i].kind != OpKind::kAgg) continue;
            EXPECT_NE(std::find(opt.deps.begin(), opt.deps.end(), static_cast<int>(i)), opt.deps.end());
        }
    }
    EXPECT_EQ(build_schedule(ScheduleKind::kNone, 2, false).ops.size(), 24u);
}

TEST(Engine, CollectiveRunsFromTheLastDeviceToOneEnd) {
    // op 0: per-device compute (1 s on device 0, 3 s on device 1); op 1: collective after it (2 s);
    // op 2: compute on device 0 after op 1
    std::vector<ScheduleOp> ops(3);
    ops[0].kind = OpKind::kFec;
    ops[1].kind = OpKind::kCombineA2a;
    ops[1].resource = Resource::kComm;
    ops[1].collective = true;
    ops[1].deps = {0};
    ops[2].kind = OpKind::kFnec;
    ops[2].deps = {1};
    const EngineTimes t = run_engine(ops, 2, {1, 3, 2, 2, 0.5, 0.5});
    EXPECT_EQ(t.end[0], 1.0);
    EXPECT_EQ(t.end[1], 3.0);
    EXPECT_EQ(t.start[2], 3.0);
    EXPECT_EQ(t.start[3], 3.0);
    EXPECT_EQ(t.end[2], 5.0);
    EXPECT_EQ(t.end[3], 5.0);
    EXPECT_EQ(t.start[4], 5.0);
    EXPECT_EQ(t.end[5], 5.5);
}

// none, L = 1, e1 replicated on device 0: every op serialized (Eq 6), FEC 9 s / 2 s straggles on device 0.
TEST(Timeline, NoneOneBlockByHand) {
    Tiny tiny(1);
    const CostModel m = unit_cost_model(2);
    SimOptions o;
    o.schedule = ScheduleKind::kNone;
    o.gate_s = 0.5;
    o.plan_s = 0.25;
    o.include_optimizer = true;
    o.optimizer_s = 1.0;
    const SimResult r = simulate(tiny.view, {{replica_e1_on_d0()}}, m, o);
    expect_timeline(r, {
                           {OpKind::kGate, 0, W, {{0, 0.5}}},
                           {OpKind::kPlan, 0, W, {{0.5, 0.75}}},
                           {OpKind::kTrans, 0, W, {{0.75, 1.75}}},
                           {OpKind::kDispatchA2a, 0, W, {{1.75, 2.75}}},
                           {OpKind::kFec, 0, W, {{2.75, 11.75}, {2.75, 4.75}}},
                           {OpKind::kCombineA2a, 0, W, {{11.75, 12.75}}},
                           {OpKind::kFnec, 0, W, {{12.75, 13.75}}},
                           {OpKind::kBnec, 0, W, {{13.75, 15.75}}},
                           {OpKind::kCombineA2aBwd, 0, W, {{15.75, 16.75}}},
                           {OpKind::kBec, 0, W, {{16.75, 34.75}, {16.75, 20.75}}},
                           {OpKind::kDispatchA2aBwd, 0, W, {{34.75, 35.75}}},
                           {OpKind::kAgg, 0, W, {{35.75, 36.75}}},
                           {OpKind::kOptimizer, -1, W, {{36.75, 37.75}}},
                       });
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 37.75);
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 6.0);  // four all-to-alls, Trans, Agg: nothing computes beside them
    EXPECT_DOUBLE_EQ(it.compute_s, 31.75);
    EXPECT_DOUBLE_EQ(it.blocks[0].moe_s, 4 * 1.0 + 3 * 9.0 + 1.0 + 1.0);  // Eq 6
    EXPECT_DOUBLE_EQ(it.blocks[0].cost.eq6_s, 33.0);
    EXPECT_DOUBLE_EQ(it.blocks[0].fec_s, 9.0);
    EXPECT_DOUBLE_EQ(it.blocks[0].max_mean_load, 9.0 / 5.5);
    EXPECT_DOUBLE_EQ(it.kind_busy_s[static_cast<int>(OpKind::kBec)], 18.0);
    EXPECT_DOUBLE_EQ(it.kind_exposed_s[static_cast<int>(OpKind::kTrans)], 1.0);
}

// none, L = 2: block 0 static (a2a 5 s, FEC {4, 7} s, no Trans), block 1 with e1 on device 0.
TEST(Timeline, NoneTwoBlocksByHand) {
    Tiny tiny(2);
    const CostModel m = unit_cost_model(2);
    SimOptions o;
    o.schedule = ScheduleKind::kNone;
    const SimResult r = simulate(tiny.view, {{Placement::make_static(2, 2), replica_e1_on_d0()}}, m, o);
    expect_timeline(r, {
                           {OpKind::kGate, 0, W, {{0, 0}}},
                           {OpKind::kPlan, 0, W, {{0, 0}}},
                           {OpKind::kTrans, 0, W, {{0, 0}}},
                           {OpKind::kDispatchA2a, 0, W, {{0, 5}}},
                           {OpKind::kFec, 0, W, {{5, 9}, {5, 12}}},
                           {OpKind::kCombineA2a, 0, W, {{12, 17}}},
                           {OpKind::kFnec, 0, W, {{17, 18}}},
                           {OpKind::kGate, 1, W, {{18, 18}}},
                           {OpKind::kPlan, 1, W, {{18, 18}}},
                           {OpKind::kTrans, 1, W, {{18, 19}}},
                           {OpKind::kDispatchA2a, 1, W, {{19, 20}}},
                           {OpKind::kFec, 1, W, {{20, 29}, {20, 22}}},
                           {OpKind::kCombineA2a, 1, W, {{29, 30}}},
                           {OpKind::kFnec, 1, W, {{30, 31}}},
                           {OpKind::kBnec, 1, W, {{31, 33}}},
                           {OpKind::kCombineA2aBwd, 1, W, {{33, 34}}},
                           {OpKind::kBec, 1, W, {{34, 52}, {34, 38}}},
                           {OpKind::kDispatchA2aBwd, 1, W, {{52, 53}}},
                           {OpKind::kAgg, 1, W, {{53, 54}}},
                           {OpKind::kBnec, 0, W, {{54, 56}}},
                           {OpKind::kCombineA2aBwd, 0, W, {{56, 61}}},
                           {OpKind::kBec, 0, W, {{61, 69}, {61, 75}}},
                           {OpKind::kDispatchA2aBwd, 0, W, {{75, 80}}},
                           {OpKind::kAgg, 0, W, {{80, 80}}},
                       });
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 80.0);
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 4 * 5.0 + 4 * 1.0 + 1.0 + 1.0);
    EXPECT_DOUBLE_EQ(it.blocks[0].moe_s, 4 * 5.0 + 3 * 7.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].moe_s, 33.0);
}

// blockwise, L = 2, both blocks with e1 on device 0, time split. Trans(1) = 1 s fits FNEC(0) = 1 s and Agg(1) = 1 s
// fits BNEC(0) = 2 s: fully hidden. Plan(j+1) of block 1 sits inside dispatch(1); Plan of block 0 beside Trans(0).
TEST(Timeline, BlockwiseHiddenByHand) {
    Tiny tiny(2);
    const CostModel m = unit_cost_model(2);
    SimOptions o;
    o.schedule = ScheduleKind::kBlockwise;
    o.split_rule = SplitRule::kTime;
    o.plan_s = 0.5;
    o.include_optimizer = true;
    o.optimizer_s = 1.0;
    const SimResult r = simulate(tiny.view, {{replica_e1_on_d0(), replica_e1_on_d0()}}, m, o);
    expect_timeline(r, {
                           {OpKind::kTrans, 0, W, {{0, 1}}},
                           {OpKind::kGate, 0, W, {{0, 0}}},
                           {OpKind::kPlan, 0, W, {{0, 0.5}}},
                           {OpKind::kDispatchA2a, 0, W, {{1, 2}}},
                           {OpKind::kTrans, 1, X, {{2, 2}}},
                           {OpKind::kFec, 0, W, {{2, 11}, {2, 4}}},
                           {OpKind::kCombineA2a, 0, W, {{11, 12}}},
                           {OpKind::kTrans, 1, N, {{12, 13}}},
                           {OpKind::kFnec, 0, W, {{12, 13}}},
                           {OpKind::kGate, 1, W, {{13, 13}}},
                           {OpKind::kPlan, 1, W, {{13, 13.5}}},
                           {OpKind::kDispatchA2a, 1, W, {{13, 14}}},
                           {OpKind::kFec, 1, W, {{14, 23}, {14, 16}}},
                           {OpKind::kCombineA2a, 1, W, {{23, 24}}},
                           {OpKind::kFnec, 1, W, {{24, 25}}},
                           {OpKind::kBnec, 1, W, {{25, 27}}},
                           {OpKind::kCombineA2aBwd, 1, W, {{27, 28}}},
                           {OpKind::kBec, 1, W, {{28, 46}, {28, 32}}},
                           {OpKind::kDispatchA2aBwd, 1, W, {{46, 47}}},
                           {OpKind::kAgg, 1, N, {{47, 48}}},
                           {OpKind::kBnec, 0, W, {{47, 49}}},
                           {OpKind::kCombineA2aBwd, 0, W, {{49, 50}}},
                           {OpKind::kAgg, 1, X, {{50, 50}}},
                           {OpKind::kBec, 0, W, {{50, 68}, {50, 54}}},
                           {OpKind::kDispatchA2aBwd, 0, W, {{68, 69}}},
                           {OpKind::kAgg, 0, W, {{69, 70}}},
                           {OpKind::kOptimizer, -1, W, {{70, 71}}},
                       });
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 71.0);
    // exposed: Trans(0) 0.5 (Plan(0) covers half), 8 all-to-alls of 1 s less 0.5 s of Plan(1) beside dispatch(1),
    // Agg(0) 1
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 0.5 + 7.5 + 1.0);
    EXPECT_DOUBLE_EQ(it.compute_s, 71.0 - 9.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].exposed_trans_s, 0.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].exposed_agg_s, 0.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].moe_s, it.blocks[1].cost.eq8_s);  // 4 * 1 + 3 * 9
    EXPECT_DOUBLE_EQ(it.blocks[1].cost.eq8_s, 31.0);
    EXPECT_DOUBLE_EQ(it.blocks[0].exposed_trans_s, 0.5);
    EXPECT_DOUBLE_EQ(it.blocks[0].exposed_agg_s, 1.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].trans_under_nec_s, 1.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].trans_under_expert_s, 0.0);
}

// blockwise, L = 2, Trans = Agg = 20 s (bandwidth 0.05 B/s): longer than FEC + FNEC = 10 s and BEC + BNEC = 20 s.
// Time split: one 20 s expert fits neither FNEC (1 s) nor BNEC (2 s), so it all goes beside FEC / BEC:
// exposed Trans(1) = 20 - 9 = 11 s (the paper's Eq 8 credit says 10: the whole-expert split wastes FNEC),
// Agg(1) = 20 - 18 = 2 s. The cost model's Eq 8 credits the same whole-expert split, so it predicts 11 and 2.
TEST(Timeline, BlockwiseExposedRemainderByHand) {
    Tiny tiny(2);
    CostModel m = unit_cost_model(2);
    m.cluster.trans_bytes_per_s = 0.05;
    m.cluster.agg_bytes_per_s = 0.05;
    SimOptions o;
    o.schedule = ScheduleKind::kBlockwise;
    o.split_rule = SplitRule::kTime;
    const SimResult r = simulate(tiny.view, {{replica_e1_on_d0(), replica_e1_on_d0()}}, m, o);
    expect_timeline(r, {
                           {OpKind::kTrans, 0, W, {{0, 20}}},
                           {OpKind::kGate, 0, W, {{0, 0}}},
                           {OpKind::kPlan, 0, W, {{0, 0}}},
                           {OpKind::kDispatchA2a, 0, W, {{20, 21}}},
                           {OpKind::kTrans, 1, X, {{21, 41}}},
                           {OpKind::kFec, 0, W, {{21, 30}, {21, 23}}},
                           {OpKind::kCombineA2a, 0, W, {{41, 42}}},
                           {OpKind::kTrans, 1, N, {{42, 42}}},
                           {OpKind::kFnec, 0, W, {{42, 43}}},
                           {OpKind::kGate, 1, W, {{43, 43}}},
                           {OpKind::kPlan, 1, W, {{43, 43}}},
                           {OpKind::kDispatchA2a, 1, W, {{43, 44}}},
                           {OpKind::kFec, 1, W, {{44, 53}, {44, 46}}},
                           {OpKind::kCombineA2a, 1, W, {{53, 54}}},
                           {OpKind::kFnec, 1, W, {{54, 55}}},
                           {OpKind::kBnec, 1, W, {{55, 57}}},
                           {OpKind::kCombineA2aBwd, 1, W, {{57, 58}}},
                           {OpKind::kBec, 1, W, {{58, 76}, {58, 62}}},
                           {OpKind::kDispatchA2aBwd, 1, W, {{76, 77}}},
                           {OpKind::kAgg, 1, N, {{77, 77}}},
                           {OpKind::kBnec, 0, W, {{77, 79}}},
                           {OpKind::kCombineA2aBwd, 0, W, {{79, 80}}},
                           {OpKind::kAgg, 1, X, {{80, 100}}},
                           {OpKind::kBec, 0, W, {{80, 98}, {80, 84}}},
                           {OpKind::kDispatchA2aBwd, 0, W, {{100, 101}}},
                           {OpKind::kAgg, 0, W, {{101, 121}}},
                       });
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 121.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].exposed_trans_s, 11.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].exposed_agg_s, 2.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].cost.exposed_trans_s, 11.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].cost.exposed_agg_s, 2.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].cost.exposed_trans_chunked_s, 10.0);  // the paper's credit (chunks)
    EXPECT_DOUBLE_EQ(it.blocks[1].cost.exposed_agg_chunked_s, 0.0);
    EXPECT_DOUBLE_EQ(it.blocks[0].exposed_trans_s, 20.0);  // the first block's Trans has nothing to hide under
    EXPECT_DOUBLE_EQ(it.blocks[0].exposed_agg_s, 20.0);    // nor the last Agg
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 20 + 11 + 2 + 20 + 8 * 1.0);
    EXPECT_DOUBLE_EQ(it.compute_s, 60.0);
}

// Block 0 in the same case: Trans(0) opens the iteration whole (nothing computes before it) and Agg(0) closes the
// backward whole, so 20 s of each is exposed. The cost model's Eq 8 for layer 0 (CostModel::first_block) credits
// no window either, under both splits: block 0's predicted exposure and MoE time are what the schedule gives
// (before the rule, Eq 8 credited layer 0 its own FNEC/FEC windows: 11 s and 2 s exposed).
TEST(Timeline, FirstBlockEq8AgreesWithTheSchedule) {
    Tiny tiny(2);
    CostModel m = unit_cost_model(2);
    m.cluster.trans_bytes_per_s = 0.05;
    m.cluster.agg_bytes_per_s = 0.05;
    for (SplitRule rule : {SplitRule::kTime, SplitRule::kFluid}) {
        SimOptions o;
        o.schedule = ScheduleKind::kBlockwise;
        o.split_rule = rule;
        const SimResult r = simulate(tiny.view, {{replica_e1_on_d0(), replica_e1_on_d0()}}, m, o);
        const BlockResult& b = r.iterations[0].blocks[0];
        const std::string tag = split_rule_name(rule);
        EXPECT_DOUBLE_EQ(b.exposed_trans_s, 20.0) << tag;
        EXPECT_DOUBLE_EQ(b.exposed_agg_s, 20.0) << tag;
        EXPECT_DOUBLE_EQ(b.cost.exposed_trans_s, b.exposed_trans_s) << tag;
        EXPECT_DOUBLE_EQ(b.cost.exposed_agg_s, b.exposed_agg_s) << tag;
        EXPECT_DOUBLE_EQ(b.cost.exposed_trans_chunked_s, 20.0) << tag;  // chunks have no window there either
        EXPECT_DOUBLE_EQ(b.cost.exposed_agg_chunked_s, 20.0) << tag;
        EXPECT_DOUBLE_EQ(b.moe_s, b.cost.eq8_s) << tag;  // 4 all-to-alls + FEC 9 + BEC 18 + 20 + 20 = 71
        EXPECT_DOUBLE_EQ(b.cost.eq8_s, 71.0) << tag;
        EXPECT_DOUBLE_EQ(b.cost.eq8_s, b.cost.eq6_s) << tag;
    }
    // the same layer as any later block keeps the per-layer windows (11 s and 2 s exposed, as block 1 above;
    // receivers counted as the simulator counts them)
    m.trans_receivers = TransReceivers::kReplicaHolders;
    Placement p = replica_e1_on_d0();
    const CostBreakdown later = predict_layer(model_for_layer(m, 1), compute_flow(kCounts.data(), 2, 2, p,
                                                                                  RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(later.exposed_trans_s, 11.0);
    EXPECT_DOUBLE_EQ(later.exposed_agg_s, 2.0);
}

// The same case with the fluid split: min(20, FNEC 1) beside FNEC, 19 s beside FEC; Agg 2 s beside BNEC, 18 s
// beside BEC. Exposed Trans(1) = 20 - 9 - 1 = 10 s and Agg(1) = 0: Eq 8's terms exactly.
TEST(Timeline, BlockwiseFluidSplitMatchesEq8ByHand) {
    Tiny tiny(2);
    CostModel m = unit_cost_model(2);
    m.cluster.trans_bytes_per_s = 0.05;
    m.cluster.agg_bytes_per_s = 0.05;
    SimOptions o;
    o.schedule = ScheduleKind::kBlockwise;
    o.split_rule = SplitRule::kFluid;
    const SimResult r = simulate(tiny.view, {{replica_e1_on_d0(), replica_e1_on_d0()}}, m, o);
    expect_timeline(r, {
                           {OpKind::kTrans, 0, W, {{0, 20}}},
                           {OpKind::kGate, 0, W, {{0, 0}}},
                           {OpKind::kPlan, 0, W, {{0, 0}}},
                           {OpKind::kDispatchA2a, 0, W, {{20, 21}}},
                           {OpKind::kTrans, 1, X, {{21, 40}}},
                           {OpKind::kFec, 0, W, {{21, 30}, {21, 23}}},
                           {OpKind::kCombineA2a, 0, W, {{40, 41}}},
                           {OpKind::kTrans, 1, N, {{41, 42}}},
                           {OpKind::kFnec, 0, W, {{41, 42}}},
                           {OpKind::kGate, 1, W, {{42, 42}}},
                           {OpKind::kPlan, 1, W, {{42, 42}}},
                           {OpKind::kDispatchA2a, 1, W, {{42, 43}}},
                           {OpKind::kFec, 1, W, {{43, 52}, {43, 45}}},
                           {OpKind::kCombineA2a, 1, W, {{52, 53}}},
                           {OpKind::kFnec, 1, W, {{53, 54}}},
                           {OpKind::kBnec, 1, W, {{54, 56}}},
                           {OpKind::kCombineA2aBwd, 1, W, {{56, 57}}},
                           {OpKind::kBec, 1, W, {{57, 75}, {57, 61}}},
                           {OpKind::kDispatchA2aBwd, 1, W, {{75, 76}}},
                           {OpKind::kAgg, 1, N, {{76, 78}}},
                           {OpKind::kBnec, 0, W, {{76, 78}}},
                           {OpKind::kCombineA2aBwd, 0, W, {{78, 79}}},
                           {OpKind::kAgg, 1, X, {{79, 97}}},
                           {OpKind::kBec, 0, W, {{79, 97}, {79, 83}}},
                           {OpKind::kDispatchA2aBwd, 0, W, {{97, 98}}},
                           {OpKind::kAgg, 0, W, {{98, 118}}},
                       });
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 118.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].exposed_trans_s, 10.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].exposed_agg_s, 0.0);
    EXPECT_DOUBLE_EQ(it.blocks[1].moe_s, it.blocks[1].cost.eq8_s);  // 4 + 27 + 10
}

// Two replicated experts (e0 on device 1, e1 on device 0: every token local, H = {8, 3}, no all-to-all traffic),
// Trans 10 s per expert, FNEC 4 s, FEC 8 s. Eq 8: 20 - 8 - 4 = 8 s exposed.
//   time:  neither expert fits FNEC: 20 s beside FEC, 12 s exposed
//   half:  e0 beside FNEC (10 - 4 = 6 exposed), e1 beside FEC (10 - 8 = 2): 8
//   fluid: 4 s beside FNEC, 16 s beside FEC: 8
// With FNEC 12 s the time rule puts e0 beside FNEC (10 <= 12) and e1 beside FEC: 2 s exposed (Eq 8: 0).
TEST(Timeline, SplitRulesByHand) {
    Tiny tiny(2);
    CostModel m = unit_cost_model(2);
    m.trans_receivers = TransReceivers::kReplicaHolders;  // split_transfer is called directly: the bytes that move
    m.cluster.trans_bytes_per_s = 0.1;
    m.cluster.fnec_s = 4.0;
    m.cluster.bnec_s = 8.0;
    Placement p = Placement::make_static(2, 2);
    p.add_replica(0, 1);
    p.add_replica(1, 0);
    const std::vector<std::vector<Placement>> placements = {{p, p}};
    const LayerFlow flow = compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner);
    EXPECT_EQ(flow.computed, (std::vector<int64_t>{8, 3}));

    const TransferSplit by_time = split_transfer(m, flow, p, SplitRule::kTime, 4.0, false);
    EXPECT_DOUBLE_EQ(by_time.whole_s, 20.0);
    EXPECT_DOUBLE_EQ(by_time.under_nec_s, 0.0);
    EXPECT_DOUBLE_EQ(by_time.under_expert_s, 20.0);
    EXPECT_EQ(by_time.nec_experts, (std::vector<uint8_t>{0, 0}));
    const TransferSplit by_half = split_transfer(m, flow, p, SplitRule::kHalf, 4.0, false);
    EXPECT_EQ(by_half.nec_experts, (std::vector<uint8_t>{1, 0}));
    EXPECT_DOUBLE_EQ(by_half.under_nec_s, 10.0);
    const TransferSplit fluid = split_transfer(m, flow, p, SplitRule::kFluid, 4.0, false);
    EXPECT_DOUBLE_EQ(fluid.under_nec_s, 4.0);
    EXPECT_DOUBLE_EQ(fluid.under_expert_s, 16.0);
    const TransferSplit agg = split_transfer(m, flow, p, SplitRule::kTime, 8.0, true);  // 1 s each, both fit BNEC
    EXPECT_EQ(agg.nec_experts, (std::vector<uint8_t>{1, 1}));
    EXPECT_DOUBLE_EQ(agg.under_nec_s, 2.0);

    SimOptions o;
    o.schedule = ScheduleKind::kBlockwise;
    // the block's predicted Eq 8: whole experts first-fit (the time rule) unless the split is fluid (chunks)
    for (auto [rule, exposed, predicted] : std::vector<std::tuple<SplitRule, double, double>>{
             {SplitRule::kTime, 12.0, 12.0}, {SplitRule::kHalf, 8.0, 12.0}, {SplitRule::kFluid, 8.0, 8.0}}) {
        o.split_rule = rule;
        const SimResult r = simulate(tiny.view, placements, m, o);
        EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].exposed_trans_s, exposed) << split_rule_name(rule);
        EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].exposed_agg_s, 0.0) << split_rule_name(rule);
        EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].cost.exposed_trans_s, predicted) << split_rule_name(rule);
        EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].cost.exposed_trans_chunked_s, 8.0);
    }
    m.cluster.fnec_s = 12.0;
    o.split_rule = SplitRule::kTime;
    const SimResult r = simulate(tiny.view, placements, m, o);
    EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].trans_under_nec_s, 10.0);
    EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].trans_under_expert_s, 10.0);
    EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].exposed_trans_s, 2.0);
    EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].cost.exposed_trans_s, 2.0);  // Eq 8 with the same whole-expert split
    EXPECT_DOUBLE_EQ(r.iterations[0].blocks[1].cost.exposed_trans_chunked_s, 0.0);
}

TEST(Schedule, ParsesNames) {
    EXPECT_EQ(parse_schedule_kind("none"), ScheduleKind::kNone);
    EXPECT_EQ(parse_schedule_kind("blockwise"), ScheduleKind::kBlockwise);
    EXPECT_THROW(parse_schedule_kind("fast"), prophet::Error);
    EXPECT_EQ(parse_split_rule("time"), SplitRule::kTime);
    EXPECT_EQ(parse_split_rule("half"), SplitRule::kHalf);
    EXPECT_EQ(parse_split_rule("fluid"), SplitRule::kFluid);
    EXPECT_THROW(parse_split_rule("third"), prophet::Error);
}
