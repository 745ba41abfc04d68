// The cost model (Eqs 1-8) against hand-worked examples, and the token flow it is computed from.
#include <gtest/gtest.h>

#include "balance/cost_model.h"
#include "balance_fixtures.h"

using namespace prophet;
using prophet::testing::unit_cost_model;

namespace {
// device 0 routes 3 tokens to e0 and 5 to e1; device 1 routes 1 to e0 and 2 to e1
const std::vector<int64_t> kCounts = {3, 5, 1, 2};
}  // namespace

TEST(CostModel, StaticPlacementByHand) {
    const CostModel m = unit_cost_model(2);
    const Placement p = Placement::make_static(2, 2);
    const LayerFlow flow = compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner);
    EXPECT_EQ(flow.computed, (std::vector<int64_t>{4, 7}));  // H0 = 3 + 1, H1 = 5 + 2
    EXPECT_EQ(flow.received, (std::vector<int64_t>{1, 5}));  // R0 = 1 from dev 1, R1 = 5 from dev 0
    EXPECT_EQ(flow.sent, (std::vector<int64_t>{5, 1}));
    EXPECT_EQ(flow.route, (std::vector<int64_t>{3, 5, 1, 2}));
    const CostBreakdown c = predict_layer(m, flow, p);
    EXPECT_DOUBLE_EQ(c.a2a_s, 5.0);   // Eq 1: max R * 1 B / 1 B/s
    EXPECT_DOUBLE_EQ(c.fec_s, 7.0);   // Eq 2: max H * 4 FLOP / 4 FLOP/s
    EXPECT_DOUBLE_EQ(c.bec_s, 14.0);  // Eq 3
    EXPECT_DOUBLE_EQ(c.trans_s, 0.0);
    EXPECT_DOUBLE_EQ(c.eq6_s, 4 * 5.0 + 3 * 7.0);
    EXPECT_DOUBLE_EQ(c.eq8_s, c.eq6_s);
    EXPECT_DOUBLE_EQ(c.a2a_bytes, 6.0);
}

TEST(CostModel, ReplicaByHand) {
    const CostModel m = unit_cost_model(2);
    Placement p = Placement::make_static(2, 2);
    p.add_replica(1, 0);  // device 0 computes its own 5 tokens of e1
    const LayerFlow flow = compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner);
    EXPECT_EQ(flow.computed, (std::vector<int64_t>{9, 2}));
    EXPECT_EQ(flow.received, (std::vector<int64_t>{1, 0}));
    const CostBreakdown c = predict_layer(m, flow, p);
    EXPECT_DOUBLE_EQ(c.a2a_s, 1.0);
    EXPECT_DOUBLE_EQ(c.fec_s, 9.0);
    // Eq 4: D - n = 2 devices (owner + 1 replica holder, the paper's count) * 2 B / (D=2 * 1 B/s)
    EXPECT_DOUBLE_EQ(c.trans_s, 2.0);
    EXPECT_DOUBLE_EQ(c.agg_s, 2.0);    // Eq 5
    EXPECT_DOUBLE_EQ(c.trans_bytes, 2.0);  // the bytes that move: one replica
    EXPECT_DOUBLE_EQ(c.eq6_s, 4 * 1.0 + 3 * 9.0 + 2.0 + 2.0);
    // Eq 8: the one expert's Trans (2 s) does not fit FNEC (1 s) and goes beside FEC (9 s); Agg fits BNEC (2 s)
    EXPECT_DOUBLE_EQ(c.exposed_trans_s, 0.0);
    EXPECT_DOUBLE_EQ(c.eq8_s, 4 * 1.0 + 3 * 9.0);
}

