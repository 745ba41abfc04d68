// perturbed_cluster: each truth scale moves exactly the figures docs/sweep.md ("Uncertainty") says it moves.
#include <gtest/gtest.h>

#include <cmath>

#include "../balance/balance_fixtures.h"
#include "sim/truth_scale.h"

using namespace prophet;
using namespace prophet::sim;

TEST(TruthScale, EachScaleMovesItsFigures) {
    ClusterSpec c = prophet::testing::unit_cost_model(4).cluster;
    c.devices_per_node = 2;
    c.a2a_bandwidth = {{1024, 2.0}, {INFINITY, 8.0}};
    c.intra_node_bytes_per_s = 10;
    c.inter_node_bytes_per_s = 5;
    c.node_nic_bytes_per_s = 6;
    c.a2a_latency_s = 0.5;
    c.nvlink_bytes_per_s = 40;
    c.pcie_bytes_per_s = 12;
    c.gpu_injection_bytes_per_s = 30;
    c.gpu_ejection_bytes_per_s = 20;
    c.nvlink_latency_s = 0.1;
    c.intra_node_latency_s = 0.2;
    c.inter_node_latency_s = 0.4;
    c.memory_bytes_per_s = 100;
    c.step_tail_s = 3;
    c.bnec_s = -1;  // not measured: stays so
    TruthScale s;
    EXPECT_TRUE(s.nominal());
    s.compute = 0.5;
    s.bandwidth = 2;
    s.latency = 3;
    s.intra_bandwidth = 0.5;
    s.inter_bandwidth = 0.25;
    EXPECT_FALSE(s.nominal());
    const ClusterSpec p = perturbed_cluster(c, s);
    EXPECT_DOUBLE_EQ(p.compute_flops, 2.0);
    EXPECT_DOUBLE_EQ(p.memory_bytes_per_s, 50);
    EXPECT_DOUBLE_EQ(p.fnec_s, 2.0);       // measured 1 s on a device half as fast
    EXPECT_DOUBLE_EQ(p.step_tail_s, 6.0);
    EXPECT_EQ(p.bnec_s, -1);
    EXPECT_DOUBLE_EQ(p.a2a_bandwidth[0].bytes_per_s, 4.0);
    EXPECT_DOUBLE_EQ(p.a2a_bandwidth[1].bytes_per_s, 16.0);
    EXPECT_DOUBLE_EQ(p.a2a_bandwidth[0].max_message_bytes, 1024);
    EXPECT_DOUBLE_EQ(p.trans_bytes_per_s, 2.0);
    EXPECT_DOUBLE_EQ(p.agg_bytes_per_s, 2.0);
    EXPECT_DOUBLE_EQ(p.intra_node_bytes_per_s, 10 * 2 * 0.5);
    EXPECT_DOUBLE_EQ(p.inter_node_bytes_per_s, 5 * 2 * 0.25);
    EXPECT_DOUBLE_EQ(p.node_nic_bytes_per_s, 6 * 2 * 0.25);
    EXPECT_DOUBLE_EQ(p.a2a_latency_s, 1.5);
    // topology ports: NVLink and PCIe are intra-node classes; a GPU's total ports move with bandwidth only
    EXPECT_DOUBLE_EQ(p.nvlink_bytes_per_s, 40 * 2 * 0.5);
    EXPECT_DOUBLE_EQ(p.pcie_bytes_per_s, 12 * 2 * 0.5);
    EXPECT_DOUBLE_EQ(p.gpu_injection_bytes_per_s, 30 * 2);
    EXPECT_DOUBLE_EQ(p.gpu_ejection_bytes_per_s, 20 * 2);
    EXPECT_DOUBLE_EQ(p.nvlink_latency_s, 0.1 * 3);
    EXPECT_DOUBLE_EQ(p.intra_node_latency_s, 0.2 * 3);
    EXPECT_DOUBLE_EQ(p.inter_node_latency_s, 0.4 * 3);
    EXPECT_EQ(p.num_devices, 4);
    EXPECT_EQ(p.devices_per_node, 2);
}
