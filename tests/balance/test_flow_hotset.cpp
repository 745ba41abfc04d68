// flow's hot-set family (balance/flow_hotset.h): its placements are valid, flow picks one where node-local
// replication is clearly best, and the split and the routing LP keep a replicated expert's tokens inside their node
// when the node holds it and compute leaves room.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "balance/cluster.h"
#include "balance/flow_hotset.h"
#include "balance/flow_split.h"
#include "balance/options.h"
#include "balance/policy_flow.h"
#include "balance/route_split.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

CostModel file_cost_model(const std::string& cluster_file, int tokens_per_device) {
    CostModel cost = testing::paper_cost_model(16, tokens_per_device);
    cost.cluster = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + cluster_file);
    cost.topology_aware = true;
    return cost;
}

std::vector<double> loads_of(const std::vector<int64_t>& counts, int D, int E) {
    std::vector<double> load(E, 0.0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) load[e] += static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
    return load;
}

// the h experts of largest load (ties: lower index), as flags [E]
std::vector<char> hottest(const std::vector<double>& load, int h) {
    std::vector<char> hot(load.size(), 0);
    for (int i = 0; i < h; ++i) {
        int best = -1;
        for (int e = 0; e < static_cast<int>(load.size()); ++e)
            if (!hot[e] && (best < 0 || load[e] > load[best])) best = e;
        hot[best] = 1;
    }
    return hot;
}

struct HotCase {
    const char* name;
    const char* cluster_file;
    int experts_per_device, hot, group_size, cap;
    bool spread;
    double zipf_s;
    uint64_t seed;
    bool even_nics = false;
    bool chain = false;  // chain broadcast: a device's owned hot experts and replicas within the group's share
    int everywhere = 0;  // the device tier: the first hot experts on every device
};

// One case's placement, built from the static layout on skewed counts of the case's cluster.
class HotSetPlacement : public ::testing::TestWithParam<HotCase> {
  protected:
    void SetUp() override {
        const HotCase c = GetParam();
        cost_ = file_cost_model(c.cluster_file, 4096);
        D_ = cost_.cluster.num_devices, E_ = c.experts_per_device * D_;
        counts_ = testing::skewed_counts(D_, E_, 4096, c.zipf_s, c.seed);
        load_ = loads_of(counts_, D_, E_);
        current_ = Placement::make_static(D_, E_);
        HotSetBuilder builder(counts_.data(), load_, current_, cost_.cluster);
        placement_ =
            builder.build(HotSetShape{c.hot, c.group_size, c.spread, c.even_nics, c.chain, c.everywhere}, c.cap);
        without_even_ = builder.build(HotSetShape{c.hot, c.group_size, c.spread, false, c.chain, c.everywhere}, c.cap);
    }
    // the copies device d heads or forwards at most (flow_hotset.h "replicas"): hot experts it owns plus replicas
    int chain_load(int d) const {
        const std::vector<char> hot = hottest(load_, GetParam().hot);
        int n = 0;
        for (int e = 0; e < E_; ++e) n += (hot[e] && placement_.owner[e] == d) || replica(e, d);
        return n;
    }
    bool replica(int e, int d) const { return placement_.replica[static_cast<size_t>(e) * D_ + d] != 0; }
    // the slow oracle of flow_hotset.h "nics": per NIC, the cold experts' tokens from other nodes into their owners
    std::vector<double> cold_nic_ingress(const Placement& p) const {
        const ClusterSpec& cl = cost_.cluster;
        const std::vector<char> hot = hottest(load_, GetParam().hot);
        std::vector<double> ingress(static_cast<size_t>(cl.nic_of(D_ - 1)) + 1, 0.0);
        for (int e = 0; e < E_; ++e)
            for (int s = 0; s < D_ && !hot[e]; ++s)
                if (cl.node_of(s) != cl.node_of(p.owner[e]))
                    ingress[cl.nic_of(p.owner[e])] += static_cast<double>(counts_[static_cast<size_t>(s) * E_ + e]);
        return ingress;
    }
    CostModel cost_;
    int D_ = 0, E_ = 0;
    std::vector<int64_t> counts_;
    std::vector<double> load_;
    Placement current_, placement_, without_even_;  // without_even_: the same shape with even_nics false
};

