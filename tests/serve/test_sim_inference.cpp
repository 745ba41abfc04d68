// lib/sim/inference: per-device forward-only times of one MoE layer, computed by hand on a 2-device instance,
// and the serving replay (serve_sim) charging Trans only for replicas new since the previous batch and pricing a
// cluster file as `prophet plan` does.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "balance/options.h"
#include "core/config.h"
#include "serve/serve_sim.h"
#include "sim/inference.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

// C = 2, F = 3, 4 bytes: 24 FLOP and 8 activation bytes per token, 48 bytes per expert; t = 24 FLOP/s, all-to-all
// 8 B/s with 0.5 s latency, Trans 48 B/s; links 4 B/s inside a node, 2 B/s between nodes
CostModel tiny_cost(int devices_per_node) {
    CostModel c;
    c.cluster.num_devices = 2;
    c.cluster.devices_per_node = devices_per_node;
    c.cluster.compute_flops = 24;
    c.cluster.a2a_bandwidth = {{1e300, 8}};
    c.cluster.a2a_latency_s = 0.5;
    c.cluster.trans_bytes_per_s = 48;
    c.cluster.intra_node_bytes_per_s = 4;
    c.cluster.inter_node_bytes_per_s = 2;
    c.model.d_model = 2;
    c.model.d_ffn = 3;
    c.model.bytes_per_elem = 4;
    return c;
}

// device 0 routes 3 tokens to expert 0 and 1 to expert 1; device 1 routes 4 to expert 1
const int64_t kCounts[] = {3, 1, 0, 4};

}  // namespace

TEST(SimInference, StaticPlacementByHand) {
    const Placement p = Placement::make_static(2, 2);  // expert 0 on device 0, expert 1 on device 1
    const InferenceLayerTime t = simulate_inference_layer(tiny_cost(2), kCounts, p, RouteRule::kOwner, 1.0, true);
    EXPECT_EQ(t.computed, (std::vector<int64_t>{3, 5}));
    EXPECT_DOUBLE_EQ(t.expert_s[0], 3.0);  // 3 tokens * 24 FLOP / 24 FLOP/s
    EXPECT_DOUBLE_EQ(t.expert_s[1], 5.0);
    // device 0 sends 1 token (8 B), device 1 receives it: 2 * (8 B / 8 B/s + 0.5 s) each
    EXPECT_DOUBLE_EQ(t.a2a_s[0], 3.0);
    EXPECT_DOUBLE_EQ(t.a2a_s[1], 3.0);
    EXPECT_DOUBLE_EQ(t.trans_s[0] + t.trans_s[1], 0.0);  // no replicas
    // twice the tokens: twice the compute and the bytes
    const InferenceLayerTime t2 = simulate_inference_layer(tiny_cost(2), kCounts, p, RouteRule::kOwner, 2.0, true);
    EXPECT_EQ(t2.computed, (std::vector<int64_t>{6, 10}));
    EXPECT_DOUBLE_EQ(t2.a2a_s[0], 2.0 * (16.0 / 8.0 + 0.5));
}

TEST(SimInference, TopologyAwareUsesTheLink) {
    CostModel cost = tiny_cost(1);  // one device per node: the pair is inter-node, 2 B/s
    cost.topology_aware = true;
    const InferenceLayerTime t =
        simulate_inference_layer(cost, kCounts, Placement::make_static(2, 2), RouteRule::kOwner, 1.0, true);
    EXPECT_DOUBLE_EQ(t.a2a_s[0], 2.0 * (8.0 / 2.0 + 0.5));
    EXPECT_DOUBLE_EQ(t.a2a_s[1], 2.0 * (8.0 / 2.0 + 0.5));
}

TEST(SimInference, TransOnlyForNewReplicas) {
    Placement rep = Placement::make_static(2, 2);
    rep.add_replica(1, 0);  // device 0 also holds expert 1: its token stays local
    const std::vector<int64_t> counts = {3, 1, 0, 4, 3, 1, 0, 4};  // [I = 2][L = 1][D][E]
    const std::vector<InferenceLayerTime> t =
        simulate_inference(tiny_cost(2), counts, {{rep}, {rep}}, RouteRule::kOwner, 1.0);
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].computed, (std::vector<int64_t>{4, 4}));
    EXPECT_DOUBLE_EQ(t[0].trans_s[0], 1.0);  // 48 B / 48 B/s, first batch: new against the static start
    EXPECT_DOUBLE_EQ(t[0].a2a_s[0], 2.0 * 0.5);  // nothing leaves either device: latency only
    EXPECT_DOUBLE_EQ(t[1].trans_s[0], 0.0);  // resident since the previous batch
    // deployed before the first batch (an offline placement): never charged
    const std::vector<InferenceLayerTime> deployed =
        simulate_inference(tiny_cost(2), counts, {{rep}, {rep}}, RouteRule::kOwner, 1.0, {rep});
    EXPECT_DOUBLE_EQ(deployed[0].trans_s[0], 0.0);
}

