// flow's extra copies after its candidate families (balance.flow_extra_copy_rounds, flow_extra_copies.h): the pass
// starts from the families' choice and adds copies of experts that already have copies, and (NIC relief, on a
// topology with one NIC per node) of experts filling the busiest NIC, in a node without a holder; so its plan keeps
// those owners and copies, is never predicted slower, and on the cases below is predicted strictly faster.
#include <gtest/gtest.h>

#include <string>

#include "balance/cluster.h"
#include "balance/policy_flow.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

struct ExtraCopyCase {
    const char* name;
    const char* cluster_file;  // "" = the flat paper cost model (testing::paper_cost_model)
    int D, E;
    double zipf_s;
    int cost_eq;         // balance.cost_eq (6 or 8)
    int cap;             // balance.max_replicas_per_device
    bool expect_faster;  // the pass finds a copy worth its transfer here (checked, not assumed)
};

CostModel case_cost_model(const ExtraCopyCase& c) {
    CostModel cost = testing::paper_cost_model(c.D, 2048);
    if (std::string(c.cluster_file).empty()) return cost;
    cost.cluster = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + c.cluster_file);
    cost.topology_aware = true;
    return cost;
}

struct TwoPlans {
    Placement families, extra;  // rounds 0 and 8
    FlowPlanReport families_report, extra_report;
};

TwoPlans plan_both(const ExtraCopyCase& c, uint64_t seed) {
    const CostModel cost = case_cost_model(c);
    const std::vector<int64_t> counts = testing::skewed_counts(c.D, c.E, 2048, c.zipf_s, seed);
    BalanceOptions o;
    o.route_rule = RouteRule::kFlow;
    o.cost_eq = c.cost_eq;
    o.max_replicas_per_device = c.cap;
    TwoPlans t;
    const Placement start = Placement::make_static(c.D, c.E);
    o.flow_extra_copy_rounds = 0;
    t.families = plan_flow(counts.data(), c.D, c.E, cost, o, start, &t.families_report);
    o.flow_extra_copy_rounds = 8;
    t.extra = plan_flow(counts.data(), c.D, c.E, cost, o, start, &t.extra_report);
    return t;
}

class FlowExtraCopies : public ::testing::TestWithParam<ExtraCopyCase> {};

// a new copy on device d of an expert the families left unreplicated: only NIC relief makes one, on a topology
// with one NIC per node and in a node where the families held it nowhere
bool is_nic_relief(const CostModel& cost, const Placement& families, int e, int d) {
    if (!cost.topology_aware || cost.cluster.nics_per_node != 1) return false;
    for (int h = 0; h < families.num_devices; ++h)
        if (families.holds(e, h) && cost.cluster.node_of(h) == cost.cluster.node_of(d)) return false;
    return true;
}

TEST_P(FlowExtraCopies, KeepsTheFamiliesChoiceAndAddsOnlyItsKindsOfCopies) {
    const ExtraCopyCase c = GetParam();
    const CostModel cost = case_cost_model(c);
    for (uint64_t seed = 11; seed <= 13; ++seed) {
        const TwoPlans t = plan_both(c, seed);
        EXPECT_EQ(t.extra.owner, t.families.owner) << "seed " << seed;
        for (int e = 0; e < c.E; ++e)
            for (int d = 0; d < c.D; ++d) {
                if (t.families.holds(e, d)) {
                    EXPECT_TRUE(t.extra.holds(e, d)) << "e " << e << " d " << d;
                }
                if (t.extra.holds(e, d) && !t.families.holds(e, d) && t.families.num_replicas_of(e) == 0) {
                    EXPECT_TRUE(is_nic_relief(cost, t.families, e, d)) << "copy of expert " << e;
                }
            }
        if (c.cap > 0) {
            for (int r : t.extra.replicas_per_device()) EXPECT_LE(r, c.cap);
        }
    }
}

TEST_P(FlowExtraCopies, IsNeverPredictedSlowerAndFasterWhereExpected) {
    const ExtraCopyCase c = GetParam();
    int faster = 0;
    for (uint64_t seed = 11; seed <= 13; ++seed) {
        const TwoPlans t = plan_both(c, seed);
        EXPECT_LE(t.extra_report.predicted_s, t.families_report.predicted_s) << "seed " << seed;
        faster += t.extra_report.predicted_s < t.families_report.predicted_s;
        EXPECT_EQ(t.extra_report.replicas, t.extra.num_replicas());
    }
    if (c.expect_faster) {
        EXPECT_GT(faster, 0) << "no seed gained: the pass found nothing on " << c.name;
    }
}

INSTANTIATE_TEST_SUITE_P(Table, FlowExtraCopies,
                         ::testing::Values(ExtraCopyCase{"flat_eq8", "", 16, 32, 1.2, 8, 0, true},
                                           ExtraCopyCase{"flat_eq6", "", 16, 32, 1.2, 6, 0, false},
                                           ExtraCopyCase{"flat_cap1", "", 16, 64, 1.4, 6, 1, false},
                                           ExtraCopyCase{"hpnv16_eq6", "hpnv-16.toml", 16, 32, 1.2, 6, 0, true},
                                           ExtraCopyCase{"hpnv16_eq8", "hpnv-16.toml", 16, 32, 1.2, 8, 0, true},
                                           ExtraCopyCase{"hpnv16_cap2", "hpnv-16.toml", 16, 32, 1.2, 8, 2, false}),
                         [](const ::testing::TestParamInfo<ExtraCopyCase>& info) {
                             return std::string(info.param.name);
                         });

}  // namespace
}  // namespace prophet
