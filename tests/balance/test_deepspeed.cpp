// test_deepspeed.cpp: DeepSpeed-MoE's padded dispatch (the paper's baseline) and the ILP status text.
#include <gtest/gtest.h>

#include <vector>

#include "balance/cost_model.h"
#include "balance/evaluate.h"
#include "balance/policies.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

// D = 2, E = 2: device 0 routes 3 tokens to e0 and 5 to e1, device 1 routes 1 and 2
const std::vector<int64_t> kCounts = {3, 5, 1, 2};

TEST(DeepSpeed, DroplessPadsEveryExpertToTheLargestCount) {
    int64_t dropped = -1;
    const std::vector<int64_t> padded = deepspeed_dispatch_counts(kCounts.data(), 2, 2, 0.0, &dropped);
    EXPECT_EQ(padded, (std::vector<int64_t>{5, 5, 5, 5}));
    EXPECT_EQ(dropped, 0);
    // padding costs: every device computes 2 * 5 slots and receives 5, against 7 and 5 for the exact counts
    const CostModel m = testing::unit_cost_model(2);
    const Placement p = Placement::make_static(2, 2);
    const CostBreakdown exact = predict_layer(m, compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner), p);
    const CostBreakdown pad = predict_layer(m, compute_flow(padded.data(), 2, 2, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(exact.fec_s, 7.0);
    EXPECT_DOUBLE_EQ(pad.fec_s, 10.0);
    EXPECT_DOUBLE_EQ(pad.a2a_s, 5.0);
}

TEST(DeepSpeed, CapacityFactorMakesEveryExpertExactlyTheCapacity) {
    int64_t dropped = -1;
    // device 0: 8 assignments, capacity ceil(8 / 2 * 1.0) = 4: e1 drops 1, e0 pads 3 -> 4;
    // device 1: 3 assignments, capacity ceil(1.5) = 2: nothing dropped, e0 pads to 2
    const std::vector<int64_t> padded = deepspeed_dispatch_counts(kCounts.data(), 2, 2, 1.0, &dropped);
    EXPECT_EQ(padded, (std::vector<int64_t>{4, 4, 2, 2}));
    EXPECT_EQ(dropped, 1);
}

// kCounts as one iteration and layer of 2 devices and 2 experts
TraceView counts_view() {
    TraceView view;
    view.counts = kCounts.data();
    view.num_iterations = view.num_layers = 1;
    view.num_devices = view.num_experts = 2;
    return view;
}

TEST(DeepSpeed, EvaluatePricesThePaddedTime) {
    const TraceView view = counts_view();
    const CostModel m = testing::unit_cost_model(2);
    EvalSettings s;
    s.plan_repeats = 1;
    const PolicyScore fixed = evaluate_policy("static", view, m, s, false);
    const PolicyScore padded = evaluate_policy("deepspeed", view, m, s, false);
    EXPECT_GT(padded.mean_eq6_ms, fixed.mean_eq6_ms);
}

TEST(DeepSpeed, EvaluateReportsDroppedTokens) {
    const TraceView view = counts_view();
    const CostModel m = testing::unit_cost_model(2);
    EvalSettings s;
    s.plan_repeats = 1;
    const PolicyScore padded = evaluate_policy("deepspeed", view, m, s, false);
    EXPECT_EQ(padded.mean_dropped_tokens, 0.0);
    s.options.capacity_factor = 1.0;
    EXPECT_EQ(evaluate_policy("deepspeed", view, m, s, false).mean_dropped_tokens, 1.0);
}

TEST(IlpStatus, SaysOptimalOrTimeLimitWithTheGap) {
    IlpReport r;
    r.ilp1_layers = 2;
    r.ilp1_layers_optimal = 2;
    r.ilp2_exact = true;
    r.ilp2_optimal = true;
    EXPECT_EQ(ilp_status(r, false), "ILP 1 optimal; ILP 2 optimal");
    r.ilp1_layers_optimal = 1;
    r.ilp1_objective = 100;
    r.ilp1_bound = 90;
    r.ilp2_exact = false;
    EXPECT_EQ(ilp_status(r, false), "ILP 1 time limit, gap 10.00% (1 of 2 layers); ILP 2 heuristic (greedy + local search)");
    IlpReport j;
    j.ilp1_objective = 1.0;
    j.ilp2_objective = 1.0;
    j.ilp1_bound = 1.5;
    EXPECT_EQ(ilp_status(j, true), "joint ILP time limit, gap 25.00%");
}

}  // namespace
}  // namespace prophet
