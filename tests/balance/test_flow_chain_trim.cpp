// flow's chain trims (flow_chain_trim.h) and the chain counts they read (cost_model.h ChainLoads): the counts by
// hand, a trim leaves no device over its level (counted afresh, not by the trim's own running counts), takes only
// replicas and the lightest useful one first, the walk's levels and stop, and flow keeping a trim where one pays.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "balance/cluster.h"
#include "balance/flow_chain_trim.h"
#include "balance/policy_flow.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

// hpwnv-16 (4 nodes of 4 devices, one NIC per node) under a chain or star broadcast
CostModel chain_model(TransBroadcast broadcast = TransBroadcast::kChain) {
    CostModel m = testing::paper_cost_model(16, 16384);
    m.cluster = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/hpwnv-16.toml");
    m.topology_aware = true;
    m.trans_broadcast = broadcast;
    m.model.d_ffn = 4096;
    m.model.seq_len = 1024;
    return m;
}

struct Copy {
    int expert, device;
};

// E experts over 16 devices in the static layout (expert e on device e / (E / 16)), with these replicas
Placement with_copies(int E, const std::vector<Copy>& copies) {
    Placement p = Placement::make_static(16, E);
    for (const Copy& c : copies) p.add_replica(c.expert, c.device);
    return p;
}

struct ChainCase {
    const char* name;
    int E;
    std::vector<Copy> copies;
    std::vector<std::pair<int, int>> sent, received;  // (device, copies) of the devices with any; the rest 0
    int busiest;
};

class ChainLoadsByHand : public ::testing::TestWithParam<ChainCase> {};

// a chain starts at the owner and visits the holders from the first device of the owner's node on, wrapping
TEST_P(ChainLoadsByHand, CountsEachDevicesForwardedAndReceivedCopies) {
    const ChainCase& c = GetParam();
    const ChainLoads loads = chain_loads(chain_model(), with_copies(c.E, c.copies));
    std::vector<int> sent(16, 0), received(16, 0);
    for (const auto& [d, n] : c.sent) sent[d] = n;
    for (const auto& [d, n] : c.received) received[d] = n;
    EXPECT_EQ(loads.sent, sent);
    EXPECT_EQ(loads.received, received);
    EXPECT_EQ(loads.busiest(), c.busiest);
}

INSTANTIATE_TEST_SUITE_P(
    Chains, ChainLoadsByHand,
    ::testing::Values(
        ChainCase{"none", 16, {}, {}, {}, 0}, ChainCase{"one_in_the_node", 16, {{0, 2}}, {{0, 1}}, {{2, 1}}, 1},
        // expert 5 on device 5 (node 1): 5 -> 6 (node 1), -> 12 (node 3), -> 1 (node 0, wrapped)
        ChainCase{"wraps_after_the_last_node",
                  16,
                  {{5, 1}, {5, 6}, {5, 12}},
                  {{5, 1}, {6, 1}, {12, 1}},
                  {{6, 1}, {12, 1}, {1, 1}},
                  1},
        // expert 0: 0 -> 1 -> 2; expert 1: 1 -> 2
        ChainCase{"two_chains_through_one_device", 16, {{0, 1}, {0, 2}, {1, 2}}, {{0, 1}, {1, 2}}, {{1, 1}, {2, 2}}, 2},
        // E = 32: device 0 owns experts 0 and 1 and heads both chains
        ChainCase{"an_owner_heads_two_chains", 32, {{0, 4}, {1, 8}}, {{0, 2}}, {{4, 1}, {8, 1}}, 2}),
    [](const auto& info) { return std::string(info.param.name); });

// random copies of a skewed layer: each of `copies` copies of a hot expert (of the 8 hottest by index) on a random
// device
Placement random_copies(int E, int copies, uint64_t seed) {
    Rng rng(seed);
    Placement p = Placement::make_static(16, E);
    for (int i = 0; i < copies; ++i)
        p.add_replica(static_cast<int>(rng.uniform() * 8) % E, static_cast<int>(rng.uniform() * 16) % 16);
    return p;
}

std::vector<double> falling_loads(int E) {
    std::vector<double> load(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) load[e] = 1000.0 / (e + 1);
    return load;
}

struct TrimCase {
    const char* name;
    int E, copies;
};

class TrimLevels : public ::testing::TestWithParam<TrimCase> {};