TEST_P(HotSetPlacement, RespectsTheReplicaCap) { EXPECT_EQ(check_placement(placement_, GetParam().cap), ""); }

TEST_P(HotSetPlacement, KeepsEachDevicesNumberOfOwnedExperts) {
    EXPECT_EQ(placement_.experts_per_device(), current_.experts_per_device());
}

TEST_P(HotSetPlacement, ReplicatesOnlyTheHotExperts) {
    const std::vector<char> hot = hottest(load_, GetParam().hot);
    for (int e = 0; e < E_; ++e)
        if (!hot[e]) {
            EXPECT_EQ(placement_.num_replicas_of(e), 0) << "cold expert " << e;
        }
}

// With no cap, every group that sends a hot expert tokens holds it (the device tier aside); the copies of a group are
// spread evenly.
TEST_P(HotSetPlacement, HoldsEveryHotExpertInEveryGroupThatSendsIt) {
    const HotCase c = GetParam();
    if (c.cap > 0) GTEST_SKIP() << "a cap may leave a group without room";
    const std::vector<char> hot = hottest(load_, c.hot), tier = hottest(load_, c.everywhere);
    for (int e = 0; e < E_; ++e)
        for (int first = 0; first < D_ && hot[e] && !tier[e]; first += c.group_size) {
            int64_t sent = 0;
            int holders = 0;
            for (int d = first; d < first + c.group_size; ++d)
                sent += counts_[static_cast<size_t>(d) * E_ + e], holders += placement_.holds(e, d);
            EXPECT_EQ(holders, sent > 0 ? 1 : 0) << "expert " << e << ", group at device " << first;
        }
}

// The device tier: each of its experts held by every device that sends it tokens.
TEST_P(HotSetPlacement, HoldsEachDeviceTierExpertOnEverySender) {
    const HotCase c = GetParam();
    if (c.everywhere == 0 || c.cap > 0) GTEST_SKIP() << "no device tier, or a cap";
    const std::vector<char> tier = hottest(load_, c.everywhere);
    for (int e = 0; e < E_; ++e)
        for (int d = 0; d < D_ && tier[e]; ++d)
            EXPECT_EQ(placement_.holds(e, d), counts_[static_cast<size_t>(d) * E_ + e] > 0) << e << " on " << d;
}

// Chain: the busiest device of a group heads or forwards no more copies than it must: the group's even share of the
// chain load, or its fixed part (the hot experts it owns and its device-tier replicas) where that is larger.
TEST_P(HotSetPlacement, ChainKeepsEachGroupsBusiestForwarderAtItsLeast) {
    const HotCase c = GetParam();
    if (!c.chain || c.cap > 0) GTEST_SKIP() << "star broadcast, or a cap";
    const std::vector<char> hot = hottest(load_, c.hot), tier = hottest(load_, c.everywhere);
    for (int first = 0; first < D_; first += c.group_size) {
        int total = 0, most = 0, most_fixed = 0;
        for (int d = first; d < first + c.group_size; ++d) {
            int fixed = 0;
            for (int e = 0; e < E_; ++e) fixed += (hot[e] && placement_.owner[e] == d) || (tier[e] && replica(e, d));
            total += chain_load(d), most = std::max(most, chain_load(d)), most_fixed = std::max(most_fixed, fixed);
        }
        EXPECT_EQ(most, std::max(most_fixed, (total + c.group_size - 1) / c.group_size)) << "group at " << first;
    }
}

TEST_P(HotSetPlacement, SpreadsCopiesEvenlyInsideAGroup) {
    const HotCase c = GetParam();
    if (c.chain) GTEST_SKIP() << "chain: the chain load is spread instead (above)";
    const std::vector<int> replicas = placement_.replicas_per_device();
    for (int first = 0; first < D_; first += c.group_size) {
        int total = 0, most = 0;
        for (int d = first; d < first + c.group_size; ++d) total += replicas[d], most = std::max(most, replicas[d]);
        EXPECT_LE(most, (total + c.group_size - 1) / c.group_size) << "group at device " << first;
    }
}

