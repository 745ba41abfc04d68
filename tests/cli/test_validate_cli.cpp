// `prophet validate` on the committed replay fixture (tests/fixtures/replay-2rank.db, two real 2-rank runs with
// --timeline) and the cluster file calibrated for it (tests/fixtures/replay-2rank-cluster.toml): the recorded
// replay is exact within 3%, the per-op model's replay reports every statistic and is recorded in the store; bad
// invocations say what to pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "core/error.h"
#include "balance/cluster.h"
#include "sim/op_model.h"
#include "store/store.h"

namespace {

using prophet::testing::run_prophet;

const std::string kFixtureDir = std::string(PROPHET_SOURCE_DIR) + "/tests/fixtures";

class ValidateCli : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        TempDirTest::SetUp();
        if (!std::filesystem::exists(kFixtureDir + "/replay-2rank.db")) GTEST_SKIP() << "no replay fixture";
        std::filesystem::copy_file(kFixtureDir + "/replay-2rank.db", db_);  // the command records into its store
    }
};

}  // namespace

TEST_F(ValidateCli, RecordedReplayIsExact) {
    const auto r = run_prophet("", "validate --store '" + db_ + "' --experiment replay-fixture --replay recorded --json "
                                   "--no-record", dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["points"].size(), 2u);
    for (const auto& p : j["points"]) {
        EXPECT_LE(std::abs(p["max_step_error"].get<double>()), 0.03) << p["run_id"];
        EXPECT_GE(p["steps"].get<int>(), 4);
    }
    std::set<std::string> schedules;
    for (const auto& p : j["points"]) schedules.insert(p["schedule"].get<std::string>());
    EXPECT_EQ(schedules, (std::set<std::string>{"none", "blockwise"}));
}

// A run recorded under schedule.mode = fastermoe (Trans/Agg on the comm lane beside the all-to-alls, planned in
// order) replays with its recorded durations as exactly as the fixture's runs and carries its own schedule; the
// per-op model (the fixture's calibration: the same shape and ranks) replays it too.
TEST_F(ValidateCli, FastermoeRunReplaysUnderItsOwnSchedule) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
    const std::string db = (dir_ / "fastermoe.db").string();
    const auto train = run_prophet("mpirun --allow-run-as-root --oversubscribe -np 2",
                                   "train --config tests/fixtures/replay-2rank.toml --set schedule.mode=fastermoe "
                                   "--set train.steps=5 --set store.path='" + db + "' --timeline",
                                   dir_);
    ASSERT_EQ(train.exit_code, 0) << train.err;
    for (const std::string replay : {"recorded", "model"}) {
        const auto r = run_prophet("", "validate --store '" + db + "' --experiment replay-fixture --json --no-record " +
                                           (replay == "recorded" ? "--replay recorded"
                                                                 : "--cluster " + kFixtureDir + "/replay-2rank-cluster.toml"),
                                   dir_);
        ASSERT_EQ(r.exit_code, 0) << replay << ": " << r.err;
        const auto j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j["points"].size(), 1u) << replay;
        const auto& p = j["points"][0];
        EXPECT_EQ(p["schedule"], "fastermoe") << replay;
        EXPECT_EQ(p["steps"].get<int>(), 4) << replay << ": step 0 left out";
        EXPECT_TRUE(p["recorded_ms"].contains("trans") && p["recorded_ms"].contains("agg")) << replay;
        if (replay == "recorded") {
            EXPECT_LE(std::abs(p["max_step_error"].get<double>()), 0.03);
        }
    }
}

TEST_F(ValidateCli, OpModelReportsEveryStatisticAndIsRecorded) {
    const auto r = run_prophet("", "validate --store '" + db_ + "' --experiment replay-fixture --cluster " + kFixtureDir +
                                       "/replay-2rank-cluster.toml --json", dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["replay"], "model");
    EXPECT_EQ(j["calibrated_on"], "V=256 T=32 C=64 NH=4 L=2 E=4 K=1 F=2048 B=16 D=2");
    ASSERT_EQ(j["points"].size(), 2u);
    for (const auto& p : j["points"]) {
        EXPECT_FALSE(p["held_out"].get<bool>()) << "the fixture's config is the calibration's";
        EXPECT_GT(p["sim_median_ms"].get<double>(), 0.0);
        EXPECT_GT(p["measured_median_ms"].get<double>(), 0.0);
        const double err = p["error_median"].get<double>();
        EXPECT_NEAR(err, p["sim_median_ms"].get<double>() / p["measured_median_ms"].get<double>() - 1, 1e-9);
        EXPECT_TRUE(p["residual_ms"].contains("fec")) << "per-op residuals by kind";
    }
    for (const char* key : {"mape", "bias", "p90_abs", "max_abs", "kendall_tau", "tau_pairs", "heldout_points"})
        EXPECT_TRUE(j["total"].contains(key)) << key;
    EXPECT_EQ(j["total"]["heldout_points"], 0);
    // a validation run with one measured/simulated pair per point
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs("validation");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(store.get_metrics(runs[0].run_id, "sim_step_ms").size(), 2u);
    EXPECT_EQ(store.get_metrics(runs[0].run_id, "measured_step_ms").size(), 2u);
    // the report's figure draws it (report/fig_validation_replay.py), where the Python stack is installed
    if (std::system("/usr/bin/python3 -c 'import pandas, seaborn, matplotlib' >/dev/null 2>&1") != 0) return;
    const auto fig = prophet::testing::run_command(
        "/usr/bin/python3 report/fig_validation_replay.py --db '" + db_ + "' --out '" + (dir_ / "figs").string() + "'",
        dir_, 300);
    EXPECT_EQ(fig.exit_code, 0) << fig.err;
    EXPECT_TRUE(std::filesystem::exists(dir_ / "figs" / "fig_validation_replay.png")) << fig.out;
    EXPECT_NE(fig.out.find("calibration"), std::string::npos) << fig.out;
}

