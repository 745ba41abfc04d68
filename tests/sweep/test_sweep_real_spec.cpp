// test_sweep_real_spec.cpp: a sweep file of engine = "real" (training runs as child processes): the keys it
// validates before anything runs, and its expansion into points.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sweep/sweep.h"
#include "sweep_parse_error.h"

using namespace prophet;
using namespace prophet::sweep;
using prophet::testing::kTiny;
using prophet::testing::sweep_parse_error;

// engine = "real": validation before anything runs, and the expansion (ranks x seeds x grid x policies). Running
// the children is covered by tests/cli/test_sweep_real_cli.cpp, which has the prophet binary.
namespace {

const char* kReal =
    "[sweep]\nname = \"r\"\nengine = \"real\"\ntrain_config = \"experiments/train/skewed-4rank.toml\"\n"
    "policies = [\"static\", \"prophet\"]\nseeds = [1, 2]\n";

}  // namespace

TEST(SweepReal, ValidationNamesTheKey) {
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "clusters = [\"experiments/clusters/hpwnv-16.toml\"]\n")
                  .find("sweep.clusters"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "traces = [\"experiments/traces/zipf-e16-k2.toml\"]\n")
                  .find("sweep.traces"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error("[sweep]\nname = \"r\"\nengine = \"real\"\npolicies = [\"static\"]\nseeds = [1]\n")
                  .find("sweep.train_config"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error("[sweep]\nname = \"r\"\nengine = \"real\"\ntrain_config = \"no/such.toml\"\n"
                                "policies = [\"static\"]\nseeds = [1]\n")
                  .find("no such file"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "ranks = [0]\n").find("sweep.ranks"), std::string::npos);
    const std::string typo = sweep_parse_error(std::string(kReal) + "[sweep.grid]\n\"model.EE\" = [4]\n");
    EXPECT_NE(typo.find("sweep.grid.model.EE"), std::string::npos);
    EXPECT_NE(typo.find("did you mean"), std::string::npos);
    EXPECT_NE(
        sweep_parse_error(std::string(kReal) + "[sweep.grid]\n\"balance.policy\" = [\"static\"]\n").find("policies"),
        std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "[sweep.set]\n\"run.seed\" = 3\n").find("sweep.set.run.seed"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "[sweep.set]\n\"train.steps\" = -1\n").find("train.steps"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "[sweep.grid]\n\"train.steps\" = [2]\n[sweep.set]\n"
                                                     "\"train.steps\" = 3\n")
                  .find("also in [sweep.grid]"),
              std::string::npos);
    // the sim / model engines take none of the real engine's keys
    EXPECT_NE(sweep_parse_error(std::string(kTiny) + "policies = [\"static\"]\nseeds = [1]\nranks = [1]\n")
                  .find("sweep.ranks"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kTiny) + "policies = [\"static\"]\nseeds = [1]\ntime_limit_s = 60\n")
                  .find("sweep.time_limit_s"),
              std::string::npos);
    // time_limit_s: seconds, > 0
    for (const char* bad : {"0", "-5", "\"1h\"", "true"})
        EXPECT_NE(sweep_parse_error(std::string(kReal) + "time_limit_s = " + bad + "\n")
                      .find("sweep.time_limit_s = " + std::string(bad)),
                  std::string::npos)
            << bad;
    EXPECT_DOUBLE_EQ(parse_sweep_string(std::string(kReal) + "time_limit_s = 90.5\n", "r.toml").time_limit_s, 90.5);
    // validate_oversubscribed: a bool, off by default, real engine only (docs/testbed.md)
    EXPECT_FALSE(parse_sweep_string(kReal, "r.toml").validate_oversubscribed);
    EXPECT_TRUE(
        parse_sweep_string(std::string(kReal) + "validate_oversubscribed = true\n", "r.toml").validate_oversubscribed);
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "validate_oversubscribed = 1\n")
                  .find("sweep.validate_oversubscribed = 1"),
              std::string::npos);
    EXPECT_NE(
        sweep_parse_error(std::string(kTiny) + "policies = [\"static\"]\nseeds = [1]\nvalidate_oversubscribed = true\n")
            .find("sweep.validate_oversubscribed"),
        std::string::npos);
}

