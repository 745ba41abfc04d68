// flow's NIC relief tries (flow_extra_copies.h): with one NIC per node, the busiest NIC's cross-node ingress comes
// from the experts owned behind it; each of the heaviest of them gets a try in the node sending it the most, on that
// node's device of fewest replicas, then least estimated load. Rows: 2 nodes x 2 devices, experts 0-3 owned by
// devices 0-3 (static), expected tries written out by hand.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "balance/flow_extra_copies.h"

namespace prophet {
namespace {

struct ReliefCase {
    const char* name;
    int devices_per_node;
    std::vector<int64_t> counts;                       // [4*4] device-major planning counts
    std::vector<std::pair<int, int>> replicas;         // (expert, device) copies already placed
    int cap;                                           // balance.max_replicas_per_device
    std::vector<std::pair<int, int>> expected_relief;  // tries of experts without copies, in order
};

class NicRelief : public ::testing::TestWithParam<ReliefCase> {};

TEST_P(NicRelief, TriesTheBusiestNicsExpertsInTheirHeaviestSendingNode) {
    const ReliefCase& c = GetParam();
    constexpr int D = 4, E = 4;
    ClusterSpec cluster;
    cluster.num_devices = D;
    cluster.devices_per_node = c.devices_per_node;
    cluster.nics_per_node = 1;
    Placement at = Placement::make_static(D, E);
    for (const auto& [e, d] : c.replicas) at.add_replica(e, d);
    std::vector<double> load(E, 0.0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) load[e] += static_cast<double>(c.counts[static_cast<size_t>(d) * E + e]);
    std::vector<std::pair<int, int>> relief;  // the tries of experts without copies: only NIC relief makes those
    for (const auto& t : extra_copy_tries(c.counts.data(), load, at, c.cap, &cluster))
        if (at.num_replicas_of(t.first) == 0) relief.push_back(t);
    EXPECT_EQ(relief, c.expected_relief);
    for (const auto& t : extra_copy_tries(c.counts.data(), load, at, c.cap, nullptr))
        EXPECT_GT(at.num_replicas_of(t.first), 0) << "a relief try without the cluster";
}

// node 1 (devices 2, 3) takes in node 0's tokens of experts 2 (90) and 3 (50); node 0 takes in 10
const std::vector<int64_t> kTowardNode1 = {10, 0, 50, 30, 10, 0, 40, 20, 0, 5, 5, 5, 0, 5, 5, 5};

INSTANTIATE_TEST_SUITE_P(
    Table, NicRelief,
    ::testing::Values(
        // heaviest first; device 1 holds the lighter expert (10 tokens against device 0's 20)
        ReliefCase{"heaviest_first_on_the_lighter_device", 2, kTowardNode1, {}, 0, {{2, 1}, {3, 1}}},
        // a replica on device 1 (of expert 0): device 0 has fewer replicas, so the relief goes there
        ReliefCase{"fewest_replicas_first", 2, kTowardNode1, {{0, 1}}, 0, {{2, 0}, {3, 0}}},
        // node 0 already holds expert 2: its tokens stay in the node, expert 3 alone fills node 1's NIC
        ReliefCase{"held_in_the_sending_node", 2, kTowardNode1, {{2, 0}}, 0, {{3, 1}}},
        // both devices of node 0 at the cap of one replica: nowhere to relieve
        ReliefCase{"sending_node_at_the_cap", 2, kTowardNode1, {{0, 1}, {1, 0}}, 1, {}},
        // one node: no NIC carries anything
        ReliefCase{"one_node", 4, kTowardNode1, {}, 0, {}}),
    [](const ::testing::TestParamInfo<ReliefCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
