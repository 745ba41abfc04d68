// FasterMoE's own schedule (ScheduleKind::kFasterMoE): its op list and stream, and hand-computed timelines on the
// tiny D = 2, E = 2 case with Trans / Agg longer and shorter than the all-to-all they run beside.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "../balance/balance_fixtures.h"
#include "core/error.h"
#include "sim/schedule.h"
#include "sim/simulator.h"
#include "timeline_check.h"
#include "tiny_case.h"

using namespace prophet;
using namespace prophet::sim;
using prophet::testing::unit_cost_model;
using prophet::sim::timeline_check::expect_timeline;
using prophet::sim::tiny_case::replica_e1_on_d0;
using prophet::sim::tiny_case::Tiny;

namespace {

constexpr OpPart W = OpPart::kWhole;

bool depends_on(const Schedule& s, int op, int dep) {
    const std::vector<int>& deps = s.ops[static_cast<size_t>(op)].deps;
    return std::find(deps.begin(), deps.end(), dep) != deps.end();
}

// The unit cost model with Trans and Agg at other speeds: e1's 2 B replica to 1 holder, Eq 4 over D = 2 devices,
// takes 1 s / trans_speed (Agg likewise).
CostModel unit_model_with_transfers(double trans_speed, double agg_speed) {
    CostModel m = unit_cost_model(2);
    m.cluster.trans_bytes_per_s *= trans_speed;
    m.cluster.agg_bytes_per_s *= agg_speed;
    return m;
}

}  // namespace

TEST(Schedule, FasterMoEStructure) {
    for (int L = 1; L <= 4; ++L)
        for (bool dense : {false, true}) {
            IterationOps x;
            x.optimizer = true;
            x.dense = dense;
            x.grad_bytes.assign(static_cast<size_t>(L) + 2, 1.0);
            const Schedule s = build_schedule(ScheduleKind::kFasterMoE, L, x);
            EXPECT_EQ(check_schedule(s), "");
            if (!dense) {
                EXPECT_EQ(s.ops.size(), static_cast<size_t>(12 * L + 1));
            }  // as none: whole Trans / Agg
            for (int l = 0; l < L; ++l) {
                const int plan = s.find(OpKind::kPlan, l), trans = s.find(OpKind::kTrans, l);
                const int disp = s.find(OpKind::kDispatchA2a, l), fec = s.find(OpKind::kFec, l);
                const int bec = s.find(OpKind::kBec, l), agg = s.find(OpKind::kAgg, l);
                const int db = s.find(OpKind::kDispatchA2aBwd, l);
                ASSERT_GE(trans, 0);
                ASSERT_GE(agg, 0);
                EXPECT_FALSE(s.ops[plan].next_iteration);  // synchronous, on the current counts
                EXPECT_EQ(s.ops[trans].resource, Resource::kShadowComm);
                EXPECT_EQ(s.ops[agg].resource, Resource::kShadowComm);
                EXPECT_EQ(s.ops[disp].resource, Resource::kComm);
                EXPECT_TRUE(depends_on(s, trans, plan));
                EXPECT_TRUE(depends_on(s, disp, plan));
                EXPECT_FALSE(depends_on(s, disp, trans));  // beside it, not after it
                EXPECT_TRUE(depends_on(s, fec, disp) && depends_on(s, fec, trans));
                EXPECT_TRUE(depends_on(s, agg, bec) && depends_on(s, db, bec));
                // the op after the block's backward waits for both the all-to-all and the reduce
                const int next = dense ? s.find(OpKind::kAttnBwd, l) : l > 0 ? s.find(OpKind::kBnec, l - 1) : -1;
                if (next >= 0) {
                    EXPECT_TRUE(depends_on(s, next, db) && depends_on(s, next, agg)) << L << " " << l;
                }
            }
            EXPECT_TRUE(depends_on(s, static_cast<int>(s.ops.size()) - 1, s.find(OpKind::kAgg, 0)));  // optimizer
        }
    const std::string text = schedule_to_text(build_schedule(ScheduleKind::kFasterMoE, 1, false));
    EXPECT_NE(text.find("shadow  trans[0]"), std::string::npos) << text;
    EXPECT_NE(text.find("shadow  agg[0]"), std::string::npos) << text;
}