TEST(SweepReal, ExpansionAndIdentity) {
    const SweepSpec spec = parse_sweep_string(std::string(kReal) +
                                                  "ranks = [1, 4]\n[sweep.grid]\n"
                                                  "\"train.lr\" = [0.001, 0.003]\n[sweep.set]\n"
                                                  "\"train.steps\" = 3\n",
                                              "r.toml");
    EXPECT_EQ(spec.engine, "real");
    ASSERT_EQ(spec.set.size(), 1u);
    const std::vector<SweepPoint> points = expand_points(spec);
    ASSERT_EQ(points.size(), 16u);  // ranks 2 x seeds 2 x lr 2 x policies 2
    std::set<std::string> hashes;
    for (const SweepPoint& p : points) hashes.insert(p.hash);
    EXPECT_EQ(hashes.size(), points.size());
    EXPECT_EQ(points[0].ranks, 1);
    EXPECT_EQ(points[15].ranks, 4);
    EXPECT_EQ(points[0].policy, "static");
    EXPECT_EQ(points[1].policy, "prophet");
    // policy varies fastest; the pair shares every other coordinate
    EXPECT_EQ(coordinates_key(points[0]), coordinates_key(points[1]));
    EXPECT_NE(coordinates_key(points[0]), coordinates_key(points[2]));
    EXPECT_NE(points[0].canonical.find("point.ranks=1\n"), std::string::npos);
    EXPECT_NE(points[0].canonical.find("train.steps=3\n"), std::string::npos);
    EXPECT_NE(points[0].canonical.find("train.lr="), std::string::npos);
    // a default ranks list is [1]
    EXPECT_EQ(expand_points(parse_sweep_string(kReal, "r.toml")).size(), 4u);
}

TEST(SweepReal, ShippedSmokeParses) {
    const SweepSpec spec = parse_sweep_file("experiments/sweeps/real-smoke.toml");
    EXPECT_EQ(spec.engine, "real");
    EXPECT_EQ(expand_points(spec).size(), 6u);
}

// [sweep.calibrate_set]: the calibration run's own config (held out from the validated points); it may set a grid
// key (that is the point: calibrate on one value, validate on others), only with validate_cluster = "calibrate".
TEST(SweepReal, CalibrateSetIsHeldOut) {
    const std::string calibrated = std::string(kReal) + "ranks = [2]\nvalidate_cluster = \"calibrate\"\n";
    const SweepSpec spec = parse_sweep_string(
        calibrated + "[sweep.grid]\n\"model.F\" = [256, 512]\n[sweep.calibrate_set]\n\"model.F\" = 128\n", "r.toml");
    ASSERT_EQ(spec.calibrate_set.size(), 1u);
    EXPECT_EQ(spec.calibrate_set[0].first, "model.F");
    EXPECT_EQ(spec.calibrate_set[0].second, "128");
    EXPECT_EQ(expand_points(spec).size(), 8u);  // the calibration is no point: seeds 2 x F 2 x policies 2
    EXPECT_NE(sweep_parse_error(std::string(kReal) + "[sweep.calibrate_set]\n\"model.F\" = 128\n").find("calibrate"),
              std::string::npos);
    const std::string typo = sweep_parse_error(calibrated + "[sweep.calibrate_set]\n\"model.FF\" = 128\n");
    EXPECT_NE(typo.find("sweep.calibrate_set.model.FF"), std::string::npos);
    EXPECT_NE(sweep_parse_error(calibrated + "[sweep.calibrate_set]\n\"model.F\" = -1\n").find("model.F"),
              std::string::npos);
}

TEST(SweepReal, ShippedMainJobParses) {
    const SweepSpec real = parse_sweep_file("experiments/sweeps/main-real.toml");
    EXPECT_EQ(expand_points(real).size(), 20u);  // 4 policies x 5 seeds on 2 ranks
    EXPECT_EQ(real.validate_cluster, "calibrate");
    // held out: calibrated on the gate's own routing, validated on runs that replay the skewed trace
    ASSERT_EQ(real.calibrate_set.size(), 1u);
    EXPECT_EQ(real.calibrate_set[0].first, "routing.source");
    EXPECT_EQ(real.calibrate_set[0].second, "\"gate\"");
    const SweepSpec sim = parse_sweep_file("experiments/sweeps/main-sim.toml");
    EXPECT_EQ(expand_points(sim).size(), 72u);
}
