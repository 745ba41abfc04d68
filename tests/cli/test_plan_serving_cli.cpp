// test_plan_serving_cli.cpp: `prophet plan --set balance.regime=serving` adds the serving section (rebalances with
// predicted and realised balancedness, copies moved, stall) and names the regime; the default regime adds none.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../temp_dir_test.h"
#include "cli_util.h"

namespace prophet {
namespace {

class PlanServingCli : public testing::TempDirTest {
  protected:
    nlohmann::json plan(const std::string& extra, const std::string& trace = "experiments/traces/tiny-e4-d4.toml") {
        const std::string cluster = (dir_ / "cluster4.toml").string();
        std::ofstream(cluster) << "[cluster]\nname = \"test4\"\nnum_devices = 4\ndevices_per_node = 2\n"
                                  "compute_tflop_s = 1.0\na2a_gbit_s = [10.0]\ntrans_gbit_s = 10.0\n";
        const testing::CliResult r = testing::run_prophet(
            "",
            "plan --trace '" + trace + "' --cluster '" + cluster +
                "' --policy eplb --json --set plan.repeats=1 --set store.path='" + db_ + "' " + extra,
            dir_);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
    }
};

TEST_F(PlanServingCli, ServingRegimeReportsEachRebalance) {
    const nlohmann::json j =
        plan("--set balance.regime=serving --set balance.rebalance_every=2 --set balance.window=1");
    ASSERT_TRUE(j.contains("serving")) << j.dump();
    EXPECT_EQ(j["regime"], "serving");
    const nlohmann::json& policies = j["serving"]["policies"];
    ASSERT_EQ(policies.size(), 2u);  // static added as the baseline, then eplb
    EXPECT_EQ(policies[0]["name"], "static");
    EXPECT_EQ(policies[1]["name"], "eplb");
    const nlohmann::json& rebalance = policies[1]["rebalances"][0];  // tiny: 4 iterations, one rebalance at 2
    EXPECT_EQ(rebalance["at_iteration"], 2);
    EXPECT_EQ(rebalance["window"], nlohmann::json::array({1, 2}));
    for (const char* key :
         {"predicted_balancedness", "realised_balancedness", "copies_moved", "bytes_moved", "stall_ms"})
        EXPECT_TRUE(rebalance.contains(key)) << key;
}

TEST_F(PlanServingCli, DefaultTrainingRegimeAddsNoServingSection) {
    const nlohmann::json j = plan("");
    EXPECT_EQ(j["regime"], "training");
    EXPECT_FALSE(j.contains("serving"));
}

// balance.regime = auto (the default): a trace imported from an inference engine's statistics is replayed as serving
TEST_F(PlanServingCli, AutoRegimeServesAnImportedEngineTrace) {
    const std::string trace = (dir_ / "vllm.ptrace").string();
    const testing::CliResult imported = testing::run_prophet(
        "", "trace import --format vllm tests/fixtures/import/vllm.json --devices 4 --top-k 2 -o '" + trace + "'",
        dir_);
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    const nlohmann::json j = plan(
        "--set balance.rebalance_every=1 --set balance.window=1 --set plan.d_model=64 --set plan.d_ffn=128", trace);
    EXPECT_EQ(j["regime"], "serving");
    EXPECT_TRUE(j.contains("serving")) << j.dump();
}

}  // namespace
}  // namespace prophet
