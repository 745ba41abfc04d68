// test_careless_user_cli.cpp: what a careless user types, and what prophet must answer (issue 26 items 10 and
// 12 to 15, and its "also seen" line): fix hints that name a command that works, no silent defaults for empty or
// zero values, defaults that do not depend on the working directory, read-only status commands, a store missing
// a table, and the cheap checks before the expensive work.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "core/error.h"

namespace fs = std::filesystem;
using prophet::testing::CliResult;

namespace {

class CarelessUser : public prophet::testing::TempDirTest {
  protected:
    CliResult prophet(const std::string& args) { return prophet::testing::run_prophet("", args, dir_); }

    // experiments/clusters/moetuner-h100-ep4.toml (D = 4) with `key = value` replaced; its path
    std::string cluster_with(const std::string& key, const std::string& value) {
        std::ifstream in(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/moetuner-h100-ep4.toml");
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        text = std::regex_replace(text, std::regex("\n" + key + " = [^\n]*"), "\n" + key + " = " + value);
        const std::string path = (dir_ / ("cluster-" + key + ".toml")).string();
        std::ofstream(path) << text;
        return path;
    }
    CliResult plan(const std::string& cluster, const std::string& extra = "") {
        return prophet("plan --trace experiments/traces/tiny-e4-d4.toml --cluster '" + cluster +
                       "' --set store.path='" + db_ + "' --set plan.repeats=1 " + extra);
    }
};

// Item 10: a bad value in a cluster file gets a fix in the file's own syntax (--set cluster.* is refused as an
// unknown key), showing a value the rule allows.
TEST_F(CarelessUser, ClusterValueFixNamesTheFileNotSet) {
    const CliResult r = plan(cluster_with("trans_gbit_s", "0.0"));
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.err;
    EXPECT_NE(r.err.find("cluster.trans_gbit_s"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("--set cluster."), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("write e.g. trans_gbit_s = 1.0 under [cluster] in "), std::string::npos) << r.err;
}

// Item 10: 0 Gbit/s for a key whose -1 means "the default" is an error, never that default. Rows: the key.
TEST_F(CarelessUser, ZeroBandwidthIsAnErrorNotTheDefault) {
    for (const char* key : {"agg_gbit_s", "intra_node_gbit_s", "inter_node_gbit_s"}) {
        const CliResult r = plan(cluster_with(key, "0.0"));
        EXPECT_EQ(r.exit_code, prophet::kExitConfig) << key << ": " << r.err;
        EXPECT_NE(r.err.find(std::string("cluster.") + key), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("must be > 0 Gbit/s, or -1 for"), std::string::npos) << r.err;
    }
    EXPECT_EQ(plan(cluster_with("inter_node_gbit_s", "-1")).exit_code, 0) << "-1 stays the default";
}

// Item 12: the default balance.cluster is built in: train runs from any directory with an absolute --config, and
// a cluster file that cannot be read is named by its key.
TEST_F(CarelessUser, TrainFromAnotherDirectoryUsesTheBuiltInCluster) {
    const auto train = [&](const std::string& extra) {  // from dir_, not the repository root
        return prophet::testing::run_command(
            "sh -c \"cd '" + dir_.string() + "' && '" + PROPHET_BINARY + "' train --config '" + PROPHET_SOURCE_DIR +
                "/experiments/train/skewed-4rank.toml' --set train.steps=2 --set store.path='" + db_ + "' " + extra +
                "\"",
            dir_);
    };
    const CliResult ok = train("");
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    const CliResult missing = train("--set balance.cluster=nowhere.toml");
    EXPECT_EQ(missing.exit_code, prophet::kExitConfig) << missing.err;
    EXPECT_NE(missing.err.find("balance.cluster"), std::string::npos) << missing.err;
    EXPECT_NE(missing.err.find("nowhere.toml"), std::string::npos) << missing.err;
}

// Item 13: five messages. Rows: the arguments, the exit code, what the message must say.
TEST_F(CarelessUser, CliMessagesSayWhatIsWrong) {
    struct Case {
        std::string args;
        int exit_code;
        std::string needle;
    };
    const std::string sweep = "sweep experiments/sweeps/smoke.toml --no-report --set store.path='" + db_ + "' ";
    const Case cases[] = {
        {"trace convert experiments/traces/tiny-e4-d4.toml -o '" + dir_.string() + "'", prophet::kExitUsage,
         "is a directory"},
        {"db check --db '" + db_ + "' --stale-after abc", prophet::kExitUsage, "'abc' is not a number"},
        {sweep + "--max-points -1", prophet::kExitUsage, "-1 is negative"},
        {"sweep experiments/sweeps/smoke.toml --no-report --set store.path=", prophet::kExitConfig, "store.path"},
    };
    for (const Case& c : cases) {
        const CliResult r = prophet(c.args);
        EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_EQ(r.err.find(": Success"), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_EQ(r.err.find("1.79"), std::string::npos) << c.args << "\n" << r.err;
    }
}

// Item 13: --policy takes a list, as users type it.
TEST_F(CarelessUser, PolicyListRunsEachPolicy) {
    const CliResult r = plan(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/moetuner-h100-ep4.toml",
                             "--policy static,prophet --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"name\": \"static\""), std::string::npos) << r.out.substr(0, 2000);
    EXPECT_NE(r.out.find("\"name\": \"prophet\""), std::string::npos) << r.out.substr(0, 2000);
    EXPECT_EQ(r.out.find("\"name\": \"eplb\""), std::string::npos) << "only the listed ones";
    const CliResult bad = plan(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/moetuner-h100-ep4.toml",
                               "--policy static,nosuch");
    EXPECT_EQ(bad.exit_code, prophet::kExitConfig) << bad.err;
    EXPECT_NE(bad.err.find("nosuch"), std::string::npos) << bad.err;
}

// Item 14: `sweep --status` reads; an empty .db it finds (the store, a shard) stays empty.
TEST_F(CarelessUser, SweepStatusWritesNoSchemaIntoAnEmptyStore) {
    fs::create_directories(db_ + ".shards");
    std::ofstream(db_).flush();
    std::ofstream(db_ + ".shards/empty.db").flush();
    const CliResult r = prophet("sweep experiments/sweeps/smoke.toml --status --set store.path='" + db_ + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(fs::file_size(db_), 0u);
    EXPECT_EQ(fs::file_size(db_ + ".shards/empty.db"), 0u);
}

// Item 15: a dropped table (or index) fails `db check` with exit 5 naming it.
TEST_F(CarelessUser, DbCheckFailsOnADroppedTable) {
    ASSERT_EQ(plan(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/moetuner-h100-ep4.toml", "--policy static")
                  .exit_code,
              0);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE events", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    const CliResult r = prophet("db check --db '" + db_ + "'");
    EXPECT_EQ(r.exit_code, prophet::kExitDatabase) << r.out << r.err;
    EXPECT_NE(r.err.find("table events"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("index events_by_run"), std::string::npos) << r.err;
}

// Also seen: a cluster of another device count fails before a trace is generated. Drawing 2^18 tokens x top-8 x
// 61 layers x 20 iterations (2.6e9 draws, within the generator's bounds) takes minutes; the answer comes in seconds.
TEST_F(CarelessUser, PlanChecksTheDeviceCountBeforeGeneratingTheTrace) {
    const std::string trace = (dir_ / "huge.toml").string();
    std::ofstream(trace) << "[trace]\ngenerator = \"zipf\"\nseed = 1\nnum_experts = 256\nnum_devices = 64\n"
                            "top_k = 8\ntokens_per_iteration = 262144\nnum_iterations = 20\nnum_layers = 61\n"
                            "zipf_s = 1.2\n";
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult r = prophet::testing::run_command(
        "'" + std::string(PROPHET_BINARY) + "' plan --trace '" + trace +
            "' --cluster experiments/clusters/moetuner-h100-ep4.toml --set store.path='" + db_ + "'",
        dir_, 60);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.err;
    EXPECT_NE(r.err.find("the trace has D = 64 devices but the cluster"), std::string::npos) << r.err;
    EXPECT_LT(took, 30.0) << r.err;
}

// Item 17: two runs writing one checkpoint directory: the second fails with exit 4 before its first step, naming
// the directory; the first is not disturbed.
TEST_F(CarelessUser, SecondRunWritingACheckpointDirectoryFailsWithExitFour) {
    const std::string ckpt = (dir_ / "ckpt").string();
    const std::string train =
        "'" + std::string(PROPHET_BINARY) +
        "' train --config experiments/train/skewed-4rank.toml --save --set train.checkpoint_dir='" + ckpt +
        "' --set train.record_loads=false ";
    const pid_t first = fork();
    ASSERT_GE(first, 0);
    if (first == 0) {
        const std::string command = "cd '" + std::string(PROPHET_SOURCE_DIR) + "' && exec " + train +
                                    "--set train.steps=100000 --set store.path='" + db_ + "' >/dev/null 2>&1";
        execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (!fs::exists(ckpt + "/.lock") && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const CliResult second = prophet::testing::run_command(
        train + "--set train.steps=2 --set store.path='" + (dir_ / "second.db").string() + "'", dir_);
    kill(first, SIGTERM);
    int status = 0;
    waitpid(first, &status, 0);
    EXPECT_EQ(second.exit_code, prophet::kExitResource) << second.err;
    EXPECT_NE(second.err.find("checkpoint directory " + ckpt + " is in use"), std::string::npos) << second.err;
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << "the first run ran on until stopped";
}

}  // namespace
