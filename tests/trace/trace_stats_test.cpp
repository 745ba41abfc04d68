// trace_stats_test.cpp: Jensen-Shannon divergence, expert loads and the consecutive-iteration divergence.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trace/trace.h"

namespace prophet {
namespace {

const double kLn2 = std::log(2.0);

TEST(JsDivergence, IdenticalIsZero) {
    const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
    EXPECT_NEAR(js_divergence(p.data(), p.data(), 4), 0.0, 1e-15);
    const std::vector<double> scaled = {10, 20, 30, 40};  // normalised inside
    EXPECT_NEAR(js_divergence(p.data(), scaled.data(), 4), 0.0, 1e-15);
}

TEST(JsDivergence, DisjointIsLn2) {
    const std::vector<double> p = {1, 2, 0, 0};
    const std::vector<double> q = {0, 0, 5, 0};
    EXPECT_NEAR(js_divergence(p.data(), q.data(), 4), kLn2, 1e-15);
}

TEST(JsDivergence, MatchesAValueByHand) {
    const std::vector<double> p = {1, 0};
    const std::vector<double> q = {1, 1};
    // m = (3/4, 1/4): JS = (ln(4/3) + (ln(2/3) + ln 2) / 2) / 2
    const double expected = 0.5 * (std::log(4.0 / 3.0) + 0.5 * (std::log(2.0 / 3.0) + std::log(2.0)));
    EXPECT_NEAR(js_divergence(p.data(), q.data(), 2), expected, 1e-15);
}

TEST(JsDivergence, IsSymmetricBelowLn2) {
    const std::vector<double> p = {1, 0};
    const std::vector<double> q = {1, 1};
    EXPECT_DOUBLE_EQ(js_divergence(p.data(), q.data(), 2), js_divergence(q.data(), p.data(), 2));
    const std::vector<double> a = {0.7, 0.2, 0.1, 0.0};
    const std::vector<double> b = {0.1, 0.3, 0.3, 0.3};
    const double ab = js_divergence(a.data(), b.data(), 4);
    EXPECT_DOUBLE_EQ(ab, js_divergence(b.data(), a.data(), 4));
    EXPECT_GT(ab, 0.0);
    EXPECT_LT(ab, kLn2);
}

TEST(JsDivergence, AllZeroInputs) {
    const std::vector<double> zero = {0, 0, 0};
    const std::vector<double> p = {1, 2, 3};
    EXPECT_EQ(js_divergence(zero.data(), zero.data(), 3), 0.0);
    EXPECT_NEAR(js_divergence(zero.data(), p.data(), 3), kLn2, 1e-15);
}

// I = 3, L = 2, D = 2, E = 3, top-1, 4 tokens per iteration
Trace hand_trace() {
    Trace trace;
    trace.meta.num_iterations = 3;
    trace.meta.num_layers = 2;
    trace.meta.num_devices = 2;
    trace.meta.num_experts = 3;
    trace.meta.top_k = 1;
    trace.meta.tokens_per_iteration = 4;
    trace.counts = {
        // iteration 0: layer 0, layer 1 (rows are devices)
        1, 1, 0, /**/ 0, 1, 1,  /**/ 2, 0, 0, /**/ 2, 0, 0,
        // iteration 1: layer 0 equal to iteration 0; layer 1 moved entirely to expert 2
        0, 2, 0, /**/ 1, 0, 1,  /**/ 0, 0, 2, /**/ 0, 0, 2,
        // iteration 2
        4, 0, 0, /**/ 0, 0, 0,  /**/ 0, 0, 2, /**/ 0, 0, 2,
    };
    return trace;
}

TEST(TraceStats, ExpertLoadsSumOverDevices) {
    const Trace trace = hand_trace();
    validate_trace(trace, "hand");
    EXPECT_EQ(expert_loads(trace, 0, 0), (std::vector<int64_t>{1, 2, 1}));
    EXPECT_EQ(expert_loads(trace, 0, 1), (std::vector<int64_t>{4, 0, 0}));
    EXPECT_EQ(expert_loads(trace, 2, 0), (std::vector<int64_t>{4, 0, 0}));
}

TEST(TraceStats, ConsecutiveDivergenceLayout) {
    const Trace trace = hand_trace();
    const std::vector<double> js = consecutive_js_divergence(trace);  // [(I-1) * L]
    ASSERT_EQ(js.size(), 4u);
    EXPECT_NEAR(js[0], 0.0, 1e-15);   // iteration 1 vs 0, layer 0: same loads (1, 2, 1)
    EXPECT_NEAR(js[1], kLn2, 1e-15);  // iteration 1 vs 0, layer 1: expert 0 -> expert 2
    const std::vector<double> p = {1, 2, 1};
    const std::vector<double> q = {4, 0, 0};
    EXPECT_NEAR(js[2], js_divergence(p.data(), q.data(), 3), 1e-15);  // iteration 2 vs 1, layer 0
    EXPECT_NEAR(js[3], 0.0, 1e-15);                                   // iteration 2 vs 1, layer 1
    Trace single = trace;
    single.meta.num_iterations = 1;
    single.counts.resize(12);
    EXPECT_TRUE(consecutive_js_divergence(single).empty());
}

}  // namespace
}  // namespace prophet