// Spread: no device owns more than ceil(h / D) hot experts (its NIC sends every copy of each).
TEST_P(HotSetPlacement, SpreadOwnersOwnAtMostTheEvenShareOfHotExperts) {
    const HotCase c = GetParam();
    if (!c.spread) GTEST_SKIP() << "owners kept";
    const std::vector<char> hot = hottest(load_, c.hot);
    std::vector<int> owned(D_, 0);
    for (int e = 0; e < E_; ++e) owned[placement_.owner[e]] += hot[e];
    for (int d = 0; d < D_; ++d) EXPECT_LE(owned[d], (c.hot + D_ - 1) / D_) << "device " << d;
}

// The routing LP and the planner's split send every token to a holder of its expert, each group's parts summing to
// its count.
TEST_P(HotSetPlacement, RoutesEveryTokenToAHolder) {
    const RouteSplit lp = route_split(counts_.data(), placement_, RouteRule::kFlow, &cost_);
    FastSplitter splitter(counts_.data(), D_, E_, &cost_.cluster);
    const LayerFlow fast = splitter.split(placement_);
    for (int s = 0; s < D_; ++s)
        for (int e = 0; e < E_; ++e) {
            const size_t g = static_cast<size_t>(s) * E_ + e;
            int64_t routed = 0;
            for (int i = lp.group_start[g]; i < lp.group_start[g + 1]; ++i) {
                EXPECT_TRUE(placement_.holds(e, lp.part_device[i])) << "expert " << e << " on " << lp.part_device[i];
                routed += lp.part_tokens[i];
            }
            EXPECT_EQ(routed, counts_[g]) << "group (" << s << ", " << e << ")";
        }
    for (int e = 0; e < E_; ++e)
        for (int d = 0; d < D_ && !fast.expert_device.empty(); ++d)
            if (fast.expert_device[static_cast<size_t>(e) * D_ + d] > 0) {
                EXPECT_TRUE(placement_.holds(e, d));
            }
}

// even_nics swaps cold owners inside a node only: every expert's owner stays on the node it had without it.
TEST_P(HotSetPlacement, EvenNicsKeepsEveryOwnerOnItsNode) {
    if (!GetParam().even_nics) GTEST_SKIP() << "even_nics off";
    for (int e = 0; e < E_; ++e)
        EXPECT_EQ(cost_.cluster.node_of(placement_.owner[e]), cost_.cluster.node_of(without_even_.owner[e]))
            << "expert " << e;
}

// ... and never raises a node's busiest NIC's cold cross-node ingress (the slow oracle above counts it).
TEST_P(HotSetPlacement, EvenNicsNeverRaisesANodesBusiestNic) {
    if (!GetParam().even_nics) GTEST_SKIP() << "even_nics off";
    const std::vector<double> after = cold_nic_ingress(placement_), before = cold_nic_ingress(without_even_);
    const int per_node = cost_.cluster.nics_per_node;
    for (int first = 0; first < static_cast<int>(after.size()); first += per_node)
        EXPECT_LE(*std::max_element(after.begin() + first, after.begin() + first + per_node),
                  *std::max_element(before.begin() + first, before.begin() + first + per_node) + 1e-9)
            << "node of NIC " << first;
}