TEST_F(ValidateCli, OversubscribedRunsAreLeftOutUnlessAsked) {
    prophet::Store store = prophet::Store::open(db_);
    const std::string run = store.list_runs("replay-fixture").front().run_id;
    store.put_params(run, {{"testbed.oversubscribed", "true"}});
    const auto r = run_prophet("", "validate --store '" + db_ + "' --run " + run + " --replay recorded --no-record", dir_);
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.out;
    EXPECT_NE(r.err.find("--include-oversubscribed"), std::string::npos) << r.err;
    const auto kept = run_prophet("", "validate --store '" + db_ + "' --run " + run +
                                          " --replay recorded --no-record --include-oversubscribed", dir_);
    EXPECT_EQ(kept.exit_code, 0) << kept.err;
}

TEST_F(ValidateCli, UsageErrorsSayWhatToPass) {
    const auto none = run_prophet("", "validate --store '" + db_ + "'", dir_);
    EXPECT_EQ(none.exit_code, prophet::kExitUsage);
    EXPECT_NE(none.err.find("--experiment"), std::string::npos) << none.err;
    const auto no_cluster = run_prophet("", "validate --store '" + db_ + "' --experiment replay-fixture", dir_);
    EXPECT_EQ(no_cluster.exit_code, prophet::kExitUsage);
    EXPECT_NE(no_cluster.err.find("profile"), std::string::npos) << no_cluster.err;
    const auto no_ops = run_prophet("", "validate --store '" + db_ + "' --experiment replay-fixture --cluster "
                                        "experiments/clusters/cpu-local.toml", dir_);
    EXPECT_EQ(no_ops.exit_code, prophet::kExitConfig);
    EXPECT_NE(no_ops.err.find("[ops]"), std::string::npos) << no_ops.err;
}

// --refit-on re-fits the per-kind scale and in-step terms on the calibration run of the store (offline re-scoring
// after a change of the fit); a run of another config, or the recorded replay, is refused naming the flag.
TEST_F(ValidateCli, RefitOnTheCalibrationRunOnly) {
    prophet::Store store = prophet::Store::open(db_);
    const std::string run = store.list_runs("replay-fixture").front().run_id;
    const std::string base = "validate --store '" + db_ + "' --experiment replay-fixture --no-record --json --cluster " +
                             kFixtureDir + "/replay-2rank-cluster.toml";
    const auto r = run_prophet("", base + " --refit-on " + run, dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("re-fitted on run " + run), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("allreduce=+"), std::string::npos) << "the in-step term of the dense all-reduce: " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["points"].size(), 2u);
    // repeatable: the fit pools the steps of every run given (here the same recording twice: the same medians)
    const auto twice = run_prophet("", base + " --refit-on " + run + " --refit-on " + run, dir_);
    ASSERT_EQ(twice.exit_code, 0) << twice.err;
    EXPECT_NE(twice.err.find("re-fitted on runs " + run + " " + run + ":"), std::string::npos) << twice.err;
    EXPECT_EQ(nlohmann::json::parse(twice.out)["points"], nlohmann::json::parse(r.out)["points"]);
    const auto recorded = run_prophet("", "validate --store '" + db_ + "' --experiment replay-fixture --no-record "
                                          "--replay recorded --refit-on " + run, dir_);
    EXPECT_EQ(recorded.exit_code, prophet::kExitConfig);
    EXPECT_NE(recorded.err.find("--refit-on"), std::string::npos) << recorded.err;
    store.put_params(run, {{"comm.link_gbps", "4.0"}});  // now a run over an emulated link: not the calibration's
    const auto other = run_prophet("", base + " --refit-on " + run, dir_);
    EXPECT_EQ(other.exit_code, prophet::kExitConfig);
    EXPECT_NE(other.err.find("--refit-on"), std::string::npos) << other.err;
    EXPECT_NE(other.err.find("calibrated_on"), std::string::npos) << other.err;
}

