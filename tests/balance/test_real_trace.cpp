// test_real_trace.cpp: the policies on the real GPT-MoE routing trace (../shared/data/smartmoe-gpt/, GPL-3.0 data
// read in place, never copied here; skipped where absent), under one system model at a time; and prophet against
// fastermoe on the reference synthetic trace (zipf-e16-k2), its one exception with its mechanism.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "balance/evaluate.h"
#include "balance/cluster.h"
#include "balance/options.h"
#include "trace/trace.h"

namespace prophet {
namespace {

// the first `iterations` iterations of a loaded trace
TraceView view_of(const Trace& trace, int iterations) {
    TraceView view;
    view.counts = trace.counts.data();
    view.num_iterations = iterations;
    view.num_layers = trace.meta.num_layers;
    view.num_devices = trace.meta.num_devices;
    view.num_experts = trace.meta.num_experts;
    return view;
}

const std::string kRealTrace =
    std::string(PROPHET_SOURCE_DIR) + "/../shared/data/smartmoe-gpt/gpt-moe-16gpu-e32-iter1-2491.csv.gz";

// hpwnv-16 with the README's reading of the real trace's model: d_model 1024, d_ffn 4096, seq_len 1024
CostModel real_trace_cost(const Trace& trace) {
    CostModel cost;
    cost.cluster = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/hpwnv-16.toml");
    cost.model = {1024, 4096, 1024, 4, trace.meta.tokens_per_iteration / trace.meta.num_devices};
    return cost;
}

TEST(RealTrace, ProphetBeatsFasterMoeUnderEachModel) {
    if (!std::filesystem::exists(kRealTrace))
        GTEST_SKIP() << "real trace absent: " << kRealTrace << " (GPL-3.0 data, never copied into the repository)";
    const Trace trace = load_trace(kRealTrace);
    const TraceView view = view_of(trace, 60);  // the first 60 snapshots keep the test to seconds
    const CostModel cost = real_trace_cost(trace);
    EvalSettings s;
    s.plan_repeats = 1;
    s.options.route_auto = true;
    for (int eq : {6, 8}) {
        s.options.cost_eq = eq;
        const PolicyScore prophet = evaluate_policy("prophet", view, cost, s, false);
        const PolicyScore faster = evaluate_policy("fastermoe", view, cost, s, false);
        const double p = eq == 6 ? prophet.mean_eq6_ms : prophet.mean_eq8_ms;
        const double f = eq == 6 ? faster.mean_eq6_ms : faster.mean_eq8_ms;
        EXPECT_LT(p, f) << "Eq " << eq << ": prophet " << p << " ms, fastermoe " << f << " ms";
    }
}

TEST(RealTrace, DeepSpeedPadsEveryDeviceToTheHottestExpert) {
    if (!std::filesystem::exists(kRealTrace))
        GTEST_SKIP() << "real trace absent: " << kRealTrace << " (GPL-3.0 data, never copied into the repository)";
    const Trace trace = load_trace(kRealTrace);
    const TraceView view = view_of(trace, 60);  // the first 60 snapshots keep the test to seconds
    const CostModel cost = real_trace_cost(trace);
    EvalSettings s;
    s.plan_repeats = 1;
    s.options.route_auto = true;
    s.options.cost_eq = 8;  // the last model the combined test left set
    const PolicyScore fixed = evaluate_policy("static", view, cost, s, false);
    const PolicyScore padded = evaluate_policy("deepspeed", view, cost, s, false);
    EXPECT_GT(padded.mean_eq6_ms, fixed.mean_eq6_ms);  // padding every expert to the hottest one costs
    EXPECT_NEAR(padded.mean_max_mean_load, 1.0, 1e-9);  // every device computes the same padded slots
}

// zipf-e16-k2 on hpwnv-16 (the README's plan example): prophet beats fastermoe under Eq 8, and under Eq 6 it is
// 0.15% behind, the one exception (with FasterMoE's system model, which scores the same Eq-6 placements). Its
// mechanism is the predictor, not the greedy: prophet plans iteration j from iteration j-1's counts, and with
// transfers blocking a replica barely pays, so a plan made for j-1's counts loses on j's; planned on the current
// counts (prophet-oracle) the same greedy scores exactly what fastermoe does.
TEST(ZipfTrace, ProphetBehindFasterMoeUnderEq6OnlyThroughItsPredictor) {
    const Trace trace = generate_trace_from_toml(std::string(PROPHET_SOURCE_DIR) + "/experiments/traces/zipf-e16-k2.toml");
    const TraceView view = view_of(trace, trace.meta.num_iterations);
    CostModel cost;
    cost.cluster = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/hpwnv-16.toml");
    cost.model = {trace.meta.d_model, trace.meta.d_ffn, trace.meta.seq_len, 4,
                  trace.meta.tokens_per_iteration / trace.meta.num_devices};
    EvalSettings s;
    s.plan_repeats = 1;
    s.options.route_auto = true;
    s.options.cost_eq = 6;
    const PolicyScore prophet6 = evaluate_policy("prophet", view, cost, s, false);
    const PolicyScore oracle6 = evaluate_policy("prophet-oracle", view, cost, s, false);
    const PolicyScore faster6 = evaluate_policy("fastermoe", view, cost, s, false);
    EXPECT_DOUBLE_EQ(oracle6.mean_eq6_ms, faster6.mean_eq6_ms);
    EXPECT_DOUBLE_EQ(oracle6.mean_fastermoe_ms, faster6.mean_fastermoe_ms);
    EXPECT_LT(prophet6.mean_eq6_ms, faster6.mean_eq6_ms * 1.005) << "the predictor's loss stays below 0.5%";
    s.options.cost_eq = 8;
    const PolicyScore prophet8 = evaluate_policy("prophet", view, cost, s, false);
    const PolicyScore faster8 = evaluate_policy("fastermoe", view, cost, s, false);
    EXPECT_LT(prophet8.mean_eq8_ms, 0.8 * faster8.mean_eq8_ms);
}

}  // namespace
}  // namespace prophet