TEST_P(TrimLevels, NoDeviceIsLeftOverTheLevelAndOnlyReplicasGo) {
    const TrimCase& c = GetParam();
    const CostModel m = chain_model();
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        const Placement start = random_copies(c.E, c.copies, seed);
        const int busiest = chain_loads(m, start).busiest();
        for (int level = busiest; level >= 0; --level) {
            const Placement t = trim_chain_copies(m, falling_loads(c.E), start, level);
            EXPECT_LE(chain_loads(m, t).busiest(), level) << "seed " << seed;
            EXPECT_EQ(t.owner, start.owner);
            for (int e = 0; e < c.E; ++e)
                for (int d = 0; d < 16; ++d)
                    if (t.holds(e, d)) {
                        EXPECT_TRUE(start.holds(e, d)) << "e " << e << " d " << d;
                    }
            if (level == busiest) {
                EXPECT_EQ(t.replica, start.replica) << "nothing over the level: nothing goes";
            }
            if (level == 0) {
                EXPECT_EQ(t.num_replicas(), 0);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Copies, TrimLevels,
                         ::testing::Values(TrimCase{"few_copies_e16", 16, 8}, TrimCase{"many_copies_e16", 16, 40},
                                           TrimCase{"many_copies_e32", 32, 48}),
                         [](const auto& info) { return std::string(info.param.name); });

struct ChoiceCase {
    const char* name;
    int E;
    std::vector<Copy> copies;
    int level;
    Copy removed;  // the one copy the trim takes
};

class TrimChoice : public ::testing::TestWithParam<ChoiceCase> {};

TEST_P(TrimChoice, TakesTheLightestCopyThatLowersTheDevicesCount) {
    const ChoiceCase& c = GetParam();
    const Placement start = with_copies(c.E, c.copies);
    const Placement t = trim_chain_copies(chain_model(), falling_loads(c.E), start, c.level);
    Placement expected = start;
    expected.replica[static_cast<size_t>(c.removed.expert) * 16 + c.removed.device] = 0;
    EXPECT_EQ(t.replica, expected.replica);
}

INSTANTIATE_TEST_SUITE_P(
    Copies, TrimChoice,
    ::testing::Values(
        // device 2 receives copies of experts 0 (1000 / 2 copies) and 1 (500 / 2): expert 1's goes
        ChoiceCase{"receiver_drops_the_lighter", 16, {{0, 2}, {1, 2}}, 1, {1, 2}},
        // expert 0 with five holders (1000 / 5 = 200 each) against expert 1's two (500 / 2): expert 0's copy goes
        ChoiceCase{"per_copy_load_not_load", 16, {{0, 2}, {0, 5}, {0, 9}, {0, 13}, {1, 2}}, 1, {0, 2}},
        // device 0 owns experts 0 and 1 (E = 32) and heads both chains: the lighter chain's end goes
        ChoiceCase{"forwarder_drops_a_chain_end", 32, {{0, 4}, {1, 8}}, 1, {1, 8}}),
    [](const auto& info) { return std::string(info.param.name); });

// the levels the walk scores, from a start whose busiest device receives five copies
std::vector<int> walked_levels(const CostModel& m, const std::vector<double>& scores) {
    const Placement start = with_copies(16, {{0, 2}, {1, 2}, {4, 2}, {6, 2}, {8, 2}});
    std::vector<int> levels;
    walk_chain_trims(m, falling_loads(16), start, [&](const Placement& p) {
        levels.push_back(chain_loads(m, p).busiest());
        return scores[levels.size() - 1];
    });
    return levels;
}

TEST(ChainTrimWalk, ScoresEachLevelDownToOne) {
    EXPECT_EQ(walked_levels(chain_model(), {4, 3, 2, 1}), (std::vector<int>{4, 3, 2, 1}));
}

TEST(ChainTrimWalk, StopsAfterTwoRisesInARow) {
    EXPECT_EQ(walked_levels(chain_model(), {1, 2, 3, 0}), (std::vector<int>{4, 3, 2}));
}

TEST(ChainTrimWalk, NothingToTrimUnderAStarOrWithoutCopies) {
    EXPECT_TRUE(walked_levels(chain_model(TransBroadcast::kStar), {1, 1, 1, 1}).empty());
    int calls = 0;
    walk_chain_trims(chain_model(), falling_loads(16), Placement::make_static(16, 16), [&](const Placement&) {
        ++calls;
        return 0.0;
    });
    EXPECT_EQ(calls, 0);
}

// flow on skewed layers shaped like the real trace's (E = 32 on hpwnv-16, 33.5 MB experts: one copy through the
// chain takes 17.9 ms, more than half a layer's FEC): on some seed the families' best runs three copies through a
// device and flow keeps a trim of it (checked, not assumed), whose copies no device exceeds before extra copies
TEST(FlowChainTrim, KeepsATrimWhereTheStepPays) {
    const CostModel m = chain_model();
    BalanceOptions o;
    o.route_rule = RouteRule::kFlow;
    o.cost_eq = 8;
    o.flow_extra_copy_rounds = 0;
    int trimmed = 0;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
        const std::vector<int64_t> counts = testing::skewed_counts(16, 32, 16384, 1.4, seed);
        FlowPlanReport rep;
        const Placement p = plan_flow(counts.data(), 16, 32, m, o, Placement::make_static(16, 32), &rep);
        if (rep.chain_trim == 0) continue;
        ++trimmed;
        EXPECT_EQ(chain_loads(m, p).busiest(), rep.chain_trim) << "seed " << seed;
    }
    EXPECT_GT(trimmed, 0);
}

}  // namespace
}  // namespace prophet
