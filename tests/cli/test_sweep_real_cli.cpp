// `prophet sweep` with engine = "real": each point runs `prophet train` as a child process that records its own
// run; the sweep records the point run (child_run_id, summary metrics, speedup_vs_static), skips finished points on
// a re-run, and records a failing child as a failed point without stopping.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "core/error.h"
#include "core/testbed.h"
#include "store/store.h"
#include "store_queries.h"

namespace fs = std::filesystem;
using prophet::testing::metric;
using prophet::testing::param;

namespace {

class SweepRealCli : public prophet::testing::TempDirTest {
  protected:
    // Writes the sweep file into the temp dir and runs it (from the repository root) with --json.
    // report: build REPORT.md at the end (the other tests pass --no-report: the report takes seconds).
    prophet::testing::CliResult sweep(const std::string& body, bool report = false) {
        const fs::path file = dir_ / "sweep.toml";
        std::ofstream(file) << "[sweep]\nname = \"real-test\"\nengine = \"real\"\n"
                               "train_config = \"experiments/train/skewed-4rank.toml\"\n"
                            << body;
        return prophet::testing::run_prophet("", "sweep '" + file.string() + "' --json" + (report ? "" : " --no-report") +
                                                 " --set store.path='" + db_ + "'",
                                             dir_);
    }
};

}  // namespace

TEST_F(SweepRealCli, RecordsPointAndChildRunsAndResumes) {
    const std::string body =
        "ranks = [1]\npolicies = [\"static\", \"prophet\"]\nseeds = [1]\n[sweep.set]\n\"train.steps\" = 3\n";
    const auto r = sweep(body);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["points"], 2);
    EXPECT_EQ(j["ran"], 2);
    EXPECT_EQ(j["failed"], 0);
    ASSERT_EQ(j["run_ids"].size(), 2u);

    prophet::Store store = prophet::Store::open(db_);
    std::map<std::string, int> by_command;
    for (const auto& row : store.list_runs("real-test")) {
        ++by_command[row.info.command];
        EXPECT_EQ(row.status, "finished") << row.run_id;
    }
    EXPECT_EQ(by_command["sweep"], 2);
    EXPECT_EQ(by_command["train"], 2);  // the children's own runs, under the sweep's name
    for (int i = 0; i < 2; ++i) {
        const std::string id = j["run_ids"][i];
        const prophet::RunRow row = store.get_run(id);
        EXPECT_EQ(row.info.backend, "real");
        EXPECT_FALSE(row.info.simulated);
        EXPECT_EQ(row.info.world_size, 1);
        std::string child;
        for (const auto& [k, v] : store.get_params(id))
            if (k == "child_run_id") child = nlohmann::json::parse(v).get<std::string>();
        ASSERT_FALSE(child.empty());
        const prophet::RunRow child_row = store.get_run(child);
        EXPECT_EQ(child_row.info.command, "train");
        EXPECT_EQ(store.get_metrics(child, "loss").size(), 3u);  // the child recorded its per-step metrics
        EXPECT_GT(metric(store, id, "median_step_ms"), 0);
        EXPECT_GT(metric(store, id, "final_loss"), 0);
        // the speedup pairs this point with the static point of the same coordinates (run_ids[0]): the static
        // point's median step time over this point's, both read back from the store
        const double speedup = metric(store, id, "speedup_vs_static");
        const std::string static_id = j["run_ids"][0];
        std::string static_policy;
        for (const auto& [k, v] : store.get_params(static_id))
            if (k == "balance.policy") static_policy = nlohmann::json::parse(v).get<std::string>();
        EXPECT_EQ(static_policy, "static");
        EXPECT_DOUBLE_EQ(speedup, metric(store, static_id, "median_step_ms") / metric(store, id, "median_step_ms"));
    }

    const auto again = sweep(body);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    const auto k = nlohmann::json::parse(again.out);
    EXPECT_EQ(k["already_done"], 2);
    EXPECT_EQ(k["skipped"], 2);
    EXPECT_EQ(k["ran"], 0);
    EXPECT_EQ(prophet::Store::open(db_).list_runs("real-test").size(), 4u);  // nothing new
}

TEST_F(SweepRealCli, FailingChildIsRecordedAndTheSweepContinues) {
    // model.K = 99 > E = 8: the child rejects it (exit 3) before training; K = 2 trains
    const auto r = sweep(
        "ranks = [1]\npolicies = [\"static\"]\nseeds = [1]\n[sweep.set]\n\"train.steps\" = 2\n"
        "[sweep.grid]\n\"model.K\" = [99, 2]\n");
    EXPECT_EQ(r.exit_code, prophet::kExitRunFailed) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["points"], 2);
    EXPECT_EQ(j["failed"], 1);
    EXPECT_EQ(j["ran"], 1);
    prophet::Store store = prophet::Store::open(db_);
    const prophet::RunRow failed = store.get_run(j["run_ids"][0]);
    EXPECT_EQ(failed.status, "failed");
    EXPECT_EQ(failed.exit_code.value_or(-1), prophet::kExitConfig);
    EXPECT_NE(failed.error.find("model.K"), std::string::npos) << failed.error;  // the child's stderr last line
    EXPECT_EQ(store.get_run(j["run_ids"][1]).status, "finished");
    EXPECT_NE(r.err.find("failed: "), std::string::npos);
}

