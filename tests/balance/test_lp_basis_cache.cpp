// lp::BasisCache (balance/lp_clp.h): the bases of recent LPs by structure key, least recently used dropped first
// once their bytes pass the limit; the routing LP's use of it (a layer's LP warm-starts from the last LP of its own
// structure, whatever was solved in between); lp::solve_lp_cached's reuse of a stored optimum, which carries its
// solve's seconds so that a reused routing is not timed as free (routing_seconds).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "balance/flow_routing.h"
#include "balance/lp_clp.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

// room for 100 bytes of bases and two entries' overhead: two bases of 40 bytes fit, three do not
constexpr size_t kLimit = 100 + 2 * lp::BasisCache::kEntryOverheadBytes;

// One step: store `bytes` bytes under key as solve_lp would (basis written in place, then stored()), or with
// bytes < 0 only look the key up (which makes it the most recently used).
struct Step {
    uint64_t key;
    int bytes;
};
struct CacheCase {
    const char* name;
    std::vector<Step> steps;
    std::vector<std::pair<uint64_t, size_t>> expected;  // (key, basis size) afterwards, 0: none kept
};

class BasisCacheCase : public ::testing::TestWithParam<CacheCase> {};

TEST_P(BasisCacheCase, KeepsTheBasesExpected) {
    lp::BasisCache cache(kLimit);
    for (const Step& step : GetParam().steps) {
        std::vector<unsigned char>& basis = cache.basis(step.key);
        if (step.bytes < 0) continue;
        basis.assign(static_cast<size_t>(step.bytes), 1);
        cache.stored(step.key);
    }
    for (const auto& [key, size] : GetParam().expected) EXPECT_EQ(cache.basis(key).size(), size) << "key " << key;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BasisCacheCase,
    ::testing::Values(
        CacheCase{"never_stored_is_empty", {{1, 10}}, {{2, 0}, {1, 10}}},
        CacheCase{"least_recently_used_goes_first", {{1, 40}, {2, 40}, {1, -1}, {3, 40}}, {{1, 40}, {3, 40}, {2, 0}}},
        CacheCase{"grown_in_place_counts_its_new_size", {{1, 30}, {2, 30}, {2, 80}}, {{1, 0}, {2, 80}}},
        CacheCase{"just_stored_stays_above_the_limit", {{1, 10}, {2, 150}}, {{1, 0}, {2, 150}}}),
    [](const ::testing::TestParamInfo<CacheCase>& info) { return std::string(info.param.name); });

// Layer A's LP, then layer B's (another holder set, so another structure), then A's placement on counts one token
// apart (A's structure, other bounds): A warm-starts from its own basis and reaches the cold optimum.
TEST(FlowRoutingWarmStart, ALayerWarmStartsAfterAnotherLayersLp) {
    const int D = 8, E = 16;
    const std::vector<int64_t> counts = testing::skewed_counts(D, E, 4096, 1.2, 23);
    std::vector<int64_t> moved = counts;
    ASSERT_TRUE(moved[0] > 1 && moved[E] > 0);
    --moved[0], ++moved[E];  // expert 0: one token from device 0 to device 1
    const CostModel cost = testing::paper_cost_model(D, 4096);
    Placement a = Placement::make_static(D, E), b = Placement::make_static(D, E);
    for (int d = 1; d < D; d += 2) a.add_replica(0, d);
    for (int d = 2; d < D; ++d) b.add_replica(1, d);
    FlowRouteReport cold, first, other, again;
    std::thread([&] { flow_route_layer(moved.data(), D, E, a, &cost, &cold); }).join();
    std::thread([&] {
        flow_route_layer(counts.data(), D, E, a, &cost, &first);
        flow_route_layer(counts.data(), D, E, b, &cost, &other);
        flow_route_layer(moved.data(), D, E, a, &cost, &again);
    }).join();
    EXPECT_TRUE(again.warm_started);
    EXPECT_FALSE(again.reused);
    EXPECT_NEAR(again.lp_objective, cold.lp_objective, 1e-9 * cold.lp_objective);
}

// routing_seconds: a call that reused the LP's optimum counts the stored solve's seconds beside its own
struct RoutingSecondsCase {
    const char* name;
    bool reused;
    double call_s, lp_solve_s, expected_s;
};