INSTANTIATE_TEST_SUITE_P(
    Table, HotSetPlacement,
    ::testing::Values(HotCase{"h100_nodes_kept", "h100-16.toml", 4, 8, 8, 0, false, 0.8, 1},
                      HotCase{"h100_nodes_spread", "h100-16.toml", 4, 16, 8, 0, true, 0.8, 2},
                      HotCase{"h100_many_hot_spread", "h100-16.toml", 4, 40, 8, 0, true, 1.2, 3},
                      HotCase{"h100_capped", "h100-16.toml", 4, 24, 8, 1, true, 0.8, 4},
                      HotCase{"hpwnv_nodes_spread", "hpwnv-16.toml", 2, 6, 4, 0, true, 1.2, 5},
                      HotCase{"hpnv_nvlink_pairs", "hpnv-16.toml", 1, 3, 2, 0, true, 1.4, 6},
                      HotCase{"hpnv_pairs_capped", "hpnv-16.toml", 2, 12, 2, 2, false, 1.0, 7},
                      HotCase{"h100_even_nics", "h100-16.toml", 4, 8, 8, 0, true, 0.8, 8, true},
                      HotCase{"h100_even_nics_kept", "h100-16.toml", 8, 16, 8, 0, false, 1.0, 9, true},
                      HotCase{"h100_even_nics_capped", "h100-16.toml", 4, 24, 8, 1, true, 0.8, 10, true},
                      HotCase{"hpwnv_chain_kept", "hpwnv-16.toml", 2, 8, 4, 0, false, 1.2, 11, false, true},
                      HotCase{"hpwnv_chain_many_hot", "hpwnv-16.toml", 2, 14, 4, 0, false, 0.8, 12, false, true},
                      HotCase{"hpwnv_chain_everywhere", "hpwnv-16.toml", 2, 8, 4, 0, false, 1.2, 13, false, true, 1},
                      HotCase{"hpnv_chain_everywhere_two", "hpnv-16.toml", 2, 10, 4, 0, false, 1.4, 14, false, true, 2},
                      HotCase{"hpnv_chain_everywhere_capped", "hpnv-16.toml", 2, 8, 2, 2, false, 1.0, 15, false, true,
                              1}),
    [](const ::testing::TestParamInfo<HotCase>& info) { return std::string(info.param.name); });

// A cluster where node-local replication is clearly best: nodes of 4 devices on NVLink (fast), one slow NIC per
// node, compute almost free; every device sends 1000 tokens to expert 0 (owned by device 0) and 10 to each other.
// The hot set h = 1 puts one copy of expert 0 in each other node (nodes - 1 copies through the owner's NIC) and
// no expert-0 token crosses a node; the other families reach the last node only after filling the owner's.
CostModel slow_nic_cluster(int num_nodes) {
    CostModel m = testing::unit_cost_model(4 * num_nodes);
    ClusterSpec& c = m.cluster;
    c.devices_per_node = 4, c.nvlink_domain = 4, c.nics_per_node = 1, c.topology = true;
    c.compute_flops = 1e12;
    c.nvlink_bytes_per_s = c.intra_node_bytes_per_s = 1e6;
    c.node_nic_bytes_per_s = c.inter_node_bytes_per_s = 1.0;
    m.model.d_ffn = 500;  // expert 1000 bytes: a copy costs a quarter of a node's 4000 tokens
    m.topology_aware = true;
    return m;
}

struct ChoiceCase {
    const char* name;
    int nodes, cost_eq;
};

class FlowHotSetChoice : public ::testing::TestWithParam<ChoiceCase> {
  protected:
    // flow's plan from static on slow_nic_cluster(nodes): every device sends 1000 tokens to expert 0, 10 to the rest
    static Placement plan(const ChoiceCase& c, bool hot_sets, FlowPlanReport* rep) {
        const CostModel cost = slow_nic_cluster(c.nodes);
        const int D = cost.cluster.num_devices, E = D;
        std::vector<int64_t> counts(static_cast<size_t>(D) * E, 10);
        for (int d = 0; d < D; ++d) counts[static_cast<size_t>(d) * E] = 1000;
        BalanceOptions o;
        o.route_rule = RouteRule::kFlow;
        o.cost_eq = c.cost_eq;
        o.flow_hot_sets = hot_sets;
        return plan_flow(counts.data(), D, E, cost, o, Placement::make_static(D, E), rep);
    }
};

TEST_P(FlowHotSetChoice, PicksOneCopyOfTheHotExpertInEveryNode) {
    const ChoiceCase c = GetParam();
    FlowPlanReport rep;
    const Placement p = plan(c, /*hot_sets=*/true, &rep);
    EXPECT_EQ(p.num_replicas(), c.nodes - 1);
    for (int node = 0; node < c.nodes; ++node) {
        int holders = 0;
        for (int d = 4 * node; d < 4 * node + 4; ++d) holders += p.holds(0, d);
        EXPECT_EQ(holders, 1) << "node " << node;
    }
    EXPECT_EQ(rep.hot_experts, 1);
}

