// The ablation switches of the `flow` policy (balance/policy_flow.h): balance.flow_transfer_aware (candidates scored
// with or without Trans/Agg) and balance.flow_topology (the topology-aware planning model and the nearness
// tie-breaks, or the flat model).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "balance/cluster.h"
#include "balance/policy_flow.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

// A slow Trans/Agg link makes every copy cost more than it gains: aware, flow keeps no replica; unaware, the
// transfer is invisible and it replicates; the gate (horizon > 0) works only when aware.
struct TransferCase {
    bool aware;
    int horizon;
    bool expect_replicas;
};

class FlowTransferAware : public ::testing::TestWithParam<TransferCase> {};

TEST_P(FlowTransferAware, ReplicatesUnderASlowTransferLinkOnlyWhenUnaware) {
    const TransferCase c = GetParam();
    const int D = 4, E = 4;
    const std::vector<int64_t> counts = {400, 10, 10, 10, 400, 10, 10, 10, 400, 10, 10, 10, 400, 10, 10, 10};
    CostModel cost = testing::unit_cost_model(D);
    cost.cluster.trans_bytes_per_s = cost.cluster.agg_bytes_per_s = 1e-6;
    BalanceOptions o;
    o.route_rule = RouteRule::kFlow;
    o.cost_eq = 6;
    o.flow_transfer_aware = c.aware;
    o.flow_horizon = c.horizon;
    FlowPlanReport rep;
    const Placement p = plan_flow(counts.data(), D, E, cost, o, Placement::make_static(D, E), &rep);
    EXPECT_EQ(p.num_replicas() > 0, c.expect_replicas);
    EXPECT_FALSE(rep.kept_current && !c.aware) << "the transfer gate ran while transfer-unaware";
}

INSTANTIATE_TEST_SUITE_P(Cases, FlowTransferAware,
                         ::testing::Values(TransferCase{true, 0, false}, TransferCase{false, 0, true},
                                           TransferCase{true, 1, false}, TransferCase{false, 1, true}));

// Unaware, the chosen candidate's predicted time is 4 T_A2A + 3 T_FEC of it (no Trans/Agg), under either
// equation; checked against predict_layer of the placement under the owner rule (no split stand-in).
class FlowTransferFreeScore : public ::testing::TestWithParam<int> {};

TEST_P(FlowTransferFreeScore, IsAllToAllPlusComputeOfTheChosenPlacement) {
    const int D = 8, E = 16;
    const std::vector<int64_t> counts = testing::skewed_counts(D, E, 4096, 1.4, 7);
    const CostModel cost = testing::paper_cost_model(D, 4096);
    BalanceOptions o;
    o.route_rule = RouteRule::kOwner;
    o.cost_eq = GetParam();
    o.flow_transfer_aware = false;
    FlowPlanReport rep;
    const Placement p = plan_flow(counts.data(), D, E, cost, o, Placement::make_static(D, E), &rep);
    const CostBreakdown c = predict_layer(cost, compute_flow(counts.data(), D, E, p, RouteRule::kOwner, &cost), p);
    EXPECT_NEAR(rep.predicted_s, 4.0 * c.a2a_s + 3.0 * c.fec_s, 1e-12 * rep.predicted_s);
    EXPECT_GT(c.trans_s, 0.0) << "the case should replicate, or there is no transfer to leave out";
}

INSTANTIATE_TEST_SUITE_P(Equations, FlowTransferFreeScore, ::testing::Values(6, 8));

// The topology-aware cost model on a cluster file with nodes (and NVLink domains).
CostModel file_cost_model(const std::string& cluster_file) {
    CostModel cost = testing::paper_cost_model(16, 4096);
    cost.cluster = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + cluster_file);
    cost.topology_aware = true;
    return cost;
}

// The same cluster without a layout: flat model, one node, no NVLink (every pair the same link class).
CostModel without_layout(CostModel cost) {
    cost.topology_aware = false;
    cost.cluster.devices_per_node = cost.cluster.num_devices;
    cost.cluster.nvlink_domain = 1;
    return cost;
}

bool same_placement(const Placement& a, const Placement& b) {
    if (a.owner != b.owner) return false;
    for (int e = 0; e < a.num_experts; ++e)
        for (int d = 0; d < a.num_devices; ++d)
            if (a.holds(e, d) != b.holds(e, d)) return false;
    return true;
}

struct TopologyCase {
    const char* cluster_file;
    RouteRule rule;
};

// One case's cluster file: its cost model, D devices and E = 2 D experts, the options with flow's topology switch
// on and off under the case's route rule, and the skewed counts and static start each plan of seeds 1..kSeeds uses.
class FlowTopology : public ::testing::TestWithParam<TopologyCase> {
  protected:
    static constexpr uint64_t kSeeds = 6;

    void SetUp() override {
        cost_ = file_cost_model(GetParam().cluster_file);
        devices_ = cost_.cluster.num_devices;
        experts_ = 2 * devices_;
        on_.route_rule = off_.route_rule = GetParam().rule;
        off_.flow_topology = false;
    }
    std::vector<int64_t> counts(uint64_t seed) const {
        return testing::skewed_counts(devices_, experts_, 4096, 1.2, seed);
    }
    Placement plan(const std::vector<int64_t>& counts, const CostModel& cost, const BalanceOptions& options) const {
        return plan_flow(counts.data(), devices_, experts_, cost, options, Placement::make_static(devices_, experts_));
    }

    CostModel cost_;
    int devices_ = 0, experts_ = 0;
    BalanceOptions on_, off_;
};

// Off, flow plans as it would (on) for the same cluster with its layout erased: the link classes reach nothing.
TEST_P(FlowTopology, OffPlansAsOnTheClusterWithoutLayout) {
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
        const std::vector<int64_t> c = counts(seed);
        EXPECT_TRUE(same_placement(plan(c, cost_, off_), plan(c, without_layout(cost_), on_)))
            << GetParam().cluster_file << " seed " << seed;
    }
}

// On, the layout changes some plan (else the switch would measure nothing).
TEST_P(FlowTopology, OnUsesTheLayout) {
    int differ = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
        const std::vector<int64_t> c = counts(seed);
        differ += !same_placement(plan(c, cost_, on_), plan(c, cost_, off_));
    }
    EXPECT_GT(differ, 0) << GetParam().cluster_file;
}

INSTANTIATE_TEST_SUITE_P(Clusters, FlowTopology,
                         ::testing::Values(TopologyCase{"hpwnv-16.toml", RouteRule::kFlow},
                                           TopologyCase{"h100-16.toml", RouteRule::kFlow},
                                           TopologyCase{"hpwnv-16.toml", RouteRule::kOwner}));

}  // namespace
}  // namespace prophet