class RoutingSeconds : public ::testing::TestWithParam<RoutingSecondsCase> {};

TEST_P(RoutingSeconds, CountsTheSolveOnce) {
    FlowRouteReport report;
    report.reused = GetParam().reused;
    report.lp_solve_s = GetParam().lp_solve_s;
    EXPECT_DOUBLE_EQ(routing_seconds(GetParam().call_s, report), GetParam().expected_s);
}

INSTANTIATE_TEST_SUITE_P(Table, RoutingSeconds,
                         ::testing::Values(RoutingSecondsCase{"solved_in_the_call", false, 0.25, 0.2, 0.25},
                                           RoutingSecondsCase{"reused_adds_the_stored_solve", true, 0.001, 0.2, 0.201},
                                           RoutingSecondsCase{"no_lp", false, 0.001, 0.0, 0.001}),
                         [](const ::testing::TestParamInfo<RoutingSecondsCase>& info) {
                             return std::string(info.param.name);
                         });

// lp::solve_lp_cached on a model, then on a variant: the stored optimum comes back only for the very same model.
// min x0 + 2 x1  s.t.  x0 + x1 >= 3,  x0 <= 2  (optimum 4 at (2, 1)).
lp::LpModel small_model() {
    lp::LpModel m;
    m.num_rows = 1;
    m.row_lb = {3.0};
    m.row_ub = {lp::infinity()};
    const int row = 0;
    const double one = 1.0;
    m.add_col(0.0, 2.0, 1.0, &row, &one, 1);
    m.add_col(0.0, lp::infinity(), 2.0, &row, &one, 1);
    return m;
}

struct VariantCase {
    const char* name;
    void (*change)(lp::LpModel&);
    bool reused;             // the variant returns the first model's stored optimum
    double variant_optimum;  // the variant's own optimum
};

class SolveLpCached : public ::testing::TestWithParam<VariantCase> {};

TEST_P(SolveLpCached, ReusesOnlyTheSameModel) {
    lp::BasisCache cache(1 << 20);
    const lp::LpModel m = small_model();
    lp::LpModel variant = m;
    GetParam().change(variant);
    const lp::LpResult first = lp::solve_lp_cached(m, cache);
    const lp::LpResult second = lp::solve_lp_cached(variant, cache);
    ASSERT_TRUE(first.optimal && second.optimal);
    EXPECT_FALSE(first.reused);
    EXPECT_NEAR(first.objective, 4.0, 1e-9);
    EXPECT_GT(first.solve_s, 0.0);
    EXPECT_EQ(second.reused, GetParam().reused);
    if (second.reused) {
        EXPECT_EQ(second.solve_s, first.solve_s) << "a reused optimum carries its own solve's seconds";
    } else {
        EXPECT_GT(second.solve_s, 0.0);
    }
    EXPECT_NEAR(second.objective, GetParam().variant_optimum, 1e-9);
    ASSERT_EQ(second.x.size(), static_cast<size_t>(variant.num_cols()));
    double objective = 0;
    for (int j = 0; j < variant.num_cols(); ++j) objective += variant.cost[j] * second.x[j];
    EXPECT_NEAR(objective, GetParam().variant_optimum, 1e-9) << "x is the variant's optimum";
}

INSTANTIATE_TEST_SUITE_P(
    Table, SolveLpCached,
    ::testing::Values(VariantCase{"same_model", [](lp::LpModel&) {}, true, 4.0},
                      VariantCase{"row_bound", [](lp::LpModel& m) { m.row_lb[0] = 4.0; }, false, 6.0},
                      VariantCase{"cost", [](lp::LpModel& m) { m.cost[1] = 3.0; }, false, 5.0},
                      VariantCase{"column_bound", [](lp::LpModel& m) { m.col_ub[0] = 1.0; }, false, 5.0},
                      VariantCase{"coefficient", [](lp::LpModel& m) { m.value[0] = 3.0; }, false, 1.0},
                      VariantCase{"structure",
                                  [](lp::LpModel& m) {
                                      const int row = 0;
                                      const double one = 1.0;
                                      m.add_col(0.0, lp::infinity(), 0.5, &row, &one, 1);
                                  },
                                  false, 1.5}),
    [](const ::testing::TestParamInfo<VariantCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