TEST_F(SweepRealCli, ValidationRecordsSimulatedAndMeasuredStepTimeAndBuildsTheReport) {
    const auto r = sweep(
        "ranks = [1]\npolicies = [\"static\", \"prophet\"]\nseeds = [1]\n"
        "validate_cluster = \"experiments/clusters/cpu-local.toml\"\n[sweep.set]\n\"train.steps\" = 3\n",
        /*report=*/true);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["run_ids"].size(), 2u);
    prophet::Store store = prophet::Store::open(db_);
    for (const auto& id : j["run_ids"]) {
        const double sim = metric(store, id, "sim_step_ms");
        const double measured = metric(store, id, "measured_step_ms");
        EXPECT_GT(sim, 0);
        EXPECT_GT(measured, 0);
        EXPECT_NEAR(metric(store, id, "sim_error"), (sim - measured) / measured, 1e-9);
    }
    EXPECT_NE(r.err.find("sim "), std::string::npos) << r.err;  // the progress line shows the comparison
    EXPECT_TRUE(fs::is_regular_file(dir_ / "REPORT.md")) << r.err;
    EXPECT_NE(r.err.find("REPORT.md"), std::string::npos) << r.err;
}

TEST_F(SweepRealCli, ValidateClusterMustExist) {
    const auto r = sweep("ranks = [1]\npolicies = [\"static\"]\nseeds = [1]\nvalidate_cluster = \"no/such.toml\"\n");
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.err;
    EXPECT_NE(r.err.find("sweep.validate_cluster"), std::string::npos) << r.err;
}

// validate_cluster = "calibrate": one `prophet profile --calibrate` per (ranks, grid values) before the first such
// point, its cluster file beside the store, named in each point's params and used for that point's validation.
TEST_F(SweepRealCli, CalibrateMeasuresOneClusterPerRanksAndGridValues) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    const auto r = sweep(
        "ranks = [2]\npolicies = [\"static\", \"prophet\"]\nseeds = [1]\nvalidate_cluster = \"calibrate\"\n"
        "calibrate_grid_passes = 1\n"
        "[sweep.set]\n\"train.steps\" = 3\n[sweep.grid]\n\"model.K\" = [1, 2]\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["run_ids"].size(), 4u);
    std::set<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir_ / "clusters")) files.insert(entry.path().string());
    ASSERT_EQ(files.size(), 2u) << "one calibration per model.K value";
    prophet::Store store = prophet::Store::open(db_);
    std::map<std::string, std::set<std::string>> file_by_k;  // model.K -> the cluster files its points used
    for (const auto& id : j["run_ids"]) {
        const std::string file = nlohmann::json::parse(param(store, id, "validate_cluster")).get<std::string>();
        const std::string k = param(store, id, "model.K");
        EXPECT_TRUE(files.count(file)) << file;
        file_by_k[k].insert(file);
        EXPECT_GT(metric(store, id, "sim_step_ms"), 0);
        EXPECT_GT(metric(store, id, "measured_step_ms"), 0);
    }
    ASSERT_EQ(file_by_k.size(), 2u);
    EXPECT_EQ(file_by_k["1"].size(), 1u);
    EXPECT_EQ(file_by_k["2"].size(), 1u);
    EXPECT_NE(*file_by_k["1"].begin(), *file_by_k["2"].begin());
    int profiles = 0;
    for (const auto& row : store.list_runs("real-test")) profiles += row.info.command == "profile";
    EXPECT_EQ(profiles, 2) << "the calibrations are recorded under the sweep's name";
    EXPECT_NE(r.err.find("calibrated 2 rank(s) for validation"), std::string::npos) << r.err;

    const auto one_rank = sweep("ranks = [1, 2]\npolicies = [\"static\"]\nseeds = [1]\nvalidate_cluster = \"calibrate\"\n");
    EXPECT_EQ(one_rank.exit_code, prophet::kExitConfig) << one_rank.err;
    EXPECT_NE(one_rank.err.find("sweep.ranks >= 2"), std::string::npos) << one_rank.err;
}

// A point whose child ran more ranks than cores (4 ranks here, on a machine with fewer than 4 cores) is recorded
// with testbed.oversubscribed = true and left out of validation (no sim_error; the progress line says why) unless
// the sweep sets validate_oversubscribed = true (docs/testbed.md).
TEST_F(SweepRealCli, OversubscribedPointsAreLeftOutOfValidationUnlessAsked) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    if (prophet::usable_cores() >= 4) GTEST_SKIP() << "4 ranks fit this machine's cores: nothing oversubscribed";
    const std::string body = "ranks = [4]\npolicies = [\"static\"]\nseeds = [1]\ntime_limit_s = 300\n"
                             "validate_cluster = \"experiments/clusters/cpu-local.toml\"\n";
    const std::string steps = "[sweep.set]\n\"train.steps\" = 2\n";
    const auto skipped = sweep(body + steps);
    ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
    EXPECT_NE(skipped.err.find("validation skipped"), std::string::npos) << skipped.err;
    EXPECT_NE(skipped.err.find("oversubscribed"), std::string::npos) << skipped.err;
    std::string first;
    {
        prophet::Store store = prophet::Store::open(db_);
        first = nlohmann::json::parse(skipped.out)["run_ids"][0];
        EXPECT_TRUE(store.get_metrics(first, "sim_error").empty());
        std::map<std::string, std::string> params;
        for (const auto& [k, v] : store.get_params(first)) params[k] = v;
        EXPECT_EQ(params["testbed.oversubscribed"], "true");
    }
    fs::remove(db_);
    const auto included = sweep(body + "validate_oversubscribed = true\n" + steps);
    ASSERT_EQ(included.exit_code, 0) << included.err;
    prophet::Store store = prophet::Store::open(db_);
    const std::string id = nlohmann::json::parse(included.out)["run_ids"][0];
    EXPECT_EQ(store.get_metrics(id, "sim_error").size(), 1u) << included.err;
}
