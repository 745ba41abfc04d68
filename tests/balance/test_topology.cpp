// test_topology.cpp: the topology-aware pricing (balance/topology.h) and the cluster files that describe a
// topology: link classes, per-device egress queues for Trans, NIC rails, and HPNV vs HPWNV where the hardware
// differs (an NVLink pair) and nowhere else.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/options.h"
#include "balance/topology.h"
#include "core/config.h"
#include "core/error.h"
#include "core/rng.h"

namespace prophet {
namespace {

ClusterSpec shipped(const std::string& name) {
    return load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + name);
}

// a D x D traffic matrix with the given (src, dst, bytes) entries
std::vector<double> traffic(int D, const std::vector<std::tuple<int, int, double>>& entries) {
    std::vector<double> bytes(static_cast<size_t>(D) * D, 0.0);
    for (const auto& [s, d, b] : entries) bytes[static_cast<size_t>(s) * D + d] += b;
    return bytes;
}

// HPNV/HPWNV pricing of one layer where expert 0 (home: device 0) is replicated on `holder`, with the paper's
// MoE-GPT-M dims and 1024 tokens per device spread evenly (the same all-to-all on both clusters)
CostBreakdown price_replica(const ClusterSpec& cluster, int holder) {
    CostModel m;
    m.cluster = cluster;
    m.topology_aware = cluster.topology;  // what plan/sweep do when plan.topology_aware is not set
    m.model = {1024, 2048, 256, 4, 1024};
    const int D = 16, E = 16;
    std::vector<int64_t> counts(static_cast<size_t>(D) * E, 64);
    Placement p = Placement::make_static(D, E);
    p.add_replica(0, holder);
    return predict_layer(m, compute_flow(counts.data(), D, E, p, RouteRule::kOwner), p);
}

TEST(Topology, FilesThatDescribeTopologyTurnItOn) {
    for (const char* name :
         {"hpwnv-16.toml", "hpnv-16.toml", "hpwnv-32.toml", "lpwnv-8.toml", "h100-8.toml", "h100-16.toml",
          "h100-32.toml", "h200-8.toml", "h200-16.toml", "h200-32.toml", "h100-64.toml", "h800-8.toml", "h800-16.toml"})
        EXPECT_TRUE(shipped(name).topology) << name;
    for (const char* name : {"cpu-local.toml", "cpu-link-8g.toml"}) EXPECT_FALSE(shipped(name).topology) << name;
    // an explicit `topology = false` wins over the description
    Config c(cluster_schema(), "test");
    c.merge_toml_string("[cluster]\nnum_devices = 4\ncompute_tflop_s = 1.0\na2a_gbit_s = [10.0]\n"
                        "trans_gbit_s = 1.0\npcie_gbit_s = 96.0\ntopology = false\n",
                        "inline");
    EXPECT_FALSE(cluster_from_config(c, "inline").topology);
}

TEST(Topology, WrittenClusterReadsBackWithItsTopology) {
    // a written cluster reads back with its topology
    const ClusterSpec h = shipped("hpnv-16.toml");
    Config back(cluster_schema(), "round trip");
    back.merge_toml_string(cluster_to_toml(h), "round trip");
    const ClusterSpec r = cluster_from_config(back, "round trip");
    EXPECT_TRUE(r.topology);
    EXPECT_EQ(r.nvlink_domain, 2);
    EXPECT_DOUBLE_EQ(r.nvlink_bytes_per_s, h.nvlink_bytes_per_s);
    EXPECT_DOUBLE_EQ(r.pcie_bytes_per_s, h.pcie_bytes_per_s);
    // and a file without topology reads back without it
    const ClusterSpec cpu = shipped("cpu-local.toml");
    Config flat(cluster_schema(), "round trip");
    flat.merge_toml_string(cluster_to_toml(cpu), "round trip");
    EXPECT_FALSE(cluster_from_config(flat, "round trip").topology);
}

TEST(Topology, PlanCostModelFollowsTheFileUnlessPlanKeysOverride) {
    // cost_model_for_trace is what `prophet plan` and the sim sweeps build their model with
    Schema schema;
    add_cost_model_keys(schema, "");
    const TraceShape shape{16, 16, 16384, 1024, 2048, 256};
    const ClusterSpec hpnv = shipped("hpnv-16.toml");
    auto topology_aware = [&](const std::string& set) {
        Config c(schema, "plan");
        if (!set.empty()) c.apply_set(set);
        return cost_model_for_trace(hpnv, "hpnv-16.toml", shape, "trace", c, "").topology_aware;
    };
    EXPECT_TRUE(topology_aware(""));
    EXPECT_FALSE(topology_aware("plan.topology_aware=false"));
    ClusterSpec flat = hpnv;
    flat.topology = false;
    Config c(schema, "plan");
    EXPECT_FALSE(cost_model_for_trace(flat, "flat", shape, "trace", c, "").topology_aware);
    c.apply_set("plan.topology_aware=true");
    EXPECT_TRUE(cost_model_for_trace(flat, "flat", shape, "trace", c, "").topology_aware);
    // the broadcast likewise: the file's chain unless plan.trans_broadcast says otherwise
    auto broadcast = [&](const std::string& set) {
        Config p(schema, "plan");
        if (!set.empty()) p.apply_set(set);
        return cost_model_for_trace(hpnv, "hpnv-16.toml", shape, "trace", p, "").trans_broadcast;
    };
    EXPECT_EQ(broadcast(""), TransBroadcast::kChain);
    EXPECT_EQ(broadcast("plan.trans_broadcast=\"star\""), TransBroadcast::kStar);
}

TEST(Topology, BadTopologyKeysNameTheKey) {
    const std::string base = "[cluster]\nnum_devices = 8\ndevices_per_node = 4\ncompute_tflop_s = 1.0\n"
                             "a2a_gbit_s = [10.0]\ntrans_gbit_s = 1.0\n";
    auto message = [&](const std::string& extra) {
        Config c(cluster_schema(), "test");
        c.merge_toml_string(base + extra, "inline");
        try {
            cluster_from_config(c, "inline");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    EXPECT_NE(message("nvlink_domain = 3\nnvlink_gbit_s = 1.0\n").find("cluster.nvlink_domain"), std::string::npos);
    EXPECT_NE(message("nvlink_domain = 2\n").find("cluster.nvlink_gbit_s"), std::string::npos);
    EXPECT_NE(message("nics_per_node = 5\n").find("cluster.nics_per_node"), std::string::npos);
}

TEST(Topology, IntraNodeReplicaIsPricedByTheLinkBetweenItsDevices) {
    const ClusterSpec hpnv = shipped("hpnv-16.toml"), hpwnv = shipped("hpwnv-16.toml");
    const double expert_bytes = 2.0 * 1024 * 2048 * 4;
    // device 1 is device 0's NVLink partner on HPNV, a PCIe peer on HPWNV
    const CostBreakdown nv = price_replica(hpnv, 1), pcie = price_replica(hpwnv, 1);
    EXPECT_DOUBLE_EQ(nv.trans_s, expert_bytes / (448e9 / 8));
    EXPECT_DOUBLE_EQ(pcie.trans_s, expert_bytes / (96e9 / 8));
    EXPECT_DOUBLE_EQ(nv.agg_s, nv.trans_s);
    EXPECT_DOUBLE_EQ(pcie.agg_s, pcie.trans_s);
    // the all-to-all crosses the nodes through the same PCIe ports and NICs: equal on both
    EXPECT_DOUBLE_EQ(nv.a2a_s, pcie.a2a_s);
    // a replica on device 2 (same node, other pair: PCIe on both) and on device 4 (other node) price the same
    for (int holder : {2, 4, 15}) {
        const CostBreakdown a = price_replica(hpnv, holder), b = price_replica(hpwnv, holder);
        EXPECT_DOUBLE_EQ(a.trans_s, b.trans_s) << "holder " << holder;
        EXPECT_DOUBLE_EQ(a.agg_s, b.agg_s) << "holder " << holder;
        EXPECT_DOUBLE_EQ(a.eq8_s, b.eq8_s) << "holder " << holder;
    }
    // inter-node only: the GPU's PCIe port (96 Gb/s) binds before the NIC (100 Gb/s) on both
    EXPECT_DOUBLE_EQ(price_replica(hpnv, 4).trans_s, expert_bytes / (96e9 / 8));
}

TEST(Topology, TransIsAPerOwnerBroadcastThroughEgressQueues) {
    const ClusterSpec h = shipped("h100-8.toml");  // NVSwitch: one NVLink domain of 8
    const double B = 64e6, port = h.nvlink_bytes_per_s, lat = h.nvlink_latency_s;
    // one owner to 3 receivers: its egress queue holds 3 B
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(8, {{0, 1, B}, {0, 2, B}, {0, 3, B}})), 3 * B / port + lat);
    // three owners to one receiver each proceed in parallel
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(8, {{0, 1, B}, {2, 3, B}, {4, 5, B}})), B / port + lat);
    // Agg, the reverse: three senders into one owner queue on its ingress
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(8, {{1, 0, B}, {2, 0, B}, {3, 0, B}})), 3 * B / port + lat);
    // halving every bandwidth doubles the transfer part, not the latency
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(8, {{0, 1, B}}), 0.5), 2 * B / port + lat);
}

