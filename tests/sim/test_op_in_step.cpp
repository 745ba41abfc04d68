// The per-op model's in-step overhead per call of a communication kind (OpTables::in_step_s,
// fit_in_step_overheads): where it is added, the hand-computed fit on a hand-built run (median over steps of the
// per-call mean, floored at 0, not over an emulated link), and the [ops] field's round trip and errors.
#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "op_test_util.h"
#include "sim/op_model.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

using prophet::sim::test_util::op;
using prophet::sim::test_util::unit_tables;

// D = 2, E = 2, one layer: rank 0 routes 30 tokens to e0 and 10 to e1, rank 1 20 to e0; static placement, owner
// routing: rank 0 receives 20 rows of C = 64 floats, the slowest exchange: 5 us + 5120 B / 1 GB/s = 10.12 us
constexpr double kDispatchModelUs = 5.0 + 20 * 64 * 4 / 1e3;

RecordedStep unit_step(int64_t step, const std::vector<ReplayOp>& ops) {
    RecordedStep s;
    s.step = step;
    s.counts = {30, 10, 20, 0};
    s.placements = {Placement::make_static(2, 2)};
    s.ops = ops;
    return s;
}

// a step of a dispatch (rank 0 ends at dispatch_end[0], rank 1 at [1], both start at 0) then the dense all-reduce
// (both ranks 1 us: far below the ring's 8 us of latency alone)
RecordedStep dispatch_step(int64_t step, double end0, double end1) {
    using K = prophet::OpKind;
    return unit_step(step, {op(K::kDispatch, 0, 0, end0), op(K::kDispatch, 1, 0, end1),
                            op(K::kAllReduce, 0, 2000, 2001, -1), op(K::kAllReduce, 1, 2000, 2001, -1)});
}

RecordedRun unit_run(const std::string& link_gbps) {
    RecordedRun run;
    run.run_id = "unit";
    run.num_ranks = 2;
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"model.V", "16"}, {"model.T", "8"}, {"model.C", "64"}, {"model.NH", "1"}, {"model.L", "1"},
             {"model.E", "2"}, {"model.K", "1"}, {"model.F", "128"}, {"model.B", "2"},
             {"balance.route_to", "owner"}, {"comm.link_gbps", link_gbps}})
        run.params.emplace_back(k, v);
    const double m = kDispatchModelUs;
    run.steps = {dispatch_step(0, m + 5000, m + 5000),  // the warm-up: left out of the fit
                 dispatch_step(1, m + 30, m + 10),      // 30 and 10 us over the model: 20 per call
                 dispatch_step(2, m + 50, m + 50),      // 50 per call
                 dispatch_step(3, m + 1000, m + 1000)}; // a noisy step: 1000 per call (the median ignores it)
    return run;
}

double own_of(const ReplayGraph& g, const ReplayDurations& d, prophet::OpKind kind, int rank) {
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == kind && g.ops[i].rank == rank) return d.own_us[i];
    ADD_FAILURE() << "no op";
    return 0;
}

}  // namespace

TEST(OpInStep, AddedPerCallExceptOverTheEmulatedLinkWhereLinkMessageCarriesIt) {
    using K = prophet::OpKind;
    const RecordedRun run = unit_run("0.0");
    OpModelConfig c = op_model_config(run);
    const RecordedStep& step = run.steps[1];
    const ReplayGraph g = build_replay_graph(step.ops, 2, false, "test");
    OpTables t = unit_tables();
    const ReplayDurations base = predict_durations(t, c, step, g);
    EXPECT_NEAR(own_of(g, base, K::kDispatch, 0), kDispatchModelUs, 1e-9);
    t.in_step_s = {{"dispatch", 30e-6}, {"allreduce", 7e-6}};
    const ReplayDurations with = predict_durations(t, c, step, g);
    for (int r = 0; r < 2; ++r) {
        EXPECT_NEAR(own_of(g, with, K::kDispatch, r), kDispatchModelUs + 30, 1e-9) << r;
        EXPECT_NEAR(own_of(g, with, K::kAllReduce, r), own_of(g, base, K::kAllReduce, r) + 7, 1e-9) << r;
    }
    // over an emulated 8 Mbit/s link: the dispatch adds the link's (20 rows of 256 B at 1 MB/s from rank 1 + one
    // message of 0 latency) to the table's, no in-step term; the all-reduce does not cross the link and keeps its 7 us
    c.link_bytes_per_s = 1e6;
    const ReplayDurations link_base = predict_durations(unit_tables(), c, step, g);
    const ReplayDurations link = predict_durations(t, c, step, g);
    EXPECT_NEAR(own_of(g, link, K::kDispatch, 0), kDispatchModelUs + 20 * 64 * 4, 1e-9);
    EXPECT_NEAR(own_of(g, link, K::kDispatch, 0), own_of(g, link_base, K::kDispatch, 0), 1e-9);
    EXPECT_NEAR(own_of(g, link, K::kAllReduce, 1), own_of(g, link_base, K::kAllReduce, 1) + 7, 1e-9);
}