// A calibration config with an emulated link times the communication tables on the unpaced transport: the per-op
// model adds the link's egress time to the copy's (sim/op_model.cpp wire_s), so tables timed through the link
// counted it twice (the main job's replay came out +34% slow). At 1 Gbit/s (125 MB/s) the link caps anything timed
// through it below 125 MB/s; the unpaced transport of two ranks on one machine moves GB/s even under ctest -j2.
TEST_F(ValidateCli, CalibrateOverALinkTimesTheUnpacedTransport) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
    const std::string cluster = (dir_ / "calibrated-link.toml").string();
    const auto r = run_prophet("mpirun --allow-run-as-root --oversubscribe -np 2",
                               "profile --config tests/fixtures/replay-2rank.toml --calibrate --cluster-out '" +
                                   cluster + "' --set train.steps=2 --set comm.link_gbps=1.0 --set store.path='" +
                                   (dir_ / "profile.db").string() + "' --grid-passes 1",
                               dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const prophet::sim::OpTables t = prophet::sim::load_op_tables(cluster);
    EXPECT_EQ(t.gemm.passes, 1) << "--grid-passes 1 (this test needs no accurate GEMM rates)";
    EXPECT_NE(r.err.find("GEMM grid timing 768/768 (100%)"), std::string::npos) << r.err;
    const double link_bytes_per_s = 1e9 / 8;
    EXPECT_GT(t.p2p_bytes_per_s, 2 * link_bytes_per_s);
    EXPECT_GT(t.a2a_bytes_per_s, 2 * link_bytes_per_s);
    EXPECT_GE(t.link_message_s, 0.0);
}

// `prophet profile --calibrate` writes the per-op model's [ops] tables (the GEMM rate grid, forward and both
// backward forms, every rate; the attention rate at an --ops-shape) into the cluster file, which the planner still
// reads and prophet validate accepts.
TEST_F(ValidateCli, CalibrateWritesTheOpsTables) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "no mpirun";
    const std::string cluster = (dir_ / "calibrated.toml").string();
    const auto r = run_prophet("mpirun --allow-run-as-root --oversubscribe -np 2",
                               "profile --config tests/fixtures/replay-2rank.toml --calibrate --cluster-out '" + cluster +
                                   "' --set train.steps=2 --set store.path='" + (dir_ / "profile.db").string() +
                                   "' --ops-shape C=96,F=1536,NH=8",
                               dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const prophet::sim::OpTables t = prophet::sim::load_op_tables(cluster);
    EXPECT_EQ(t.calibrated_on, "V=256 T=32 C=64 NH=4 L=2 E=4 K=1 F=2048 B=16 D=2") << "--ops-shape adds tables only";
    // the fixed grid, whatever the config: M = 16 .. 1024, N = K = 8 .. 2048, a positive rate at every point
    EXPECT_EQ(t.gemm.m, (std::vector<double>{16, 64, 256, 1024}));
    EXPECT_EQ(t.gemm.n, (std::vector<double>{8, 32, 64, 128, 256, 512, 1024, 2048}));
    EXPECT_EQ(t.gemm.k, t.gemm.n);
    EXPECT_EQ(t.gemm.passes, 2) << "the default --grid-passes";
    for (size_t op = 0; op < 3; ++op) {
        ASSERT_EQ(t.gemm.flops_per_s[op].size(), 4u * 8 * 8) << op;
        for (double r : t.gemm.flops_per_s[op]) EXPECT_GT(r, 0.0) << op;
    }
    EXPECT_EQ(t.attn_flops_per_s_at.count({96, 8}), 1u);
    EXPECT_GE(t.link_message_s, 0.0);
    // the grid's progress, on rank 0 only: one line per tenth of the 2 x 3 x 256 timings (stderr is a pipe here)
    size_t progress_lines = 0;
    for (size_t at = r.err.find("GEMM grid timing "); at != std::string::npos;
         at = r.err.find("GEMM grid timing ", at + 1))
        ++progress_lines;
    EXPECT_EQ(progress_lines, 10u) << r.err;
    EXPECT_NE(r.err.find("GEMM grid timing 1536/1536 (100%)"), std::string::npos) << r.err;
    // fitted on the profile run's own timeline: factors of the compute kinds, in-step terms of the collectives
    EXPECT_TRUE(t.scale.count("fec")) << "scale of the expert compute";
    for (const char* kind : {"allreduce", "stats", "combine"}) {
        ASSERT_TRUE(t.in_step_s.count(kind)) << kind;
        EXPECT_GE(t.in_step_s.at(kind), 0.0) << kind;
    }
    EXPECT_GT(t.stream_bytes_per_s, 0.0);
    EXPECT_GT(t.attn_flops_per_s, 0.0);
    EXPECT_GT(t.a2a_bytes_per_s, 0.0);
    EXPECT_GT(t.p2p_bytes_per_s, 0.0);
    EXPECT_GT(t.allreduce_bytes_per_s, 0.0);
    EXPECT_EQ(prophet::load_cluster_file(cluster).num_devices, 2);
    // a malformed --ops-shape: ProfileCalibrateFlags.*
    const auto v = run_prophet("", "validate --store '" + db_ + "' --experiment replay-fixture --cluster '" + cluster +
                                       "' --no-record", dir_);
    EXPECT_EQ(v.exit_code, 0) << v.err;
}