TEST(Topology, ChainBroadcastPutsOneCopyOnEachLinkNodeByNode) {
    // expert 0 (home 0) replicated on 1 (same node), 4 and 8 (other nodes) of HPWNV: PCIe ports 96 Gb/s
    CostModel m;
    m.cluster = shipped("hpwnv-16.toml");
    m.topology_aware = true;
    m.model = {1024, 2048, 256, 4, 1024};
    const double B = m.expert_bytes(), pcie = m.cluster.pcie_bytes_per_s;
    std::vector<int64_t> counts(16 * 16, 64);
    Placement p = Placement::make_static(16, 16);
    for (int d : {8, 1, 4}) p.add_replica(0, d);
    const LayerFlow flow = compute_flow(counts.data(), 16, 16, p, RouteRule::kOwner);
    // star: the home's port queues three copies
    EXPECT_DOUBLE_EQ(predict_layer(m, flow, p).trans_s, 3 * B / pcie);
    // chain 0 -> 1 -> 4 -> 8: every port sends and receives one copy; node 0's NIC carries it once (the ring's own
    // rate, trans_gbit_s, lifted out of the way here; ChainBroadcastForwardsAtMostAtTheTransRate covers it)
    m.trans_broadcast = TransBroadcast::kChain;
    const double papers_rate = m.cluster.trans_bytes_per_s;
    m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = 1e15;
    const CostBreakdown chain = predict_layer(m, flow, p);
    EXPECT_DOUBLE_EQ(chain.trans_s, B / pcie);
    EXPECT_DOUBLE_EQ(chain.agg_s, B / pcie);
    EXPECT_DOUBLE_EQ(chain.trans_bytes, 3 * B);  // the receivers' bytes, as in the flat model
    // a home in the middle of its node: its node's receivers first (0, then 3), then the other nodes (5)
    Placement q = Placement::make_static(16, 16);
    for (int d : {0, 3, 5}) q.add_replica(2, d);
    const CostBreakdown mid = predict_layer(m, compute_flow(counts.data(), 16, 16, q, RouteRule::kOwner), q);
    EXPECT_DOUBLE_EQ(mid.trans_s, B / pcie);
    // at the authors' 15 Gb/s (slower than every link) each device forwards its one copy at that rate
    m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = papers_rate;
    EXPECT_DOUBLE_EQ(predict_layer(m, flow, p).trans_s, B / papers_rate);
}

