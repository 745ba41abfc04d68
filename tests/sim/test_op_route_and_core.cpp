// Two terms of the per-op model checked on hand-built steps (sim/op_model.h):
//   - the all-to-alls' bytes and messages come from the routing rule's exact route (compute_flow), as the trainer
//     routes: under the owner rule a replica's holder keeps its own tokens, so it sends none of them; the combine
//     returns what the dispatch brought; an empty part is no message over the emulated link;
//   - with one core per rank, a Trans/Agg on the communication lane (block-wise) charges its rank's copy as lead of
//     the compute-lane op after its submitter; without, nothing.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "sim/op_model.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

using prophet::sim::test_util::op;
using prophet::sim::test_util::unit_tables;
using K = prophet::OpKind;

constexpr double kRowBytes = 64 * 4.0;  // one token row: C = 64 floats
constexpr double kLinkBytesPerS = 1e6, kLinkMessageS = 50e-6;

// D = 2 ranks, E = 4 (e0, e1 at home on rank 0; e2, e3 on rank 1); C = 64, F = 128; the owner rule
RecordedRun unit_run(const std::string& pinned, const std::string& binding) {
    RecordedRun run;
    run.run_id = "unit";
    run.num_ranks = 2;
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, std::string>>{{"model.V", "16"},
                                                          {"model.T", "8"},
                                                          {"model.C", "64"},
                                                          {"model.NH", "1"},
                                                          {"model.L", "1"},
                                                          {"model.E", "4"},
                                                          {"model.K", "1"},
                                                          {"model.F", "128"},
                                                          {"model.B", "2"},
                                                          {"balance.route_to", "owner"},
                                                          {"comm.link_gbps", "0.0"},
                                                          {"testbed.pinned", pinned},
                                                          {"testbed.binding", "\"" + binding + "\""}})
        run.params.emplace_back(k, v);
    return run;
}

// the modelled own seconds of one all-to-all unit of `kind` over both ranks, over a 1 MB/s link
double a2a_unit_s(K kind, const std::vector<int64_t>& counts, const std::vector<std::pair<int, int>>& replicas) {
    OpModelConfig c = op_model_config(unit_run("false", ""));
    c.link_bytes_per_s = kLinkBytesPerS;
    OpTables t = unit_tables();
    t.link_message_s = kLinkMessageS;
    RecordedStep step;
    step.counts = counts;
    step.placements = {Placement::make_static(2, 4)};
    for (const auto& [e, d] : replicas) step.placements[0].add_replica(e, d);
    const ReplayGraph g = build_replay_graph({op(kind, 0, 0, 1), op(kind, 1, 0, 1)}, 2, false, "test");
    const ReplayDurations d = predict_durations(t, c, step, g);
    EXPECT_NEAR(d.own_us[0], d.own_us[1], 1e-9) << "a collective: one time for both ranks";
    return d.own_us[0] * 1e-6;
}

// one rank's exchange: the all-to-all latency, the larger of its rows out and in at 1 GB/s, its egress at the link
// and the link's cost per message it sends
double exchange_s(double rows_out, double rows_in, double egress_rows, int messages) {
    return 5e-6 + std::max(rows_out, rows_in) * kRowBytes / 1e9 + egress_rows * kRowBytes / kLinkBytesPerS +
           messages * kLinkMessageS;
}

struct A2aRow {
    const char* what;
    K kind;
    std::vector<std::pair<int, int>> replicas;  // (expert, rank) added to the static placement
    double expected_s;
};

// counts [rank][expert]: rank 0 routes 10, 20, 30, 40 tokens to e0..e3, rank 1 5 to each
const std::vector<int64_t> kCounts = {10, 20, 30, 40, 5, 5, 5, 5};

}  // namespace

class OpA2aRoute : public ::testing::TestWithParam<A2aRow> {};