TEST(OpInStep, FitIsTheMedianOverStepsOfThePerCallMeanFlooredAtZero) {
    using K = prophet::OpKind;
    OpTables stale = unit_tables();
    stale.in_step_s = {{"dispatch", 1.0}, {"stats", 1.0}};  // a previous fit: ignored and replaced
    const RecordedRun run = unit_run("0.0");
    const OpTables fitted = fit_in_step_overheads(stale, run);
    // per step: 20, 50, 1000 us per call -> median 50; the all-reduce is over-predicted (1 us recorded): 0;
    // stats never recorded: absent
    ASSERT_EQ(fitted.in_step_s.size(), 2u);
    EXPECT_NEAR(fitted.in_step_s.at("dispatch"), 50e-6, 1e-12);
    EXPECT_EQ(fitted.in_step_s.at("allreduce"), 0.0);
    // with the fit, the median step's dispatch is the recorded one
    const RecordedStep& step = run.steps[2];
    const ReplayGraph g = build_replay_graph(step.ops, 2, false, "test");
    const ReplayDurations d = predict_durations(fitted, op_model_config(run), step, g);
    EXPECT_NEAR(own_of(g, d, K::kDispatch, 0), kDispatchModelUs + 50, 1e-9);
    // a calibration run over an emulated link fits no all-to-all term (its link_message_s carries it)
    const OpTables over_link = fit_in_step_overheads(unit_tables(), unit_run("4.0"));
    EXPECT_FALSE(over_link.in_step_s.count("dispatch"));
    EXPECT_TRUE(over_link.in_step_s.count("allreduce"));
}

// Pooled over two recordings: unit_run's steps (20, 50, 1000 us per call) and a later one's (60, 70): the median
// of the five per-step means is 60 us (the first alone: 50; the second alone: 65).
TEST(OpInStep, FitPoolsTheStepsOfEveryCalibrationRecording) {
    const RecordedRun first = unit_run("0.0");
    RecordedRun later = unit_run("0.0");
    const double m = kDispatchModelUs;
    later.steps = {dispatch_step(0, m + 5000, m + 5000), dispatch_step(1, m + 60, m + 60),
                   dispatch_step(2, m + 70, m + 70)};
    EXPECT_NEAR(fit_in_step_overheads(unit_tables(), later).in_step_s.at("dispatch"), 65e-6, 1e-12);
    EXPECT_NEAR(fit_in_step_overheads(unit_tables(), {&first, &later}).in_step_s.at("dispatch"), 60e-6, 1e-12);
}

class OpInStepFile : public prophet::testing::TempDirTest {};

TEST_F(OpInStepFile, InStepTermsRoundTrip) {
    OpTables in = unit_tables();
    in.in_step_s = {{"combine", 99.5e-6}, {"layout", 30e-6}};
    const std::string path = (dir_ / "c.toml").string();
    std::ofstream(path) << op_tables_to_toml(in);
    const OpTables t = load_op_tables(path);
    ASSERT_EQ(t.in_step_s.size(), 2u);
    EXPECT_NEAR(t.in_step_s.at("combine"), 99.5e-6, 1e-12);
    EXPECT_NEAR(t.in_step_s.at("layout"), 30e-6, 1e-12);
    EXPECT_TRUE(load_op_tables(path).scale.empty());
}

TEST_F(OpInStepFile, BadEntryErrorNamesTheFieldWithItsRule) {
    OpTables in = unit_tables();
    in.in_step_s = {{"combine", 99.5e-6}, {"layout", 30e-6}};
    const std::string path = (dir_ / "c.toml").string();
    const auto expect_error = [&](const std::string& from, const std::string& to, const std::string& field,
                                  const std::string& rule) {
        std::string text = op_tables_to_toml(in);
        text.replace(text.find(from), from.size(), to);
        std::ofstream(path) << text;
        try {
            load_op_tables(path);
            ADD_FAILURE() << "expected an error for " << to;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
        }
    };
    // a compute kind is scaled, not given an in-step term; a negative time is refused
    expect_error("combine = ", "fec = ", "ops.in_step_us.fec", "allreduce");
    expect_error("layout = 30", "layout = -30", "ops.in_step_us.layout", ">= 0");
}