TEST(Topology, ChainBroadcastForwardsAtMostAtTheTransRate) {
    // hpwnv-16 describes the papers' collective (trans_broadcast = "chain", 15 Gb/s): one expert to every other
    // device costs one copy per device at 15 Gb/s, Eq 4's S (D - n) / D / B with the owner counted (n = 0) ...
    const ClusterSpec cl = shipped("hpwnv-16.toml");
    ASSERT_TRUE(cl.chain_broadcast);
    CostModel m;
    m.cluster = cl;
    m.topology_aware = true;
    m.trans_broadcast = TransBroadcast::kChain;
    m.model = {1024, 2048, 256, 4, 1024};
    const double B = m.expert_bytes(), rate = cl.trans_bytes_per_s;
    std::vector<int64_t> counts(16 * 16, 64);
    Placement p = Placement::make_static(16, 16);
    for (int d = 1; d < 16; ++d) p.add_replica(0, d);
    const LayerFlow flow = compute_flow(counts.data(), 16, 16, p, RouteRule::kOwner);
    const CostBreakdown chain = predict_layer(m, flow, p);
    EXPECT_DOUBLE_EQ(chain.trans_s, B / rate);
    EXPECT_DOUBLE_EQ(chain.agg_s, B / cl.agg_bytes_per_s);
    CostModel flat = m;
    flat.topology_aware = false;
    EXPECT_DOUBLE_EQ(predict_layer(flat, flow, p).trans_s, chain.trans_s);
    // ... while the star queues 15 copies on the home's port
    m.trans_broadcast = TransBroadcast::kStar;
    EXPECT_DOUBLE_EQ(predict_layer(m, flow, p).trans_s, 15 * B / cl.pcie_bytes_per_s);
    // two experts whose chains cross device 5: it forwards two copies
    m.trans_broadcast = TransBroadcast::kChain;
    for (int d = 0; d < 16; ++d)
        if (d != 1) p.add_replica(1, d);
    const CostBreakdown two = predict_layer(m, compute_flow(counts.data(), 16, 16, p, RouteRule::kOwner), p);
    EXPECT_DOUBLE_EQ(two.trans_s, 2 * B / rate);
}