// check_schedule takes a comm op on the shadow stream, never a compute op.
TEST(Schedule, ShadowStreamHoldsOnlyCommOps) {
    Schedule s = build_schedule(ScheduleKind::kNone, 1, false);
    s.ops[static_cast<size_t>(s.find(OpKind::kTrans, 0))].resource = Resource::kShadowComm;
    EXPECT_EQ(check_schedule(s), "");
    Schedule bad = build_schedule(ScheduleKind::kFasterMoE, 1, false);
    ScheduleOp& fec = bad.ops[static_cast<size_t>(bad.find(OpKind::kFec, 0))];
    fec.resource = Resource::kShadowComm;
    EXPECT_NE(check_schedule(bad).find("wrong stream"), std::string::npos) << check_schedule(bad);
    fec.collective = true;  // a collective compute op is still refused
    EXPECT_NE(check_schedule(bad), "");
}

TEST(Schedule, ParsesFasterMoE) {
    EXPECT_EQ(parse_schedule_kind("fastermoe"), ScheduleKind::kFasterMoE);
    EXPECT_STREQ(schedule_kind_name(ScheduleKind::kFasterMoE), "fastermoe");
    EXPECT_STREQ(schedule_kind_name(ScheduleKind::kBlockwise), "blockwise");
    try {
        parse_schedule_kind("faster");
        ADD_FAILURE() << "accepted faster";
    } catch (const prophet::Error& e) {
        EXPECT_NE(std::string(e.what()).find("fastermoe"), std::string::npos) << e.what();  // names the allowed
    }
}

// L = 1, e1 replicated on device 0 (a2a 1 s, FEC {9, 2} s): Trans 4 s beside the 1 s dispatch (3 s exposed, FEC
// waits for it), Agg 0.25 s hidden under the 1 s dispatch gradient's all-to-all; the optimizer waits for both.
TEST(Timeline, FasterMoETransLongerThanA2aByHand) {
    Tiny tiny(1);
    SimOptions o;
    o.schedule = ScheduleKind::kFasterMoE;
    o.gate_s = 0.5;
    o.plan_s = 0.25;
    o.include_optimizer = true;
    o.optimizer_s = 1.0;
    const SimResult r = simulate(tiny.view, {{replica_e1_on_d0()}}, unit_model_with_transfers(0.25, 4.0), o);
    expect_timeline(r, {
                           {OpKind::kGate, 0, W, {{0, 0.5}}},
                           {OpKind::kPlan, 0, W, {{0.5, 0.75}}},
                           {OpKind::kTrans, 0, W, {{0.75, 4.75}}},
                           {OpKind::kDispatchA2a, 0, W, {{0.75, 1.75}}},
                           {OpKind::kFec, 0, W, {{4.75, 13.75}, {4.75, 6.75}}},
                           {OpKind::kCombineA2a, 0, W, {{13.75, 14.75}}},
                           {OpKind::kFnec, 0, W, {{14.75, 15.75}}},
                           {OpKind::kBnec, 0, W, {{15.75, 17.75}}},
                           {OpKind::kCombineA2aBwd, 0, W, {{17.75, 18.75}}},
                           {OpKind::kBec, 0, W, {{18.75, 36.75}, {18.75, 22.75}}},
                           {OpKind::kDispatchA2aBwd, 0, W, {{36.75, 37.75}}},
                           {OpKind::kAgg, 0, W, {{36.75, 37.0}}},
                           {OpKind::kOptimizer, -1, W, {{37.75, 38.75}}},
                       });
    const IterationResult& it = r.iterations[0];
    const BlockResult& b = it.blocks[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 38.75);
    EXPECT_DOUBLE_EQ(b.trans_s, 4.0);
    EXPECT_DOUBLE_EQ(b.agg_s, 0.25);
    EXPECT_DOUBLE_EQ(b.exposed_trans_s, 3.0);  // Trans - A2A
    EXPECT_DOUBLE_EQ(b.exposed_agg_s, 0.0);
    EXPECT_DOUBLE_EQ(b.moe_s, 4 * 1.0 + 3 * 9.0 + 3.0);
    EXPECT_DOUBLE_EQ(b.cost.fastermoe_s, b.moe_s);
    // comm union: [0.75, 4.75] + three 1 s all-to-alls; Agg lies inside the last
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 7.0);
    EXPECT_DOUBLE_EQ(it.compute_s, 31.75);
    EXPECT_DOUBLE_EQ(it.kind_exposed_s[static_cast<int>(OpKind::kTrans)], 3.0);
    EXPECT_DOUBLE_EQ(it.kind_exposed_s[static_cast<int>(OpKind::kDispatchA2a)], 1.0);
    EXPECT_DOUBLE_EQ(it.kind_exposed_s[static_cast<int>(OpKind::kAgg)], 0.0);
}

