// test_rebalance.cpp: the serving regime's periodic rebalancing (rebalance.h): protocol, balancedness, moves,
// and eplb at least static's speed on a DeepSeek-V3 decode-like trace apart from its one-off moves.
#include <gtest/gtest.h>

#include <string>

#include "balance/device_load.h"
#include "balance/rebalance.h"
#include "balance_fixtures.h"
#include "core/error.h"
#include "trace/trace.h"

namespace prophet {
namespace {

// DeepSeek-V3 decode-like: 2,048 tokens per iteration, E = 256, D = 16, top-8 (3 MoE layers keep it to seconds)
Trace decode_like() {
    return generate_trace_from_toml_string(R"([trace]
generator = "zipf"
seed = 3
num_experts = 256
num_devices = 16
top_k = 8
tokens_per_iteration = 2048
num_iterations = 30
num_layers = 3
zipf_s = 1.0
record_transitions = false
d_model = 7168
d_ffn = 2048
seq_len = 1
)",
                                           "decode-like");
}

TraceView view_of(const Trace& t) {
    TraceView v;
    v.counts = t.counts.data();
    v.num_iterations = t.meta.num_iterations;
    v.num_layers = t.meta.num_layers;
    v.num_devices = t.meta.num_devices;
    v.num_experts = t.meta.num_experts;
    return v;
}

CostModel decode_cost(const Trace& t) {
    CostModel m = testing::paper_cost_model(16, static_cast<int>(t.meta.tokens_per_iteration / 16));
    m.model.d_model = t.meta.d_model;
    m.model.d_ffn = t.meta.d_ffn;
    m.model.bytes_per_elem = 2;
    return m;
}

TEST(Rebalance, EplbServesAtLeastStaticSpeedOnDecodeLikeTrace) {
    const Trace t = decode_like();
    const RebalanceSettings every10{10, 10};
    EvalSettings settings;
    const ServingScore fixed = evaluate_serving("static", view_of(t), decode_cost(t), settings, every10);
    const ServingScore eplb = evaluate_serving("eplb", view_of(t), decode_cost(t), settings, every10);
    EXPECT_LE(eplb.mean_layer_ms, fixed.mean_layer_ms)
        << "eplb " << eplb.mean_layer_ms << " ms, static " << fixed.mean_layer_ms << " ms per layer";
    EXPECT_GT(eplb.mean_balancedness, fixed.mean_balancedness);
    EXPECT_GT(eplb.stall_ms, 0.0) << "the one-off move is shown, apart from the per-layer time";
    EXPECT_DOUBLE_EQ(fixed.stall_ms, 0.0);
}

TEST(Rebalance, ProtocolPlansOnTheWindowBeforeEachRebalance) {
    const Trace t = decode_like();
    const ServingScore s = evaluate_serving("eplb", view_of(t), decode_cost(t), EvalSettings{}, {12, 5});
    // rebalances at 12 and 24; windows [7, 12) and [19, 24); served [12, 24) and [24, 30)
    const int expected[2][4] = {{12, 7, 12, 24}, {24, 19, 24, 30}};
    ASSERT_EQ(s.rebalances.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
        const RebalanceRecord& r = s.rebalances[k];
        EXPECT_EQ(r.at_iteration, expected[k][0]);
        EXPECT_EQ(r.window_begin, expected[k][1]);
        EXPECT_EQ(r.window_end, expected[k][2]);
        EXPECT_EQ(r.served_end, expected[k][3]);
        EXPECT_GT(r.predicted_balancedness, 0.0);
        EXPECT_LE(r.realised_balancedness, 1.0);
    }
    EXPECT_GT(s.rebalances[0].copies_moved, 0);
    EXPECT_DOUBLE_EQ(s.rebalances[0].bytes_moved, s.rebalances[0].copies_moved * decode_cost(t).expert_bytes());
}

TEST(Rebalance, StaticMovesNothing) {
    const Trace t = decode_like();
    const ServingScore s = evaluate_serving("static", view_of(t), decode_cost(t), EvalSettings{}, {10, 10});
    ASSERT_EQ(s.rebalances.size(), 2u);
    for (const RebalanceRecord& r : s.rebalances) {
        EXPECT_EQ(r.copies_moved, 0);
        EXPECT_DOUBLE_EQ(r.stall_s, 0.0);
    }
}

TEST(Rebalance, BalancednessIsMeanOverMax) {
    const int64_t skewed[] = {2, 2, 4}, idle[] = {0, 0};
    EXPECT_DOUBLE_EQ(balancedness(skewed, 3), 8.0 / 3.0 / 4.0);
    EXPECT_DOUBLE_EQ(balancedness(idle, 2), 1.0);
}

TEST(Rebalance, SettingsBelowOneAreConfigErrors) {
    const Trace t = decode_like();
    try {
        evaluate_serving("eplb", view_of(t), decode_cost(t), EvalSettings{}, {0, 10});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("balance.rebalance_every"), std::string::npos);
    }
}

}  // namespace
}  // namespace prophet
