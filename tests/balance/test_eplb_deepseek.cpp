// test_eplb_deepseek.cpp: EPLB against DeepSeek's own algorithm, and the even-split routing rule it assumes.
//
// The golden case is the worked example of DeepSeek EPLB's README (github.com/deepseek-ai/EPLB, README.md and
// example.py, MIT licence): weight 2 x 12, num_replicas 16, num_groups 4, num_nodes 2, num_gpus 8, and the
// phy2log it prints. The Zipf case checks that plan_eplb scored under its own rule (even split over replicas)
// balances like DeepSeek's algorithm on the same loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "balance/evaluate.h"
#include "balance/policies.h"
#include "balance_fixtures.h"
#include "eplb_deepseek_reference.h"
#include "trace/trace.h"

namespace prophet {
namespace {

using testing::deepseek_gpu_loads;
using testing::deepseek_rebalance_experts;

double max_over_mean(const std::vector<double>& v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    return *std::max_element(v.begin(), v.end()) / mean;
}

TEST(EplbDeepSeek, ReproducesTheReadmeExample) {
    // DeepSeek EPLB README.md / example.py (MIT): the input and the printed "# Output:" tensor
    const std::vector<double> weight = {90, 132, 40, 61, 104, 165, 39, 4,   73,  56, 183, 86,   // layer 0
                                        20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16,  27};  // layer 1
    const std::vector<int> expected = {5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1,    // layer 0
                                       7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1};   // layer 1
    const auto plan = deepseek_rebalance_experts(weight, 2, 12, /*num_replicas=*/16, /*num_groups=*/4,
                                                 /*num_nodes=*/2, /*num_gpus=*/8);
    EXPECT_EQ(plan.phy2log, expected);
}

TEST(EplbDeepSeek, EvenSplitSpreadsEveryDevicesTokensOverAllHolders) {
    // D = 3, E = 3; expert 0 owned by device 0, replicated on 1 and 2; device 1 routes 7 tokens to it
    const std::vector<int64_t> counts = {3, 0, 0,   // device 0
                                         7, 1, 0,   // device 1
                                         0, 0, 2};  // device 2
    Placement p = Placement::make_static(3, 3);
    p.add_replica(0, 1);
    p.add_replica(0, 2);
    const LayerFlow flow = compute_flow(counts.data(), 3, 3, p, RouteRule::kEvenSplit);
    // device 0's 3 tokens: 1 each; device 1's 7: 2 each plus the remainder 1 on the holder at index 1 % 3 = 1
    EXPECT_EQ(flow.route, (std::vector<int64_t>{1, 1, 1,    // from device 0
                                                2, 3 + 1, 2,  // from device 1: expert 0 split 2/3/2, expert 1 local
                                                0, 0, 2}));   // from device 2: expert 2 local
    EXPECT_EQ(flow.computed, (std::vector<int64_t>{3, 5, 5}));
    EXPECT_EQ(flow.total_tokens, 13);
    // the owner rule keeps each holder's own tokens local
    const LayerFlow owner = compute_flow(counts.data(), 3, 3, p, RouteRule::kOwner);
    EXPECT_EQ(owner.computed, (std::vector<int64_t>{3, 8, 2}));
}

TEST(EplbDeepSeek, ZipfE16K2BalancesLikeDeepSeek) {
    // experiments/traces/zipf-e16-k2.toml: D = E = 16, top-2, 12 layers; loads summed over every iteration
    const Trace trace = generate_trace_from_toml("experiments/traces/zipf-e16-k2.toml");
    const int L = trace.meta.num_layers, D = trace.meta.num_devices, E = trace.meta.num_experts;
    std::vector<int64_t> counts(static_cast<size_t>(L) * D * E, 0);  // [L][D][E] summed over iterations
    for (int it = 0; it < trace.meta.num_iterations; ++it)
        for (size_t i = 0; i < counts.size(); ++i)
            counts[i] += trace.counts[static_cast<size_t>(it) * counts.size() + i];
    std::vector<double> loads(static_cast<size_t>(L) * E, 0.0);  // [L][E]
    for (int l = 0; l < L; ++l)
        for (int d = 0; d < D; ++d)
            for (int e = 0; e < E; ++e)
                loads[static_cast<size_t>(l) * E + e] += counts[(static_cast<size_t>(l) * D + d) * E + e];

    BalanceOptions o;  // one redundant slot per device: 32 physical experts, 2 per GPU
    const std::vector<Placement> ours = plan_eplb(loads, L, D, E, 1, o);
    const auto theirs = deepseek_rebalance_experts(loads, L, E, E + D, 1, 1, D);
    double ours_even = 0, ours_owner = 0, deepseek = 0;
    for (int l = 0; l < L; ++l) {
        const int64_t* c = counts.data() + static_cast<size_t>(l) * D * E;
        const LayerFlow even = compute_flow(c, D, E, ours[l], RouteRule::kEvenSplit);
        const LayerFlow owner = compute_flow(c, D, E, ours[l], RouteRule::kOwner);
        ours_even += max_over_mean(std::vector<double>(even.computed.begin(), even.computed.end())) / L;
        ours_owner += max_over_mean(std::vector<double>(owner.computed.begin(), owner.computed.end())) / L;
        deepseek += max_over_mean(deepseek_gpu_loads(theirs, loads, l, D)) / L;
    }
    EXPECT_NEAR(ours_even, deepseek, 0.005 * deepseek) << "owner rule: " << ours_owner;
    EXPECT_LT(deepseek, 1.2);              // DeepSeek's own answer is close to balanced here
    EXPECT_GT(ours_owner, 1.5 * ours_even);  // the owner rule wastes the replicas (the 3.29)
}

TEST(EplbDeepSeek, PlanScoresEplbUnderItsPapersRuleByDefault) {
    const Trace trace = generate_trace_from_toml("experiments/traces/zipf-e16-k2.toml");
    TraceView view;
    view.counts = trace.counts.data();
    view.num_iterations = trace.meta.num_iterations;
    view.num_layers = trace.meta.num_layers;
    view.num_devices = trace.meta.num_devices;
    view.num_experts = trace.meta.num_experts;
    const CostModel cost = testing::paper_cost_model(16, 1024);
    EvalSettings s;
    s.plan_repeats = 1;
    s.options.route_auto = true;
    const PolicyScore even = evaluate_policy("eplb", view, cost, s, false);
    EXPECT_EQ(even.route_rule, "even_split");
    s.options.route_auto = false;  // route_rule stays kOwner
    const PolicyScore owner = evaluate_policy("eplb", view, cost, s, false);
    EXPECT_EQ(owner.route_rule, "owner");
    EXPECT_LT(even.mean_max_mean_load, 1.2);
    EXPECT_GT(owner.mean_max_mean_load, 2.0);
    EXPECT_EQ(evaluate_policy("prophet", view, cost, s, false).route_rule, "owner");
}

}  // namespace
}  // namespace prophet
