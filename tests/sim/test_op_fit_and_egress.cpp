// Two terms of the per-op model checked on hand-built runs (sim/op_model.h):
//   - fit_op_scales takes the MEDIAN over the calibration run's steps of each step's recorded / modelled own time,
//     so the run's slow early steps (fec at 4-6x in steps 1 and 3 of every stored calibration run) do not move
//     the factor (a ratio of sums did); over several recordings of the calibration config, every step of each;
//   - Trans and Agg over an emulated link pace only what a rank SENDS (its egress queue): the home in Trans, the
//     other holders in Agg. Two ranks that each send one expert take one expert's time at the link.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "sim/op_model.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

using prophet::sim::test_util::op;
using prophet::sim::test_util::unit_tables;

// D = 2 ranks; C = 64, F = 128 (one expert: 2 C F floats = 65536 B); owner routing, no link
RecordedRun unit_run(int E) {
    RecordedRun run;
    run.run_id = "unit";
    run.num_ranks = 2;
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"model.V", "16"},
                                                                               {"model.T", "8"},
                                                                               {"model.C", "64"},
                                                                               {"model.NH", "1"},
                                                                               {"model.L", "1"},
                                                                               {"model.E", std::to_string(E)},
                                                                               {"model.K", "1"},
                                                                               {"model.F", "128"},
                                                                               {"model.B", "2"},
                                                                               {"balance.route_to", "owner"},
                                                                               {"comm.link_gbps", "0.0"}})
        run.params.emplace_back(k, v);
    return run;
}

// a step of one expert forward per rank whose recorded own time is `factor` x its modelled own time
RecordedStep fec_step(const OpTables& t, const RecordedRun& run, int64_t step, double factor) {
    RecordedStep s;
    s.step = step;
    s.counts = {30, 10, 20, 0};  // rank 0 computes 50 rows of e0, rank 1 10 rows of e1
    s.placements = {Placement::make_static(2, 2)};
    const std::vector<ReplayOp> unit = {op(prophet::OpKind::kFec, 0, 0, 1), op(prophet::OpKind::kFec, 1, 0, 1)};
    const ReplayGraph g = build_replay_graph(unit, 2, false, "test");
    const ReplayDurations modelled = predict_durations(t, op_model_config(run), s, g);
    for (size_t i = 0; i < g.ops.size(); ++i)
        s.ops.push_back(op(prophet::OpKind::kFec, g.ops[i].rank, 0, factor * modelled.own_us[i]));
    return s;
}

}  // namespace

// Per-step factors 1.9, 2.0, 2.1 and one slow step at 6.0 (step 0, the warm-up at 50, is left out): the median of
// the four is 2.05 where the ratio of sums gave 3.0.
TEST(OpScaleFit, IsTheMedianOverStepsOfEachStepsRatio) {
    const OpTables t = unit_tables();
    RecordedRun run = unit_run(2);
    const double factors[] = {50.0, 1.9, 2.0, 6.0, 2.1};
    for (int64_t s = 0; s < 5; ++s) run.steps.push_back(fec_step(t, run, s, factors[s]));
    const OpTables fitted = fit_op_scales(t, run);
    ASSERT_EQ(fitted.scale.count("fec"), 1u);
    EXPECT_NEAR(fitted.scale.at("fec"), 2.05, 1e-9);
}

// Two recordings of the calibration config pooled (a campaign records it again between its points): the median
// over the steps of both. One run alone steps at 1.9, 2.0, 2.1 (median 2.0), the other, later and slower, at 2.4,
// 2.6 (median 2.5): pooled, the median of the five is 2.1.
TEST(OpScaleFit, PoolsTheStepsOfEveryCalibrationRecording) {
    const OpTables t = unit_tables();
    RecordedRun early = unit_run(2), late = unit_run(2);
    const double early_factors[] = {50.0, 1.9, 2.0, 2.1}, late_factors[] = {50.0, 2.4, 2.6};
    for (int64_t s = 0; s < 4; ++s) early.steps.push_back(fec_step(t, early, s, early_factors[s]));
    for (int64_t s = 0; s < 3; ++s) late.steps.push_back(fec_step(t, late, s, late_factors[s]));
    EXPECT_NEAR(fit_op_scales(t, early).scale.at("fec"), 2.0, 1e-9);
    EXPECT_NEAR(fit_op_scales(t, late).scale.at("fec"), 2.5, 1e-9);
    EXPECT_NEAR(fit_op_scales(t, {&early, &late}).scale.at("fec"), 2.1, 1e-9);
}

// Trans and Agg of one layer over E = 4 experts (e0, e1 at home on rank 0; e2, e3 on rank 1), unit_tables'
// point-to-point (10 us per message + 2 GB/s); the link: 1 MB/s egress, 100 us per message. The unit takes the
// slowest rank: 10 us x the messages it sends or receives + bytes it sends or receives / 2 GB/s + bytes it SENDS /
// 1 MB/s + 100 us x the messages it sends (the emulation releases a message at its paced time, then the inner
// communicator copies it: the two add).
TEST(OpTransferEgress, PacesOnlyWhatEachRankSends) {
    using K = prophet::OpKind;
    constexpr double kExpert = 65536;  // bytes
    struct Row {
        const char* what;
        std::vector<std::pair<int, int>> replicas;  // (expert, rank) added to the static placement
        K kind;
        bool link;
        double expected_s;
    };
    const double both_ways = 20e-6 + 2 * kExpert / 2e9 + kExpert / 1e6 + 100e-6;        // each rank sends one expert
    const double one_way = 20e-6 + 2 * kExpert / 2e9 + 2 * kExpert / 1e6 + 2 * 100e-6;  // one rank sends two
    const Row rows[] = {
        {"e0 to rank 1, e2 to rank 0: Trans", {{0, 1}, {2, 0}}, K::kTrans, true, both_ways},
        {"e0 to rank 1, e2 to rank 0: Agg", {{0, 1}, {2, 0}}, K::kAgg, true, both_ways},
        {"e0, e1 to rank 1: Trans (rank 0 sends both)", {{0, 1}, {1, 1}}, K::kTrans, true, one_way},
        {"e0, e1 to rank 1: Agg (rank 1 sends both)", {{0, 1}, {1, 1}}, K::kAgg, true, one_way},
        {"no link: bytes moved at the table's rate", {{0, 1}, {2, 0}}, K::kTrans, false, 20e-6 + 2 * kExpert / 2e9},
    };
    for (const Row& r : rows) {
        const RecordedRun run = unit_run(4);
        OpModelConfig c = op_model_config(run);
        if (r.link) {
            c.link_bytes_per_s = 1e6;
            c.link_latency_s = 100e-6;
        }
        RecordedStep step;
        step.counts = {10, 10, 10, 10, 10, 10, 10, 10};
        step.placements = {Placement::make_static(2, 4)};
        for (const auto& [e, d] : r.replicas) step.placements[0].add_replica(e, d);
        const ReplayGraph g = build_replay_graph({op(r.kind, 0, 0, 1), op(r.kind, 1, 0, 1)}, 2, false, "test");
        const ReplayDurations d = predict_durations(unit_tables(), c, step, g);
        for (size_t i = 0; i < g.ops.size(); ++i)
            EXPECT_NEAR(d.own_us[i], r.expected_s * 1e6, 1e-6) << r.what << ", rank " << g.ops[i].rank;
    }
}
