// test_plan_search.cpp: the gap probe's local search (plan_search.h) against the exhaustive oracle on tiny
// instances, and its never-worse-than-the-start guarantee.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "balance/plan_search.h"
#include "balance/policies.h"
#include "balance_fixtures.h"
#include "core/error.h"

namespace prophet {
namespace {

using testing::paper_cost_model;
using testing::skewed_counts;
using testing::unit_cost_model;

struct SearchCase {
    const char* name;
    int D, E;
    bool paper;  // paper_cost_model, else unit_cost_model
    int cost_eq;
    RouteRule route;
    int cap;  // max_replicas_per_device (0: none)
    double skew;
    uint64_t seed;
};

CostModel model_of(const SearchCase& c) { return c.paper ? paper_cost_model(c.D, 256) : unit_cost_model(c.D); }

std::vector<int64_t> counts_of(const SearchCase& c) {
    return skewed_counts(c.D, c.E, c.paper ? 256 : 40, c.skew, c.seed);
}

PlanSearchOptions search_options(const SearchCase& c) {
    PlanSearchOptions o;
    o.iterations = 3000;
    o.seed = c.seed;
    o.cost_eq = c.cost_eq;
    o.route_rule = c.route;
    o.max_replicas_per_device = c.cap;
    return o;
}

class PlanSearchOracle : public ::testing::TestWithParam<SearchCase> {};

// From the static placement (the exhaustive oracle's owners), the search reaches the enumerated optimum.
TEST_P(PlanSearchOracle, FindsTheExhaustiveOptimum) {
    const SearchCase& c = GetParam();
    const CostModel m = model_of(c);
    const std::vector<int64_t> counts = counts_of(c);
    BalanceOptions bo;
    bo.cost_eq = c.cost_eq;
    bo.route_rule = c.route;
    bo.max_replicas_per_device = c.cap;
    const PlanSearchOptions so = search_options(c);
    const Placement optimum = plan_exhaustive(counts.data(), c.D, c.E, m, bo);
    const double optimum_s = search_layer_cost(counts.data(), optimum, m, so);
    PlanSearchReport report;
    const Placement found = search_plan(counts.data(), m, Placement::make_static(c.D, c.E), so, &report);
    EXPECT_EQ(check_placement(found, c.cap), "");
    EXPECT_NEAR(report.best_s, optimum_s, 1e-9 * optimum_s);  // equal up to summation order
    EXPECT_DOUBLE_EQ(search_layer_cost(counts.data(), found, m, so), report.best_s);
}

// Started anywhere (here: every expert on every device, within the cap), the result is never worse.
TEST_P(PlanSearchOracle, NeverReturnsWorseThanItsStart) {
    const SearchCase& c = GetParam();
    const CostModel m = model_of(c);
    const std::vector<int64_t> counts = counts_of(c);
    Placement start = Placement::make_static(c.D, c.E);
    for (int e = 0; e < c.E; ++e)
        for (int d = 0; d < c.D; ++d)
            if (c.cap == 0 || start.replicas_per_device()[d] < c.cap) start.add_replica(e, d);
    PlanSearchOptions so = search_options(c);
    so.iterations = 50;            // a short search: few proposals, the guarantee must hold all the same
    so.initial_temperature = 1.0;  // mostly uphill steps accepted
    PlanSearchReport report;
    const Placement found = search_plan(counts.data(), m, start, so, &report);
    EXPECT_LE(report.best_s, report.start_s);
    EXPECT_LE(search_layer_cost(counts.data(), found, m, so), search_layer_cost(counts.data(), start, m, so));
}

const SearchCase kSearchCases[] = {
    {"unit_2x2_eq6_owner", 2, 2, false, 6, RouteRule::kOwner, 0, 1.5, 1},
    {"unit_3x3_eq8_owner", 3, 3, false, 8, RouteRule::kOwner, 0, 1.5, 2},
    {"unit_4x4_eq6_owner_cap1", 4, 4, false, 6, RouteRule::kOwner, 1, 1.0, 3},
    {"paper_4x4_eq6_owner", 4, 4, true, 6, RouteRule::kOwner, 0, 1.5, 4},
    {"paper_4x4_eq8_owner", 4, 4, true, 8, RouteRule::kOwner, 0, 2.0, 5},
    {"unit_3x3_eq6_flow", 3, 3, false, 6, RouteRule::kFlow, 0, 1.5, 6},
    {"paper_3x3_eq8_flow", 3, 3, true, 8, RouteRule::kFlow, 0, 2.0, 7},
    {"paper_4x4_eq6_flow_cap2", 4, 4, true, 6, RouteRule::kFlow, 2, 1.5, 8},
};

INSTANTIATE_TEST_SUITE_P(PlanSearch, PlanSearchOracle, ::testing::ValuesIn(kSearchCases),
                         [](const ::testing::TestParamInfo<SearchCase>& info) { return std::string(info.param.name); });

TEST(PlanSearchOptionsCheck, RejectsAnEquationOtherThanSixOrEight) {
    const CostModel m = unit_cost_model(2);
    const std::vector<int64_t> counts = {3, 1, 1, 3};
    PlanSearchOptions o;
    o.cost_eq = 7;
    EXPECT_THROW(search_plan(counts.data(), m, Placement::make_static(2, 2), o), Error);
}

}  // namespace
}  // namespace prophet
