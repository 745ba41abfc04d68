// The trainer's planner prices its cluster file as it runs: topology-aware where the file describes its topology
// (as `prophet plan` prices it), and always with a star Trans/Agg, the point-to-point sends the trainer executes.
// Until 2026-12-06 the trainer (and the simulator's validation of its runs) priced every file flat, so a user who
// gave balance.cluster an H100 file planned on Eq 1's all-to-all, and plan on its links.
#include <gtest/gtest.h>

#include <string>

#include "balance/cluster.h"
#include "balance/options.h"
#include "train/train_config.h"
#include "train_fixtures.h"

namespace prophet {
namespace {

struct PricingCase {
    const char* name;  // the test's name
    const char* file;
    bool topology_aware;  // what the file describes, and so what plan and the trainer must choose
};

void PrintTo(const PricingCase& c, std::ostream* os) { *os << c.file; }

std::string cluster_path(const char* file) { return std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + file; }

class TrainerPricing : public ::testing::TestWithParam<PricingCase> {};

TEST_P(TrainerPricing, TopologyAsPlanPricesItTransAStar) {
    constexpr int kRanks = 4;
    const Config config = skewed_config({std::string("balance.cluster=\"") + cluster_path(GetParam().file) + "\""});
    const CostModel cost = train_settings_from(config, kRanks).cost;
    EXPECT_EQ(cost.topology_aware, GetParam().topology_aware);
    EXPECT_EQ(cost.trans_broadcast, TransBroadcast::kStar);
    EXPECT_EQ(cost.cluster.num_devices, kRanks);
    // plan's choice on the same file, for the same devices
    ClusterSpec cluster = load_cluster_file(cluster_path(GetParam().file));
    cluster.num_devices = kRanks;
    Schema schema;
    add_cost_model_keys(schema, "");
    const TraceShape shape{kRanks, kRanks, int64_t{1024} * kRanks, 64, 128, 256};
    EXPECT_EQ(cost_model_for_trace(cluster, "test", shape, "test", Config(schema), "").topology_aware,
              cost.topology_aware);
}

INSTANTIATE_TEST_SUITE_P(ClusterFiles, TrainerPricing,
                         ::testing::Values(PricingCase{"cpu_local", "cpu-local.toml", false},
                                           PricingCase{"moetuner_h100", "moetuner-h100-ep4.toml", false},
                                           // a chain in the file: the trainer still sends copies in a star
                                           PricingCase{"hpwnv_16", "hpwnv-16.toml", true},
                                           PricingCase{"hpnv_16", "hpnv-16.toml", true},
                                           PricingCase{"h100_8", "h100-8.toml", true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
