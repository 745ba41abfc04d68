// test_whole_expert_credit.cpp: Eq 8's whole-expert credit on a topology-aware cost model (cost_model.h) against
// the simulator's `time` split (sim/simulator.h split_transfer), its slow oracle: each replicated expert timed
// alone through predict_layer on a placement holding only its copies, first fit into the non-expert window, the
// rest timed together beside the expert compute. A middle block's exposed Trans is max(0, rest - FEC), Agg
// max(0, rest - BEC).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../balance/balance_fixtures.h"
#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "core/rng.h"
#include "sim/simulator.h"

namespace prophet::sim {
namespace {

ClusterSpec shipped(const std::string& name) {
    return load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + name);
}

struct CreditCase {
    const char* name;
    const char* cluster;
    TransBroadcast broadcast;
    double replica_density;  // share of the other (expert, device) slots holding a replica
    double window_scale;     // FNEC and BNEC as multiples of one inter-node copy's time
};

class WholeExpertCredit : public ::testing::TestWithParam<CreditCase> {};

// random owners on distinct devices where possible, about `density` of the other slots holding a replica
Placement random_replicas(int D, int E, double density, Rng& rng) {
    Placement p = Placement::make_static(D, E);
    for (int e = 0; e < E; ++e)
        for (int d = 0; d < D; ++d)
            if (d != p.owner[e] && rng.uniform() < density) p.add_replica(e, d);
    return p;
}

TEST_P(WholeExpertCredit, EqualsTheSimulatorsTimeSplit) {
    const CreditCase c = GetParam();
    CostModel m;
    m.cluster = shipped(c.cluster);
    m.topology_aware = true;
    m.trans_broadcast = c.broadcast;
    m.trans_receivers = TransReceivers::kReplicaHolders;  // what the simulator times
    const int D = m.cluster.num_devices, E = 2 * D;
    m.model = {1024, 2048, 256, 4, 1024};
    const double copy_s = m.expert_bytes() / m.cluster.node_nic_bytes_per_s;
    m.cluster.fnec_s = c.window_scale * copy_s;
    m.cluster.bnec_s = 2 * c.window_scale * copy_s;
    Rng rng(7);
    int exposed_trans = 0, exposed_agg = 0, some_fit = 0;
    for (int trial = 0; trial < 12; ++trial) {
        const std::vector<int64_t> counts = testing::skewed_counts(D, E, 512, 1.1, 100 + trial);
        const Placement p = random_replicas(D, E, c.replica_density, rng);
        const LayerFlow flow = compute_flow(counts.data(), D, E, p, RouteRule::kOwner);
        const CostBreakdown b = predict_layer(m, flow, p);
        const TransferSplit trans = split_transfer(m, flow, p, SplitRule::kTime, b.fnec_s, false);
        const TransferSplit agg = split_transfer(m, flow, p, SplitRule::kTime, b.bnec_s, true);
        const double tol = 1e-12 * (b.trans_s + b.agg_s);
        EXPECT_NEAR(b.exposed_trans_s, std::max(0.0, trans.under_expert_s - b.fec_s), tol) << c.name << " " << trial;
        EXPECT_NEAR(b.exposed_agg_s, std::max(0.0, agg.under_expert_s - b.bec_s), tol) << c.name << " " << trial;
        EXPECT_LE(trans.under_nec_s, b.fnec_s * (1 + 1e-12));  // what fits the first window stays hidden
        exposed_trans += b.exposed_trans_s > 0;
        exposed_agg += b.exposed_agg_s > 0;
        some_fit += std::find(trans.nec_experts.begin(), trans.nec_experts.end(), 1) != trans.nec_experts.end();
    }
    RecordProperty("trials_with_exposed_trans", exposed_trans);
    RecordProperty("trials_with_exposed_agg", exposed_agg);
    RecordProperty("trials_with_an_expert_beside_fnec", some_fit);
}

INSTANTIATE_TEST_SUITE_P(
    Topology, WholeExpertCredit,
    ::testing::Values(CreditCase{"star_h100_sparse", "h100-16.toml", TransBroadcast::kStar, 0.05, 1.5},
                      CreditCase{"star_h100_dense", "h100-16.toml", TransBroadcast::kStar, 0.3, 3.0},
                      CreditCase{"star_h100_64", "h100-64.toml", TransBroadcast::kStar, 0.03, 2.0},
                      CreditCase{"chain_hpwnv", "hpwnv-16.toml", TransBroadcast::kChain, 0.1, 0.5},
                      CreditCase{"chain_hpnv_dense", "hpnv-16.toml", TransBroadcast::kChain, 0.4, 4.0},
                      CreditCase{"star_hpwnv_wide_window", "hpwnv-16.toml", TransBroadcast::kStar, 0.1, 20.0},
                      CreditCase{"star_h100_everything_fits", "h100-16.toml", TransBroadcast::kStar, 0.05, 400.0}),
    [](const ::testing::TestParamInfo<CreditCase>& info) { return std::string(info.param.name); });

// One hot expert copied to the three other nodes of a star: all three copies leave its owner's one NIC, so it
// takes three copy times alone and fits neither window; Trans x g_e / counted (the flat share) would have hidden
// half of it beside FNEC.
TEST(WholeExpertCredit, OneExpertToEveryNodeOutlastsTheNonExpertWindow) {
    CostModel m;
    m.cluster = shipped("h100-32.toml");
    m.topology_aware = true;
    m.trans_broadcast = TransBroadcast::kStar;
    m.model = {1024, 2048, 256, 4, 1024};
    const int D = m.cluster.num_devices, E = D, per_node = m.cluster.devices_per_node;
    const std::vector<int64_t> counts(static_cast<size_t>(D) * E, 1);  // FEC far below one copy
    Placement p = Placement::make_static(D, E);
    for (int node = 1; node < D / per_node; ++node) p.add_replica(0, node * per_node);
    const LayerFlow flow = compute_flow(counts.data(), D, E, p, RouteRule::kOwner);
    const double copies = static_cast<double>(D / per_node - 1);
    m.cluster.fnec_s = 0.5 * predict_layer(m, flow, p).trans_s;  // half of all three copies
    m.cluster.bnec_s = m.cluster.fnec_s;                         // Agg alone outlasts it too
    const CostBreakdown b = predict_layer(m, flow, p);
    ASSERT_GT(copies, 1);
    ASSERT_LT(b.fec_s, 0.1 * b.trans_s);
    EXPECT_DOUBLE_EQ(b.exposed_trans_s, std::max(0.0, b.trans_s - b.fec_s));
    EXPECT_DOUBLE_EQ(b.exposed_agg_s, std::max(0.0, b.agg_s - b.bec_s));
    EXPECT_GT(b.exposed_trans_s, b.exposed_trans_chunked_s);  // chunks would fill both windows
}

}  // namespace
}  // namespace prophet::sim