TEST(Topology, ClusterFileChoosesTheBroadcastUnlessThePlanSetsIt) {
    // the paper clusters say chain (both systems' code calls NCCL's broadcast); the trainer's CPU files say nothing
    for (const char* name : {"hpwnv-16.toml", "hpnv-16.toml", "hpwnv-32.toml", "lpwnv-8.toml"})
        EXPECT_TRUE(shipped(name).chain_broadcast) << name;
    EXPECT_FALSE(shipped("cpu-local.toml").chain_broadcast);
    EXPECT_FALSE(shipped("h100-16.toml").chain_broadcast);
    // and the key survives `profile --calibrate`'s writer
    const std::string path = ::testing::TempDir() + "/chain-roundtrip.toml";
    {
        std::ofstream out(path);
        out << cluster_to_toml(shipped("hpwnv-16.toml"));
    }
    EXPECT_TRUE(load_cluster_file(path).chain_broadcast);
}

TEST(Topology, AllToAllIsHierarchicalOverTheRails) {
    const ClusterSpec h = shipped("h100-16.toml");  // 2 nodes x 8, one NIC per GPU (rails)
    const double B = 32e6, nic = h.node_nic_bytes_per_s, nv = h.nvlink_bytes_per_s;
    ASSERT_EQ(h.nics_per_node, 8);
    ASSERT_LT(nic, nv);
    // every GPU of node 0 to its rail peer on node 1: eight NICs in parallel
    std::vector<std::tuple<int, int, double>> rails;
    for (int g = 0; g < 8; ++g) rails.emplace_back(g, 8 + g, B);
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(16, rails)), B / nic);  // inter_node_latency_us = 0 here
    // GPU 0 to all of node 1: one NIC carries 8 B (all-to-all cannot aggregate NICs)
    std::vector<std::tuple<int, int, double>> fan;
    for (int g = 8; g < 16; ++g) fan.emplace_back(0, g, B);
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(16, fan)), 8 * B / nic);
    // intra-node traffic rides NVLink beside it: adding 0 -> 1..7 leaves the NIC the bottleneck
    for (int g = 1; g < 8; ++g) fan.emplace_back(0, g, B);
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(16, fan)), 8 * B / nic);
    // a GPU injection limit below the NVLink port takes over
    ClusterSpec capped = h;
    capped.gpu_injection_bytes_per_s = nic;
    EXPECT_DOUBLE_EQ(topology_time(capped, traffic(16, fan)), 15 * B / nic);
    // one NIC per node: the 8 rails share it
    ClusterSpec one_nic = h;
    one_nic.nics_per_node = 1;
    EXPECT_DOUBLE_EQ(topology_time(one_nic, traffic(16, rails)), 8 * B / nic);
}