// The layer-to-layer token path (MoETuner's dispatch): 2 layers, every device sends 2 tokens to each expert at
// both layers, and every token of expert 0 at layer 0 goes to expert 1 at layer 1 and vice versa.
TEST(SimInference, LayerToLayerTokenPathByHand) {
    const std::vector<int64_t> counts = {2, 2, 2, 2, 2, 2, 2, 2};  // [I = 1][L = 2][D][E]
    const std::vector<int64_t> transitions = {0, 4, 4, 0};        // [1][L-1][E][E]
    const Placement e0_on_0 = Placement::make_owners(2, {0, 1}), e0_on_1 = Placement::make_owners(2, {1, 0});
    const std::vector<Placement> by_index = {e0_on_0, e0_on_0};   // ILP 1 alone: clusters in index order
    const std::vector<Placement> by_traffic = {e0_on_0, e0_on_1};  // ILP 2: each token's next expert is local
    const CostModel cost = tiny_cost(2);                           // 1 s per token moved, 0.5 s latency
    auto a2a = [&](const std::vector<Placement>& p, TokenPath path) {
        const std::vector<InferenceLayerTime> t =
            simulate_inference(cost, counts, {p}, RouteRule::kOwner, 1.0, {p}, path, transitions);
        return std::vector<double>{t[0].a2a_s[0], t[1].a2a_s[0], t[0].a2a_s[1], t[1].a2a_s[1]};
    };
    // home: each layer dispatches 2 tokens each way and combines them back: 2 (2 + 0.5) whatever the placement
    EXPECT_EQ(a2a(by_index, TokenPath::kHome), (std::vector<double>{5.0, 5.0, 5.0, 5.0}));
    EXPECT_EQ(a2a(by_traffic, TokenPath::kHome), (std::vector<double>{5.0, 5.0, 5.0, 5.0}));
    // layer 0: the dispatch from home, 2 + 0.5; layer 1: into it (by index all 4 tokens of each device cross, by
    // traffic none), plus the return home, 2 + 0.5
    EXPECT_EQ(a2a(by_index, TokenPath::kLayerToLayer), (std::vector<double>{2.5, 4.5 + 2.5, 2.5, 4.5 + 2.5}));
    EXPECT_EQ(a2a(by_traffic, TokenPath::kLayerToLayer), (std::vector<double>{2.5, 0.5 + 2.5, 2.5, 0.5 + 2.5}));
    // token_scale scales the transitions with the counts
    const std::vector<InferenceLayerTime> doubled =
        simulate_inference(cost, counts, {by_index}, RouteRule::kOwner, 2.0, {by_index}, TokenPath::kLayerToLayer,
                           transitions);
    EXPECT_DOUBLE_EQ(doubled[1].a2a_s[0], 8.5 + 4.5);
}

// A cluster file prices the all-to-all and the broadcast the same way in the serving replay as in `prophet plan`
// (no plan.* overrides): topology-aware only where the file describes its topology. The replay once took every
// file as topology-aware (its test was intra_node_bytes_per_s > 0, which the loader always fills), so MoETuner's
// nodes were timed by their links in serving and by Eq 1 in plan.
struct ClusterCase {
    const char* file;
    bool topology_aware;  // what both commands must choose
};

void PrintTo(const ClusterCase& c, std::ostream* os) { *os << c.file; }

class ServeSimCluster : public ::testing::TestWithParam<ClusterCase> {};

TEST_P(ServeSimCluster, PricedAsPlanPricesIt) {
    const std::string path = std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + GetParam().file;
    const ClusterSpec cluster = load_cluster_file(path);
    const int D = cluster.num_devices;
    const CostModel served = serve::simulated_cost_model(path, D, 64, 128, 2, 1024);
    Schema schema;
    add_cost_model_keys(schema, "");
    const TraceShape shape{D, D, int64_t{1024} * D, 64, 128, 256};
    const CostModel planned = cost_model_for_trace(cluster, path, shape, "test", Config(schema), "");
    EXPECT_EQ(served.topology_aware, GetParam().topology_aware);
    EXPECT_EQ(planned.topology_aware, GetParam().topology_aware);
    EXPECT_EQ(served.trans_broadcast, planned.trans_broadcast);
}

INSTANTIATE_TEST_SUITE_P(ClusterFiles, ServeSimCluster,
                         ::testing::Values(ClusterCase{"moetuner-h100-ep4.toml", false},
                                           ClusterCase{"moetuner-h200-ep4.toml", false},
                                           ClusterCase{"cpu-local.toml", false}, ClusterCase{"hpwnv-16.toml", true},
                                           ClusterCase{"hpnv-16.toml", true}, ClusterCase{"h100-64.toml", true}),
                         [](const auto& info) {
                             std::string name = info.param.file;
                             name = name.substr(0, name.find('.'));
                             for (char& c : name)
                                 if (c == '-') c = '_';
                             return name;
                         });
