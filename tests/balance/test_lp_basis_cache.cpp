// lp::BasisCache (balance/lp_clp.h): the bases of recent LPs by structure key, least recently used dropped first
// once their bytes pass the limit; and the routing LP's use of it (a layer's LP warm-starts from the last LP of its
// own structure, whatever was solved in between).
#include <gtest/gtest.h>

#include <string>
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

// Layer A's LP, then layer B's (another holder set, so another structure), then A's again: A warm-starts from its
// own basis and reaches the cold optimum.
TEST(FlowRoutingWarmStart, ALayerWarmStartsAfterAnotherLayersLp) {
    const int D = 8, E = 16;
    const std::vector<int64_t> counts = testing::skewed_counts(D, E, 4096, 1.2, 23);
    const CostModel cost = testing::paper_cost_model(D, 4096);
    Placement a = Placement::make_static(D, E), b = Placement::make_static(D, E);
    for (int d = 1; d < D; d += 2) a.add_replica(0, d);
    for (int d = 2; d < D; ++d) b.add_replica(1, d);
    FlowRouteReport first, other, again;
    flow_route_layer(counts.data(), D, E, a, &cost, &first);
    flow_route_layer(counts.data(), D, E, b, &cost, &other);
    flow_route_layer(counts.data(), D, E, a, &cost, &again);
    EXPECT_TRUE(again.warm_started);
    EXPECT_NEAR(again.lp_objective, first.lp_objective, 1e-9 * first.lp_objective);
    EXPECT_EQ(again.parts.size(), first.parts.size());
}

}  // namespace
}  // namespace prophet