TEST(Topology, ClassLatencyIsAddedOnceForTheSlowestClassUsed) {
    ClusterSpec h = shipped("hpnv-16.toml");
    h.nvlink_latency_s = 1e-6;
    h.intra_node_latency_s = 5e-6;
    h.inter_node_latency_s = 20e-6;
    const double B = 1e6;
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(16, {{0, 1, B}})), B / h.nvlink_bytes_per_s + 1e-6);
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(16, {{0, 1, B}, {0, 2, B}})), B / h.pcie_bytes_per_s + 5e-6);
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(16, {{0, 1, B}, {0, 4, B}})), B / h.pcie_bytes_per_s + 20e-6);
    EXPECT_DOUBLE_EQ(topology_time(h, traffic(16, {})), 0.0);
}

// A few copies priced pair by pair give the dense matrix's time exactly, both directions, on every shipped
// topology (one expert's copies: distinct pairs, one expert each)
struct CopiesCase {
    const char* cluster;
    int copies;
};
class TopologyCopies : public ::testing::TestWithParam<CopiesCase> {};

TEST_P(TopologyCopies, EqualTheDenseMatrixTime) {
    const ClusterSpec cl = shipped(GetParam().cluster);
    const int D = cl.num_devices;
    Rng rng(static_cast<uint64_t>(D) * 131 + GetParam().copies);
    const double B = 123456789.0;
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<std::pair<int, int>> copies;
        std::vector<double> bytes(static_cast<size_t>(D) * D, 0.0);
        while (static_cast<int>(copies.size()) < GetParam().copies) {
            const int s = static_cast<int>(rng.next_u64() % D), d = static_cast<int>(rng.next_u64() % D);
            if (s == d || bytes[static_cast<size_t>(s) * D + d] > 0) continue;
            copies.emplace_back(s, d);
            bytes[static_cast<size_t>(s) * D + d] = B;
        }
        std::vector<double> reversed(bytes.size());
        for (int s = 0; s < D; ++s)
            for (int d = 0; d < D; ++d)
                reversed[static_cast<size_t>(d) * D + s] = bytes[static_cast<size_t>(s) * D + d];
        EXPECT_DOUBLE_EQ(topology_time_of_copies(cl, copies, B, false, 0.7), topology_time(cl, bytes, 0.7));
        EXPECT_DOUBLE_EQ(topology_time_of_copies(cl, copies, B, true, 0.7), topology_time(cl, reversed, 0.7));
    }
}

INSTANTIATE_TEST_SUITE_P(Shipped, TopologyCopies,
                         ::testing::Values(CopiesCase{"hpwnv-16.toml", 1}, CopiesCase{"hpwnv-16.toml", 7},
                                           CopiesCase{"hpnv-16.toml", 5}, CopiesCase{"h100-64.toml", 1},
                                           CopiesCase{"h100-64.toml", 9}, CopiesCase{"h100-64.toml", 63}),
                         [](const ::testing::TestParamInfo<CopiesCase>& info) {
                             std::string name = info.param.cluster;
                             name = name.substr(0, name.find('.'));
                             for (char& ch : name)
                                 if (ch == '-') ch = '_';
                             return name + "_" + std::to_string(info.param.copies);
                         });