// L = 2, both blocks with e1 on device 0: Trans 0.25 s hidden under each dispatch, Agg 4 s beside each dispatch
// gradient's all-to-all (3 s exposed): block 0's backward waits for block 1's Agg.
TEST(Timeline, FasterMoEAggLongerThanA2aByHand) {
    Tiny tiny(2);
    SimOptions o;
    o.schedule = ScheduleKind::kFasterMoE;
    const SimResult r =
        simulate(tiny.view, {{replica_e1_on_d0(), replica_e1_on_d0()}}, unit_model_with_transfers(4.0, 0.25), o);
    expect_timeline(r, {
                           {OpKind::kGate, 0, W, {{0, 0}}},
                           {OpKind::kPlan, 0, W, {{0, 0}}},
                           {OpKind::kTrans, 0, W, {{0, 0.25}}},
                           {OpKind::kDispatchA2a, 0, W, {{0, 1}}},
                           {OpKind::kFec, 0, W, {{1, 10}, {1, 3}}},
                           {OpKind::kCombineA2a, 0, W, {{10, 11}}},
                           {OpKind::kFnec, 0, W, {{11, 12}}},
                           {OpKind::kGate, 1, W, {{12, 12}}},
                           {OpKind::kPlan, 1, W, {{12, 12}}},
                           {OpKind::kTrans, 1, W, {{12, 12.25}}},
                           {OpKind::kDispatchA2a, 1, W, {{12, 13}}},
                           {OpKind::kFec, 1, W, {{13, 22}, {13, 15}}},
                           {OpKind::kCombineA2a, 1, W, {{22, 23}}},
                           {OpKind::kFnec, 1, W, {{23, 24}}},
                           {OpKind::kBnec, 1, W, {{24, 26}}},
                           {OpKind::kCombineA2aBwd, 1, W, {{26, 27}}},
                           {OpKind::kBec, 1, W, {{27, 45}, {27, 31}}},
                           {OpKind::kDispatchA2aBwd, 1, W, {{45, 46}}},
                           {OpKind::kAgg, 1, W, {{45, 49}}},
                           {OpKind::kBnec, 0, W, {{49, 51}}},
                           {OpKind::kCombineA2aBwd, 0, W, {{51, 52}}},
                           {OpKind::kBec, 0, W, {{52, 70}, {52, 56}}},
                           {OpKind::kDispatchA2aBwd, 0, W, {{70, 71}}},
                           {OpKind::kAgg, 0, W, {{70, 74}}},
                       });
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 74.0);
    for (const BlockResult& b : it.blocks) {
        EXPECT_DOUBLE_EQ(b.exposed_trans_s, 0.0);
        EXPECT_DOUBLE_EQ(b.exposed_agg_s, 3.0);  // Agg - A2A
        EXPECT_DOUBLE_EQ(b.moe_s, 4 * 1.0 + 3 * 9.0 + 3.0);
        EXPECT_DOUBLE_EQ(b.cost.fastermoe_s, b.moe_s);
    }
    EXPECT_DOUBLE_EQ(it.kind_exposed_s[static_cast<int>(OpKind::kAgg)], 6.0);
    EXPECT_DOUBLE_EQ(it.kind_exposed_s[static_cast<int>(OpKind::kTrans)], 0.0);
}
