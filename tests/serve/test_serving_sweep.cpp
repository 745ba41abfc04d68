// The serving sweep file: `command = "infer"` points run prophet profile --inference, take serve.* keys (lists
// included) in [sweep.set] and [sweep.grid], and refuse what an inference point cannot do.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sweep/sweep.h"

using namespace prophet;
using namespace prophet::sweep;

namespace {

std::string error_of(const std::string& text) {
    try {
        parse_sweep_string(text, "test.toml", PROPHET_SOURCE_DIR);
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        return e.what();
    }
    return "";
}

const char* kBase = R"([sweep]
name = "s"
engine = "real"
train_config = "experiments/train/skewed-4rank.toml"
ranks = [4]
policies = ["static", "moetuner"]
seeds = [1]
)";

}  // namespace

TEST(ServingSweep, TheShippedFileExpands) {
    const SweepSpec spec =
        parse_sweep_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/sweeps/serving-moetuner.toml");
    EXPECT_EQ(spec.command, "infer");
    const std::vector<SweepPoint> points = expand_points(spec);
    ASSERT_EQ(points.size(), 4u * 3 * 2);  // policies x seeds x samples
    int out_of_sample = 0;
    for (const SweepPoint& p : points) {
        bool command = false, clusters = false;
        for (const auto& [k, v] : p.params) {
            command |= k == "point.command" && v == "\"infer\"";
            clusters |= k == "serve.sim_clusters" && v.find("moetuner-h200-ep4.toml") != std::string::npos;
        }
        EXPECT_TRUE(command && clusters) << p.canonical;
        ASSERT_EQ(p.grid.size(), 1u);
        if (p.grid[0].second != "[]") ++out_of_sample;
    }
    EXPECT_EQ(out_of_sample, 12);
}

// moetuner-ilp2.toml: ILP 2 with and without its traffic term, in and out of sample
TEST(ServingSweep, TheIlp2AblationExpands) {
    const SweepSpec spec = parse_sweep_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/sweeps/moetuner-ilp2.toml");
    EXPECT_EQ(spec.command, "infer");
    const std::vector<SweepPoint> points = expand_points(spec);
    ASSERT_EQ(points.size(), 2u * 3 * 2);  // ilp2_traffic x seeds x samples
    int blind = 0;
    for (const SweepPoint& p : points) {
        ASSERT_EQ(p.grid.size(), 2u) << p.canonical;
        for (const auto& [k, v] : p.grid)
            if (k == "balance.ilp2_traffic" && v == "false") ++blind;
    }
    EXPECT_EQ(blind, 6);
}

TEST(ServingSweep, BadCommandsAreNamed) {
    EXPECT_NE(error_of(std::string(kBase) + "command = \"serve\"\n").find("sweep.command"), std::string::npos);
    // serve.* keys belong to inference points only
    EXPECT_NE(error_of(std::string(kBase) + "[sweep.set]\n\"serve.iterations\" = 3\n").find("serve.iterations"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(kBase) + "command = \"infer\"\nvalidate_cluster = "
                                            "\"experiments/clusters/cpu-local.toml\"\n")
                  .find("sweep.validate_cluster"),
              std::string::npos);
    // a value of the wrong type is caught before any child runs (a list of the wrong length only by the child, exit 3)
    EXPECT_NE(error_of(std::string(kBase) + "command = \"infer\"\n[sweep.set]\n\"serve.eval_mixture\" = \"B\"\n")
                  .find("serve.eval_mixture"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(kBase) + "command = \"infer\"\n[sweep.grid]\n\"serve.sim_clusters\" = [[1, 2]]\n")
                  .find("serve.sim_clusters"),
              std::string::npos);
    const std::string sim = "[sweep]\nname = \"s\"\ncommand = \"infer\"\nclusters = [\"experiments/clusters/"
                            "hpwnv-16.toml\"]\ntraces = [\"experiments/traces/zipf-e16-k2.toml\"]\npolicies = "
                            "[\"static\"]\nseeds = [1]\n";
    EXPECT_NE(error_of(sim).find("sweep.command"), std::string::npos);
}