// topology.h's definition written out, pair by pair in (src, dst) order, every queue summed as the pairs come:
// the slow oracle of topology_time's fast dense path (registers for each source's egress, one division per link
// class), which must give the same double, bit for bit
double queued_time(const ClusterSpec& cl, const std::vector<int64_t>& units, double unit_bytes, bool transposed,
                   double scale) {
    const int D = cl.num_devices, nics = D / cl.devices_per_node * cl.nics_per_node;
    std::vector<double> nv_out(D), nv_in(D), host_out(D), host_in(D), all_out(D), all_in(D), nic_out(nics),
        nic_in(nics);
    const double rate[3] = {cl.nvlink_bytes_per_s, cl.intra_node_bytes_per_s, cl.inter_node_bytes_per_s};
    auto drain = [](double queued, double r) { return r > 0 && queued > 0 ? queued / r : 0.0; };
    double worst = 0;
    bool used[3] = {false, false, false};
    for (int s = 0; s < D; ++s)
        for (int d = 0; d < D; ++d) {
            const auto u = static_cast<double>(transposed ? units[static_cast<size_t>(d) * D + s]
                                                          : units[static_cast<size_t>(s) * D + d]);
            if (s == d || u <= 0) continue;
            const double b = u * unit_bytes;
            const int c = static_cast<int>(cl.link_class(s, d));  // kNvlink, kIntraNode, kInterNode
            used[c] = true;
            worst = std::max(worst, drain(b, rate[c]));
            all_out[s] += b, all_in[d] += b;
            if (c == 0) {
                nv_out[s] += b, nv_in[d] += b;
                continue;
            }
            host_out[s] += b, host_in[d] += b;
            if (c == 2) nic_out[cl.nic_of(s)] += b, nic_in[cl.nic_of(d)] += b;
        }
    for (int i = 0; i < D; ++i)
        worst =
            std::max({worst, drain(std::max(nv_out[i], nv_in[i]), cl.nvlink_bytes_per_s),
                      drain(std::max(host_out[i], host_in[i]), cl.pcie_bytes_per_s),
                      drain(all_out[i], cl.gpu_injection_bytes_per_s), drain(all_in[i], cl.gpu_ejection_bytes_per_s)});
    for (int n = 0; n < nics; ++n)
        worst = std::max(worst, drain(std::max(nic_out[n], nic_in[n]), cl.node_nic_bytes_per_s));
    double latency = 0;
    for (int c = 0; c < 3; ++c)
        if (used[c]) latency = std::max(latency, cl.link_latency_s(static_cast<ClusterSpec::LinkClass>(c)));
    return worst / scale + latency;
}

struct DenseCase {
    const char* name;
    const char* cluster;
    int nics_per_node, nvlink_domain;  // 0: the file's
    int percent_nonzero;               // of the off-diagonal pairs
};
void PrintTo(const DenseCase& c, std::ostream* os) { *os << c.name; }
class TopologyDense : public ::testing::TestWithParam<DenseCase> {};

TEST_P(TopologyDense, TimeIsTheQueuesSummedPairByPairExactly) {
    const DenseCase& c = GetParam();
    ClusterSpec cl = shipped(c.cluster);
    if (c.nics_per_node > 0) cl.nics_per_node = c.nics_per_node;
    if (c.nvlink_domain > 0) cl.nvlink_domain = c.nvlink_domain;
    const int D = cl.num_devices;
    Rng rng(static_cast<uint64_t>(D) * 977 + c.percent_nonzero);
    for (int trial = 0; trial < 10; ++trial) {
        std::vector<int64_t> units(static_cast<size_t>(D) * D, 0);
        for (int64_t& u : units)
            if (static_cast<int>(rng.next_u64() % 100) < c.percent_nonzero)
                u = 1 + static_cast<int64_t>(rng.next_u64() % 5000);
        const double unit_bytes = 1024.0 * (1 + trial) / 3;  // an odd size, so the order of the sums shows
        for (bool transposed : {false, true})
            EXPECT_EQ(topology_time(cl, units.data(), unit_bytes, transposed, 0.7),
                      queued_time(cl, units, unit_bytes, transposed, 0.7))
                << "trial " << trial << (transposed ? ", transposed" : "");
    }
}

INSTANTIATE_TEST_SUITE_P(Clusters, TopologyDense,
                         ::testing::Values(DenseCase{"h100_64_rail_nic_per_gpu_dense", "h100-64.toml", 0, 0, 100},
                                           DenseCase{"h100_64_rail_nic_per_gpu_sparse", "h100-64.toml", 0, 0, 7},
                                           DenseCase{"h100_64_two_nics_per_node", "h100-64.toml", 2, 0, 60},
                                           DenseCase{"h100_64_nvlink_pairs_of_4", "h100-64.toml", 0, 4, 60},
                                           DenseCase{"hpnv_16_one_nic_per_node", "hpnv-16.toml", 0, 0, 100},
                                           DenseCase{"hpwnv_16", "hpwnv-16.toml", 0, 0, 30}),
                         [](const ::testing::TestParamInfo<DenseCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