TEST(CostModel, ReplicaHoldersCountIsANamedOption) {
    CostModel m = unit_cost_model(2);
    m.trans_receivers = TransReceivers::kReplicaHolders;  // D - 1 - n: receivers only
    Placement p = Placement::make_static(2, 2);
    p.add_replica(1, 0);
    const CostBreakdown c = predict_layer(m, compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(c.trans_s, 1.0);  // 1 receiver * 2 B / (2 * 1 B/s)
    EXPECT_DOUBLE_EQ(c.agg_s, 1.0);
}

TEST(CostModel, MovedOwnerPaysNoTransOrAggPerIteration) {
    // expert 0 owned by device 1 instead of its home 0: it lives there (moved once, moves.h), nothing per step
    const CostModel m = unit_cost_model(2);
    const Placement p = Placement::make_owners(2, {1, 1});
    EXPECT_EQ(p.transfer_receivers(0), 0);
    EXPECT_EQ(p.transfer_receivers(1), 0);
    const CostBreakdown c = predict_layer(m, compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(c.trans_bytes, 0.0);
    EXPECT_DOUBLE_EQ(c.trans_s, 0.0);
    EXPECT_DOUBLE_EQ(c.agg_s, 0.0);
    EXPECT_DOUBLE_EQ(c.eq6_s, 4 * c.a2a_s + 3 * c.fec_s);
}

TEST(CostModel, Eq8ExposesWhatComputeCannotHide) {
    CostModel m = unit_cost_model(2);
    m.cluster.trans_bytes_per_s = 0.01;  // Trans = 2 devices * 2 B / (2 * 0.01 B/s) = 200 s
    m.cluster.agg_bytes_per_s = 0.05;    // Agg = 40 s
    Placement p = Placement::make_static(2, 2);
    p.add_replica(1, 0);
    const CostBreakdown c = predict_layer(m, compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(c.trans_s, 200.0);
    EXPECT_DOUBLE_EQ(c.agg_s, 40.0);
    // one whole expert: longer than FNEC (1 s), so all of it goes beside FEC (9 s)
    EXPECT_DOUBLE_EQ(c.exposed_trans_s, 200.0 - 9.0);
    EXPECT_DOUBLE_EQ(c.exposed_agg_s, 40.0 - 18.0);  // beside BEC 18 s; BNEC's 2 s cannot take a piece of it
    EXPECT_DOUBLE_EQ(c.eq8_s, 4 * 1.0 + 3 * 9.0 + 191.0 + 22.0);
    // chunks fill both windows: the paper's max(0, T - FEC - FNEC)
    EXPECT_DOUBLE_EQ(c.exposed_trans_chunked_s, 200.0 - 9.0 - 1.0);
    EXPECT_DOUBLE_EQ(c.exposed_agg_chunked_s, 40.0 - 18.0 - 2.0);
    m.transfer_credit = TransferCredit::kChunks;
    const CostBreakdown k = predict_layer(m, compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(k.eq8_s, 4 * 1.0 + 3 * 9.0 + 190.0 + 20.0);
}

TEST(CostModel, WholeExpertSplitExposesWhatChunksWouldHide) {
    // two experts of 0.6 s each, windows 1 s then 0.5 s: the first fits the first window, the second not
    EXPECT_NEAR(exposed_whole_pieces({0.6, 0.6}, 1.0, 0.5), 0.1, 1e-12);
    EXPECT_DOUBLE_EQ(exposed_whole_pieces({0.5, 0.5}, 1.0, 0.0), 0.0);
    EXPECT_DOUBLE_EQ(exposed_whole_pieces({3.0}, 1.0, 1.0), 2.0);  // one expert longer than both windows
}

TEST(CostModel, AllToAllBandwidthBySizeStep) {
    CostModel m = unit_cost_model(2);
    m.cluster.a2a_bandwidth = {{4.0, 1.0}, {INFINITY, 2.0}};  // <= 4 B at 1 B/s, above at 2 B/s
    m.cluster.a2a_latency_s = 0.5;
    const Placement p = Placement::make_static(2, 2);
    const CostBreakdown c = predict_layer(m, compute_flow(kCounts.data(), 2, 2, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(c.a2a_s, 5.0 / 2.0 + 0.5);
    const std::vector<int64_t> small = {3, 1, 1, 2};  // max R = 1 B -> first step
    const CostBreakdown s = predict_layer(m, compute_flow(small.data(), 2, 2, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(s.a2a_s, 1.0 + 0.5);
}

TEST(CostModel, TopologyAwareBusiestLink) {
    // 4 devices, 2 per node; intra-node 4 B/s, inter-node 1 B/s, NIC 3 B/s
    CostModel m = unit_cost_model(4);
    m.topology_aware = true;
    m.cluster.devices_per_node = 2;
    m.cluster.intra_node_bytes_per_s = 4.0;
    m.cluster.inter_node_bytes_per_s = 1.0;
    m.cluster.node_nic_bytes_per_s = 3.0;
    // E = 4 static: expert e on device e. Device 0 sends 8 to e1 (same node) and 2 to e2, 2 to e3 (other node).
    std::vector<int64_t> counts(16, 0);
    counts[0 * 4 + 1] = 8;
    counts[0 * 4 + 2] = 2;
    counts[0 * 4 + 3] = 2;
    const Placement p = Placement::make_static(4, 4);
    const CostBreakdown c = predict_layer(m, compute_flow(counts.data(), 4, 4, p, RouteRule::kOwner), p);
    // links: 0->1 8/4 = 2 s; 0->2 2/1 = 2 s; 0->3 2 s; node 0 egress 4 B / 3 B/s = 1.33 s
    EXPECT_DOUBLE_EQ(c.a2a_s, 2.0);
    counts[0 * 4 + 2] = 5;  // 0->2 5 s; NIC 7/3
    const CostBreakdown c2 = predict_layer(m, compute_flow(counts.data(), 4, 4, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(c2.a2a_s, 5.0);
    // Trans of expert 0 to devices 1 and 2: 2 B each; 0->1 at 4 B/s = 0.5 s, 0->2 at 1 B/s = 2 s
    Placement r = p;
    r.add_replica(0, 1);
    r.add_replica(0, 2);
    const CostBreakdown c3 = predict_layer(m, compute_flow(counts.data(), 4, 4, r, RouteRule::kOwner), r);
    EXPECT_DOUBLE_EQ(c3.trans_s, 2.0);
    EXPECT_DOUBLE_EQ(c3.agg_s, 2.0);
}

TEST(CostModel, FnecEstimateFromModelDims) {
    CostModel m = unit_cost_model(2);
    m.cluster.fnec_s = -1;
    m.cluster.bnec_s = -1;
    m.cluster.compute_flops = 1e12;
    m.model.d_model = 1024;
    m.model.seq_len = 256;
    m.model.tokens_per_device = 1024;
    // 8 N C^2 + 4 N T C = 8*1024*1024^2 + 4*1024*256*1024 FLOP
    const double flops = 8.0 * 1024 * 1024 * 1024 + 4.0 * 1024 * 256 * 1024;
    EXPECT_DOUBLE_EQ(m.fnec_s(), flops / 1e12);
    EXPECT_DOUBLE_EQ(m.bnec_s(), 2 * flops / 1e12);
}

TEST(Flow, LeastLoadedRuleSendsToTheLightestHolder) {
    // 3 devices, 3 experts; expert 0 (owner 0) replicated on device 1; device 2 sends 4 tokens of e0.
    const std::vector<int64_t> counts = {6, 0, 0, /*dev1*/ 1, 0, 0, /*dev2*/ 4, 0, 0};
    Placement p = Placement::make_static(3, 3);
    p.add_replica(0, 1);
    const LayerFlow owner_rule = compute_flow(counts.data(), 3, 3, p, RouteRule::kOwner);
    EXPECT_EQ(owner_rule.computed, (std::vector<int64_t>{10, 1, 0}));
    const LayerFlow least = compute_flow(counts.data(), 3, 3, p, RouteRule::kLeastLoaded);
    EXPECT_EQ(least.computed, (std::vector<int64_t>{6, 5, 0}));
    EXPECT_EQ(least.destination[2 * 3 + 0], 1);
}