TEST_P(OpA2aRoute, PacesEachRanksEgressOnTheExactRoute) {
    const A2aRow& r = GetParam();
    EXPECT_NEAR(a2a_unit_s(r.kind, kCounts, r.replicas), r.expected_s, 1e-12) << r.what;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, OpA2aRoute,
    ::testing::Values(
        // static: rank 0 sends 70 rows (e2, e3), rank 1 sends 10 (e0, e1); the slower is rank 0
        A2aRow{"static dispatch", K::kDispatch, {}, exchange_s(70, 10, 70, 1)},
        // a replica of e3 on rank 0: rank 0 keeps its 40 tokens of e3 and sends 30; rank 1 still sends 10
        A2aRow{"replica of e3 on rank 0: dispatch", K::kDispatch, {{3, 0}}, exchange_s(30, 10, 30, 1)},
        // the combine returns what the dispatch brought: rank 1 returns 30 rows, rank 0 returns 10
        A2aRow{"replica of e3 on rank 0: combine", K::kCombine, {{3, 0}}, exchange_s(30, 10, 30, 1)},
        A2aRow{"replica of e3 on rank 0: combine_bwd (the dispatch's direction)",
               K::kCombineBwd,
               {{3, 0}},
               exchange_s(30, 10, 30, 1)},
        // replicas of e0, e1 on rank 1: rank 1 keeps all its tokens, so it sends no part (no message)
        A2aRow{"rank 1 holds e0, e1: dispatch", K::kDispatch, {{0, 1}, {1, 1}}, exchange_s(70, 0, 70, 1)},
        // the mirror: rank 1 returns rank 0's 70 rows; rank 0 returns nothing and sends no message
        A2aRow{"rank 1 holds e0, e1: dispatch_bwd (the combine's direction)",
               K::kDispatchBwd,
               {{0, 1}, {1, 1}},
               exchange_s(70, 0, 70, 1)},
        // every expert everywhere: nothing crosses, and no message is paced
        A2aRow{"every expert on both ranks", K::kDispatch, {{0, 1}, {1, 1}, {2, 0}, {3, 0}}, exchange_s(0, 0, 0, 0)}));

namespace {

struct CoreRow {
    const char* what;
    std::string pinned, binding;
    bool charged;
};

}  // namespace

class OpSharedCore : public ::testing::TestWithParam<CoreRow> {};

// Block-wise, both ranks: pack [0, 1] then fec [2, 9] on the compute lane, a Trans of e0 to rank 1 on the comm lane
// [1.5, 4] (submitted after the pack). Each rank moves one expert (2 C F floats) in one message: its copy is
// 10 us + 65536 B / 2 GB/s at unit_tables' point-to-point, charged before the fec when one core per rank.
TEST_P(OpSharedCore, ChargesTheCommLanesCopyToTheNextComputeOp) {
    const CoreRow& r = GetParam();
    const RecordedRun run = unit_run(r.pinned, r.binding);
    const OpModelConfig c = op_model_config(run);
    EXPECT_EQ(c.one_core_per_rank, r.charged) << r.what;
    RecordedStep step;
    step.counts = {10, 10, 10, 10, 10, 10, 10, 10};
    step.placements = {Placement::make_static(2, 4)};
    step.placements[0].add_replica(0, 1);
    std::vector<ReplayOp> ops;
    for (int rank = 0; rank < 2; ++rank) {
        ops.push_back(op(K::kPack, rank, 0, 1));
        ops.push_back(op(K::kFec, rank, 2, 9));
        ops.push_back(op(K::kTrans, rank, 1.5, 4, 0, prophet::OpLane::kComm, 1));
    }
    const ReplayGraph g = build_replay_graph(ops, 2, true, "test");
    const ReplayDurations d = predict_durations(unit_tables(), c, step, g);
    const double copy_us = (10e-6 + 65536.0 / 2e9) * 1e6;
    for (size_t i = 0; i < g.ops.size(); ++i) {
        const double expected = g.ops[i].kind == K::kFec && r.charged ? copy_us : 0.0;
        EXPECT_NEAR(d.lead_us[i], expected, 1e-9)
            << r.what << ": " << prophet::op_kind_name(g.ops[i].kind) << " of rank " << g.ops[i].rank;
    }
}

INSTANTIATE_TEST_SUITE_P(Rows, OpSharedCore,
                         ::testing::Values(CoreRow{"pinned, one CPU each", "true", "0;1", true},
                                           CoreRow{"pinned, two CPUs each (a range)", "true", "0-1;2-3", false},
                                           CoreRow{"pinned, two CPUs each (a list)", "true", "0,2;1,3", false},
                                           CoreRow{"not pinned", "false", "0-1;0-1", false},
                                           CoreRow{"no binding recorded", "true", "", false},
                                           CoreRow{"an empty rank entry", "true", "0;", false}));
