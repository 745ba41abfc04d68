// balance.route_to = "max_flow" (balance/route_max_flow.h): the best of a few max-flow splits, against the routing
// LP of flow_routing.h (its lower bound and, with a free all-to-all, its equal within rounding) and against the
// plain compute-optimal split it must never lose to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <ostream>
#include <string>

#include "balance/flow_routing.h"
#include "balance/flow_split.h"
#include "balance/route_max_flow.h"
#include "balance_fixtures.h"
#include "core/rng.h"

namespace prophet {
namespace {

using testing::paper_cost_model;
using testing::skewed_counts;
using testing::unit_cost_model;

struct MaxFlowCase {
    const char* name;
    int D, E;
    int pricing;         // 0: none (one unit per token), 1: Eq 1 (unit cost model), 2: the paper's cost model
    bool topology;       // the cost model's topology (NVLink domains, NICs) prices the all-to-all
    int replica_one_in;  // each (expert, other device) holds a replica with probability 1 / replica_one_in
};

void PrintTo(const MaxFlowCase& c, std::ostream* os) { *os << c.name; }

CostModel case_model(const MaxFlowCase& c) {
    if (c.pricing == 1) return unit_cost_model(c.D);
    CostModel m = paper_cost_model(c.D, 512);
    m.topology_aware = c.topology;
    if (c.topology) {  // two devices per NVLink domain, four per node, one NIC per node
        m.cluster.nvlink_domain = 2;
        m.cluster.nvlink_bytes_per_s = 300e9;
        m.cluster.pcie_bytes_per_s = 24e9;
        m.cluster.node_nic_bytes_per_s = 12.5e9;
        m.cluster.nics_per_node = 1;
        m.cluster.gpu_injection_bytes_per_s = 100e9;
        m.cluster.gpu_ejection_bytes_per_s = 100e9;
    }
    return m;
}

struct Instance {
    std::vector<int64_t> counts;
    Placement placement;
};

// Zipf-skewed counts (s = 1.2) and random owners, each expert replicated on other devices at random.
Instance random_instance(const MaxFlowCase& c, int trial) {
    const uint64_t seed = static_cast<uint64_t>(1000 * c.D + 10 * c.E + trial);
    Instance in{skewed_counts(c.D, c.E, 64 * c.E / c.D, 1.2, seed), {}};
    Rng rng(seed + 7);
    std::vector<int> owner(c.E);
    for (int& o : owner) o = static_cast<int>(rng.below(c.D));
    in.placement = Placement::make_owners(c.D, owner);
    for (int e = 0; e < c.E; ++e)
        for (int d = 0; d < c.D; ++d)
            if (rng.below(c.replica_one_in) == 0) in.placement.add_replica(e, d);
    return in;
}

// One trial routed by max_flow under the case's cost model: the instance, the kept split and the prices it used.
struct Routed {
    Instance in;
    MaxFlowRouteReport kept;
    LayerFlow flow;
    RoutePricing pricing;
};

class MaxFlowRoute : public ::testing::TestWithParam<MaxFlowCase> {
  protected:
    static constexpr int kTrials = 12;
    static double tolerance(double objective) { return 1e-9 * (1 + std::fabs(objective)); }
    const MaxFlowCase c_ = GetParam();
    const CostModel model_ = case_model(c_);
    const CostModel* cost_ = c_.pricing == 0 ? nullptr : &model_;
    Routed route(int trial) const {
        Routed r{random_instance(c_, trial), {}, {}, {}};
        r.flow = max_flow_route_layer(r.in.counts.data(), c_.D, c_.E, r.in.placement, cost_, &r.kept);
        r.pricing = layer_route_pricing(r.in.counts.data(), c_.D, c_.E, r.in.placement, cost_);
        return r;
    }
};

// The kept split's objective is the objective of the flow it returns, and the routing LP's optimum (the least over
// every fractional split) is never above it.
TEST_P(MaxFlowRoute, TheRoutingLpBoundsItFromBelow) {
    for (int trial = 0; trial < kTrials; ++trial) {
        const Routed r = route(trial);
        const double objective = r.kept.objective;
        EXPECT_NEAR(objective, route_objective(r.pricing, r.flow), tolerance(objective)) << "trial " << trial;
        FlowRouteReport lp;
        flow_route_layer(r.in.counts.data(), c_.D, c_.E, r.in.placement, cost_, &lp);
        EXPECT_LE(lp.lp_objective, objective + tolerance(objective)) << "trial " << trial;
    }
}

// It keeps the least of its splits, so it never loses to the compute-optimal split alone (flow_split.h's default:
// slack 0, holder-local start), which is one of them.
TEST_P(MaxFlowRoute, NeverLosesToTheComputeOptimalSplit) {
    for (int trial = 0; trial < kTrials; ++trial) {
        const Routed r = route(trial);
        const LayerFlow plain =
            fast_split_layer(r.in.counts.data(), c_.D, c_.E, r.in.placement, cost_ ? &cost_->cluster : nullptr);
        EXPECT_LE(r.kept.objective, route_objective(r.pricing, plain) + tolerance(r.kept.objective))
            << "trial " << trial;
        const int splits = 1 + static_cast<int>(std::size(kMaxFlowLevels));  // holder-local at T*, node-local at all
        EXPECT_EQ(r.kept.splits_tried, r.in.placement.num_replicas() > 0 ? splits : 0);
    }
}

// With the all-to-all free (a2a weight 0) the objective is compute alone, which the level-0 split minimises over
// fractional splits: its max H is the LP's within the rounding, under one token per replicated expert on a device.
TEST_P(MaxFlowRoute, WithAFreeAllToAllItMeetsTheLpWithinRounding) {
    const MaxFlowCase& c = c_;
    RoutePricing compute_only = route_pricing(cost_, c.D, 0.0);
    compute_only.a2a_weight = 0;
    for (int trial = 0; trial < kTrials; ++trial) {
        const Instance in = random_instance(c, trial);
        MaxFlowRouteReport kept;
        max_flow_route_priced(in.counts.data(), c.D, c.E, in.placement, compute_only, nullptr, &kept);
        FlowRouteReport lp;
        flow_route_priced(in.counts.data(), c.D, c.E, in.placement, compute_only, &lp);
        int replicated = 0;  // at least the replicated experts any one device holds
        for (int e = 0; e < c.E; ++e) replicated += in.placement.num_replicas_of(e) > 0;
        const double rounding = compute_only.compute_weight * replicated;
        EXPECT_LE(kept.objective, lp.lp_objective + rounding + tolerance(lp.lp_objective)) << "trial " << trial;
        EXPECT_LE(lp.lp_objective, kept.objective + tolerance(kept.objective)) << "trial " << trial;
    }
}

const MaxFlowCase kCases[] = {
    {"unit_prices_D4_E8", 4, 8, 0, false, 3},       {"eq1_D4_E8", 4, 8, 1, false, 2},
    {"paper_D8_E16", 8, 16, 2, false, 3},           {"paper_topology_D8_E16", 8, 16, 2, true, 3},
    {"paper_topology_D16_E32", 16, 32, 2, true, 6}, {"paper_topology_dense_D8_E16", 8, 16, 2, true, 1},
    {"no_replicas_D4_E8", 4, 8, 2, false, 1 << 30},
};

INSTANTIATE_TEST_SUITE_P(Cases, MaxFlowRoute, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<MaxFlowCase>& info) {
                             return std::string(info.param.name);
                         });

}  // namespace
}  // namespace prophet
