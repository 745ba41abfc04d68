// The complete step timeline (prophet train --timeline, docs/scheduler.md): every op of a step on every rank, and
// the part of the step no op covers (the remainder), computed exactly.
#include <gtest/gtest.h>

#include <set>
#include <nlohmann/json.hpp>

#include "schedule/timeline.h"
#include "train_fixtures.h"

using namespace prophet;

namespace {

// Kinds every step records on the compute lane under both schedules (the 18 the issue lists, split by direction).
const std::set<std::string> kEveryStep = {
    "data",   "embed",    "attn",    "gate",         "layout",   "pack",       "dispatch", "unpack",
    "fec",    "combine",  "head",    "head_bwd",     "gate_bwd", "attn_bwd",   "embed_bwd", "dispatch_bwd",
    "bec",    "combine_bwd", "allreduce", "optimizer", "stats"};

}  // namespace

// Exact arithmetic on a synthetic timeline: overlapping and nested compute ops count once, ops that stick out of
// the step are clipped, other lanes do not count, and an empty timeline leaves the whole step.
TEST(StepTimeline, RemainderIsTheStepMinusTheUnionOfComputeOps) {
    OpTimeline t;
    t.add(OpKind::kData, OpLane::kCompute, -1, 0, 90, 110);      // clipped to [100, 110): 10
    t.add(OpKind::kAttn, OpLane::kCompute, 0, 0, 120, 150);      // [120, 150)
    t.add(OpKind::kGate, OpLane::kCompute, 0, 0, 140, 160);      // overlaps: union [120, 160): 40
    t.add(OpKind::kFec, OpLane::kCompute, 0, 0, 125, 130);       // nested: adds nothing
    t.add(OpKind::kTrans, OpLane::kComm, 0, 1, 160, 190);        // another lane: does not cover
    t.add(OpKind::kPlan, OpLane::kPlan, 0, 0, 100, 200);         // another lane: does not cover
    t.add(OpKind::kStats, OpLane::kCompute, -1, 0, 170, 170);    // empty
    t.add(OpKind::kOptimizer, OpLane::kCompute, -1, 0, 180, 230); // clipped to [180, 200): 20
    const std::vector<OpRecord> ops = t.take();
    // step [100, 200): covered 10 + 40 + 20 = 70
    EXPECT_EQ(timeline_remainder_ns(ops, 100, 200), 30);
    EXPECT_EQ(timeline_remainder_ns(ops, 120, 160), 0);
    EXPECT_EQ(timeline_remainder_ns({}, 100, 200), 100);
    EXPECT_EQ(timeline_remainder_ns(ops, 300, 400), 100);  // nothing inside
    // touching ops tile without double counting
    OpTimeline u;
    u.add(OpKind::kEmbed, OpLane::kCompute, -1, 0, 0, 5);
    u.add(OpKind::kAttn, OpLane::kCompute, 0, 0, 5, 9);
    EXPECT_EQ(timeline_remainder_ns(u.take(), 0, 10), 1);
}

// Every op kind of the issue appears on every rank in all three schedules, and the trainer's stored remainder is the
// step minus the union of the ops it stored (recomputed here from the JSON, microseconds with 3 decimals).
TEST(StepTimeline, EveryScheduleRecordsEveryOpWithItsRemainder) {
    const int ranks = 2, steps = 3;
    for (const char* mode : {"none", "blockwise", "fastermoe"}) {
        const auto stats = run_local_stats(
            skewed_config({"balance.policy=top2", std::string("schedule.mode=") + mode}), ranks, steps,
            [](Trainer& t, int) { t.set_timeline(true); });
        for (int step = 1; step < steps; ++step) {
            const StepStats& s = stats[0][step];
            ASSERT_EQ((int)s.timelines.size(), ranks);
            ASSERT_EQ((int)s.remainder_ms.size(), ranks);
            ASSERT_EQ(stats[1][step].remainder_ms, s.remainder_ms) << "every rank holds every rank's remainder";
            for (int r = 0; r < ranks; ++r) {
                std::set<std::string> compute, any;
                std::vector<OpRecord> ops;
                for (const auto& op : nlohmann::json::parse(s.timelines[r])) {
                    const std::string kind = op[0], lane = op[1];
                    any.insert(kind);
                    if (lane != "compute") continue;
                    compute.insert(kind);
                    // back to ns for the same function; the kind does not matter for the remainder
                    ops.push_back({OpKind::kData, OpLane::kCompute, 0, 0, (int64_t)std::llround(op[4].get<double>() * 1e3),
                                   (int64_t)std::llround(op[5].get<double>() * 1e3)});
                }
                for (const std::string& kind : kEveryStep)
                    EXPECT_TRUE(compute.count(kind)) << mode << " step " << step << " rank " << r << ": no " << kind;
                // the placement and its transfers: inline under the blocking schedule, beside it block-wise; the
                // fastermoe schedule plans inline and moves beside the all-to-alls
                const std::string plan = std::string(mode) == "blockwise" ? "plan_wait" : "plan";
                EXPECT_TRUE(compute.count(plan)) << mode << ": no " << plan;
                EXPECT_TRUE(any.count("trans") && any.count("agg")) << mode << ": top2 moves experts every step";
                // the step on this rank: [its start, its start + its length) in the shared origin's microseconds;
                // its start is the earliest op (data starts the step) up to the ranks' skew in reading the clock
                int64_t start = ops.front().start_ns;
                for (const OpRecord& op : ops) start = std::min(start, op.start_ns);
                const int64_t length = (int64_t)std::llround(s.rank_step_ms[r] * 1e6);
                const double recomputed = timeline_remainder_ns(ops, start, start + length) * 1e-6;
                // JSON rounding: 1 ns per op end, and the step start read once before the data op
                EXPECT_NEAR(s.remainder_ms[r], recomputed, 2e-6 * (double)ops.size() + 0.05)
                    << mode << " step " << step << " rank " << r;
                std::printf("%s step %d rank %d: step %.3f ms, remainder %.4f ms\n", mode, step, r,
                            s.rank_step_ms[r], s.remainder_ms[r]);
                EXPECT_GE(s.remainder_ms[r], 0.0);
                EXPECT_LT(s.remainder_ms[r], s.rank_step_ms[r]);
            }
        }
    }
}