// balance.flow_hot_sets = false (the ablation's earlier steps): the family is not tried, so no plan names a hot set.
TEST_P(FlowHotSetChoice, OffNamesNoHotSet) {
    FlowPlanReport rep;
    plan(GetParam(), /*hot_sets=*/false, &rep);
    EXPECT_EQ(rep.hot_experts, 0);
}

// The family is on by default (BalanceOptions and the config key agree).
TEST(FlowHotSetDefault, OnInOptionsAndConfig) {
    EXPECT_TRUE(BalanceOptions{}.flow_hot_sets);
    Schema schema;
    add_balance_keys(schema, /*allow_all=*/false, "flow");
    EXPECT_TRUE(balance_options_from(Config(schema, "test")).flow_hot_sets);
}

INSTANTIATE_TEST_SUITE_P(Table, FlowHotSetChoice,
                         ::testing::Values(ChoiceCase{"three_nodes_eq6", 3, 6}, ChoiceCase{"three_nodes_eq8", 3, 8},
                                           ChoiceCase{"four_nodes_eq6", 4, 6}),
                         [](const ::testing::TestParamInfo<ChoiceCase>& info) { return std::string(info.param.name); });

// Node-local routing: expert 0 held by the first device of every node, every device sends it 1000 tokens, and each
// device's other tokens go to its own expert only (no other traffic). With compute room on the holders (device 1's
// own expert is the busiest), every expert-0 token should stay in its node: under the LP, any token across a node
// loads a NIC that is otherwise idle, so it does even where the compute optimum would move some (tight: compute is
// almost free here); the split's start keeps them there where the compute optimum leaves room.
struct LocalCase {
    const char* name;
    int nodes;
    int64_t busiest_own_tokens;  // device 1's tokens for its own expert (room for the holders when large)
    bool routing_lp;             // the routing LP (route_split), else the planner's split (FastSplitter)
};

class FlowNodeLocalRouting : public ::testing::TestWithParam<LocalCase> {};

TEST_P(FlowNodeLocalRouting, NoTokenOfALocallyHeldExpertCrossesANode) {
    const LocalCase c = GetParam();
    const CostModel cost = slow_nic_cluster(c.nodes);
    const int D = cost.cluster.num_devices, E = D;
    std::vector<int64_t> counts(static_cast<size_t>(D) * E, 0);
    for (int d = 0; d < D; ++d) counts[static_cast<size_t>(d) * E] = 1000, counts[static_cast<size_t>(d) * E + d] = 100;
    counts[static_cast<size_t>(1) * E + 1] = c.busiest_own_tokens;
    Placement p = Placement::make_static(D, E);
    for (int node = 1; node < c.nodes; ++node) p.add_replica(0, 4 * node);
    LayerFlow flow;
    if (c.routing_lp) {
        flow = flow_of_split(counts.data(), p, route_split(counts.data(), p, RouteRule::kFlow, &cost));
    } else {
        FastSplitter splitter(counts.data(), D, E, &cost.cluster);
        splitter.set_near_start(true);  // as flow scores its hot-set candidates
        flow = splitter.split(p);
    }
    for (int s = 0; s < D; ++s)
        for (int g = 0; g < D; ++g)
            if (cost.cluster.node_of(s) != cost.cluster.node_of(g)) {
                EXPECT_EQ(flow.route[static_cast<size_t>(s) * D + g], 0) << s << " -> " << g;
            }
}

INSTANTIATE_TEST_SUITE_P(Table, FlowNodeLocalRouting,
                         ::testing::Values(LocalCase{"split_two_nodes_room", 2, 20000, false},
                                           LocalCase{"split_three_nodes_room", 3, 20000, false},
                                           LocalCase{"lp_two_nodes_room", 2, 20000, true},
                                           LocalCase{"lp_three_nodes_room", 3, 20000, true},
                                           LocalCase{"lp_three_nodes_tight", 3, 100, true}),
                         [](const ::testing::TestParamInfo<LocalCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
