// The headline max/mean load of one set of loads, by its three paths: evaluation (evaluate_policy, through
// device_load), the simulator (simulate, per block and its iteration mean) and the trainer (step_mean_max_mean_load,
// what Trainer::step records). All three take balance/device_load.h's max_mean_load (max * D / sum, one rounding)
// and agree exactly per layer; the means over layers add the same figures in the same order and agree exactly too,
// except the simulator's (sum of each layer / L), which may differ in the last bits: tolerance 1e-14 relative (a
// changed rule moves the figure by far more).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../balance/balance_fixtures.h"
#include "balance/device_load.h"
#include "balance/evaluate.h"
#include "sim/simulator.h"
#include "sim/trace_view.h"
#include "train/trainer.h"

namespace prophet {
namespace {

struct LoadCase {
    std::string name;
    int iterations, layers, devices, experts;
    std::string policy;  // plans the placements all three paths score (any but static must replicate)
    RouteRule route_rule;
    uint64_t seed;  // 0: every (device, expert) count is `flat`
    int64_t flat;
    double expected_first;       // max/mean of iteration 0, layer 0 by hand; < 0: not given
    std::vector<int64_t> given;  // [I][L][D][E] counts, when not generated
};

void PrintTo(const LoadCase& c, std::ostream* os) { *os << c.name; }

// [I][L][D][E] token counts: skewed pseudo-random (an LCG), or all `flat`
std::vector<int64_t> make_counts(const LoadCase& c) {
    if (!c.given.empty()) return c.given;
    std::vector<int64_t> counts(static_cast<size_t>(c.iterations) * c.layers * c.devices * c.experts, c.flat);
    uint64_t x = c.seed;
    if (c.seed == 0) return counts;
    for (size_t i = 0; i < counts.size(); ++i) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const int e = static_cast<int>(i % c.experts);
        counts[i] = static_cast<int64_t>((x >> 33) % 50) * (e == 0 ? 5 : 1) + (e == 1 ? 0 : 1);
    }
    return counts;
}

class MaxMeanLoadPaths : public ::testing::TestWithParam<LoadCase> {};

TEST_P(MaxMeanLoadPaths, EvaluationSimulatorTrainerAgree) {
    const LoadCase& c = GetParam();
    const int I = c.iterations, L = c.layers, D = c.devices, E = c.experts;
    const std::vector<int64_t> counts = make_counts(c);
    const TraceView view = view_of(counts, I, L, D, E);
    const CostModel cost = testing::unit_cost_model(D);
    EvalSettings settings;
    settings.options.route_rule = c.route_rule;
    settings.plan_repeats = 1;
    const PolicyScore eval = evaluate_policy(c.policy, view, cost, settings, false);
    ASSERT_FALSE(eval.skipped) << eval.note;
    ASSERT_EQ(eval.layers.size(), static_cast<size_t>(I) * L);
    std::vector<std::vector<Placement>> placements(I);
    int replicas = 0;
    for (const LayerScore& s : eval.layers) {
        placements[s.iteration].push_back(s.placement);
        replicas += s.placement.num_replicas();
    }
    if (c.policy != "static") {
        EXPECT_GT(replicas, 0) << "the placements replicate no expert: the route rule goes untested";
    }
    sim::SimOptions options;
    options.route_rule = c.route_rule;
    const sim::SimResult sim = sim::simulate(view, placements, cost, options);
    ASSERT_EQ(sim.iterations.size(), static_cast<size_t>(I));
    if (c.expected_first >= 0) {
        EXPECT_EQ(eval.layers[0].max_mean_load, c.expected_first);
        EXPECT_EQ(sim.iterations[0].blocks[0].max_mean_load, c.expected_first);
    }
    for (int it = 0; it < I; ++it) {
        const size_t step_size = static_cast<size_t>(L) * D * E;
        const std::vector<int64_t> step(counts.begin() + it * step_size, counts.begin() + (it + 1) * step_size);
        double eval_sum = 0;
        for (int l = 0; l < L; ++l) {
            const double by_eval = eval.layers[static_cast<size_t>(it) * L + l].max_mean_load;
            const double by_sim = sim.iterations[it].blocks[l].max_mean_load;
            const std::vector<int64_t> layer(step.begin() + l * D * E, step.begin() + (l + 1) * D * E);
            const double by_trainer = step_mean_max_mean_load(layer, {placements[it][l]}, D, E, c.route_rule);
            EXPECT_EQ(by_sim, by_trainer) << "iteration " << it << " layer " << l;
            EXPECT_EQ(by_sim, by_eval) << "iteration " << it << " layer " << l;
            eval_sum += by_eval;
        }
        const double by_trainer = step_mean_max_mean_load(step, placements[it], D, E, c.route_rule);
        EXPECT_NEAR(sim.iterations[it].mean_max_mean_load, by_trainer, 1e-14 * by_trainer) << "iteration " << it;
        EXPECT_EQ(eval_sum / L, by_trainer) << "iteration " << it;
    }
}

// D = 2, E = 2, static, owner: device 0 computes e0's 3 + 1 tokens, device 1 e1's 5 + 2: H = {4, 7}, 7 / 5.5
std::vector<LoadCase> cases() {
    return {
        {"tiny_static_by_hand", 1, 1, 2, 2, "static", RouteRule::kOwner, 0, 0, 7.0 / 5.5, {3, 5, 1, 2}},
        // H = {3, 1, 1}: 3 * 3 / 5 rounds once to 1.8; 3 / (5 / 3.0) rounds twice to 1.7999999999999998
        {"d3_one_rounding", 1, 1, 3, 3, "static", RouteRule::kOwner, 0, 0, 1.8, {3, 1, 1, 0, 0, 0, 0, 0, 0}},
        // H = {3, 2, 2, 1, 1}: 3 * 5 / 9 = 1.6666666666666667 (two roundings: ...665)
        {"d5_one_rounding", 1, 1, 5, 5, "static", RouteRule::kOwner, 0, 0, 3.0 * 5 / 9, {3, 2, 2, 1, 1, 0, 0, 0, 0,
                                                                                         0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                                         0, 0, 0, 0, 0, 0, 0}},
        {"flat_static", 2, 2, 4, 8, "static", RouteRule::kOwner, 0, 3, 1.0, {}},
        {"no_tokens", 1, 2, 4, 4, "static", RouteRule::kOwner, 0, 0, 1.0, {}},
        {"skewed_static_d4", 2, 3, 4, 8, "static", RouteRule::kOwner, 7, 0, -1, {}},
        {"skewed_static_d3_uneven", 2, 2, 3, 6, "static", RouteRule::kOwner, 11, 0, -1, {}},
        {"skewed_static_d6", 2, 3, 6, 12, "static", RouteRule::kOwner, 17, 0, -1, {}},
        {"skewed_top2_owner", 3, 2, 4, 8, "top2", RouteRule::kOwner, 5, 0, -1, {}},
        {"skewed_top2_least_loaded", 3, 2, 4, 8, "top2", RouteRule::kLeastLoaded, 9, 0, -1, {}},
        {"skewed_top3_least_loaded_d6", 2, 2, 6, 12, "top3", RouteRule::kLeastLoaded, 13, 0, -1, {}},
    };
}

INSTANTIATE_TEST_SUITE_P(Table, MaxMeanLoadPaths, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<LoadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace prophet
