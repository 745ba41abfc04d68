// test_sweep_identity.cpp: a point's identity covers the content of its input files and the prophet version (a
// resumed sweep reruns the points whose cluster or trace file changed), and the values a real point passes to its
// child with --set reach it with their TOML type (a sweep named 2024 records the experiment "2024").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../temp_dir_test.h"
#include "core/config.h"
#include "store/store.h"
#include "core/testbed.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"
#include "train/train_config.h"

namespace fs = std::filesystem;
using namespace prophet;
using namespace prophet::sweep;

namespace {

class SweepIdentity : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        fs::current_path(PROPHET_SOURCE_DIR);
        TempDirTest::SetUp();
        cluster_ = (dir_ / "cluster.toml").string();
        trace_ = (dir_ / "trace.toml").string();
        fs::copy_file("experiments/clusters/moetuner-h100-ep4.toml", cluster_);
        fs::copy_file("experiments/traces/tiny-e4-d4.toml", trace_);
    }
    SweepSpec spec() const {
        return parse_sweep_string("[sweep]\nname = \"id\"\nengine = \"model\"\nclusters = [\"" + cluster_ +
                                      "\"]\ntraces = [\"" + trace_ + "\"]\npolicies = [\"static\"]\nseeds = [1]\n",
                                  "id.toml");
    }
    SweepSummary run() const {
        SweepOptions o;
        o.store_path = db_;
        return run_sweep(spec(), o);
    }
    // Replaces the text `from` of the file at `path` with `to` (appending a key would make a duplicate)
    static void replace_line(const std::string& path, const std::string& from, const std::string& to) {
        std::ifstream in(path);
        std::string text((std::istreambuf_iterator<char>(in)), {});
        const size_t at = text.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        text.replace(at, from.size(), to);
        std::ofstream(path) << text;
    }
    std::string cluster_, trace_;
};

}  // namespace

TEST_F(SweepIdentity, ChangedClusterFileRerunsThePoint) {
    EXPECT_EQ(run().ran, 1);
    EXPECT_EQ(run().skipped, 1);  // unchanged: resumed, nothing to run
    replace_line(cluster_, "compute_tflop_s = 1200.0", "compute_tflop_s = 300.0");
    const SweepSummary after = run();
    EXPECT_EQ(after.ran, 1) << "the cluster file changed, the stored result is stale";
    EXPECT_EQ(after.skipped, 0);
    // the two runs measured different clusters, so their times differ
    Store store = Store::open(db_);
    const auto runs = store.list_runs("id");
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_NE(store.get_metrics(runs[0].run_id, "time_ms").at(0).value,
              store.get_metrics(runs[1].run_id, "time_ms").at(0).value);
}

TEST_F(SweepIdentity, ChangedTraceFileRerunsThePoint) {
    EXPECT_EQ(run().ran, 1);
    replace_line(trace_, "zipf_s = 1.2", "zipf_s = 0.4");
    EXPECT_EQ(run().ran, 1) << "the trace generator file changed, the stored result is stale";
}

TEST_F(SweepIdentity, PointIdentityNamesFileHashesWithTheVersion) {
    const std::vector<SweepPoint> points = expand_points(spec());
    ASSERT_EQ(points.size(), 1u);
    const std::string& c = points[0].canonical;
    EXPECT_NE(c.find("point.cluster_sha256=\"" + detail::file_sha256(cluster_) + "\"\n"), std::string::npos) << c;
    EXPECT_NE(c.find("point.trace_sha256=\"" + detail::file_sha256(trace_) + "\"\n"), std::string::npos) << c;
    EXPECT_NE(c.find("point.prophet_version=\""), std::string::npos) << c;
}

// Every --set of a real point's command line, applied as prophet train applies it.
Config child_config(const std::string& name, const std::string& store_path) {
    const SweepSpec spec = parse_sweep_string("[sweep]\nname = " + name +
                                                  "\nengine = \"real\"\n"
                                                  "train_config = \"experiments/train/skewed-4rank.toml\"\n"
                                                  "policies = [\"prophet\"]\nseeds = [3]\n",
                                              "real.toml");
    SweepOptions options;
    options.store_path = store_path;
    options.prophet_binary = "prophet";
    const std::vector<std::string> cmd = detail::child_command(spec, expand_points(spec).at(0), options);
    Config config(train_schema(), "the child's --set");
    for (size_t i = 0; i + 1 < cmd.size(); ++i)
        if (cmd[i] == "--set") config.apply_set(cmd[i + 1]);  // throws on a value of the wrong type
    return config;
}

TEST(SweepQuoting, QuotedValuesReachTheChildAsStrings) {
    EXPECT_EQ(child_config("\"2024\"", "/tmp/s.db").get_string("run.experiment"), "2024");
    EXPECT_EQ(child_config("\"true\"", "/tmp/s.db").get_string("run.experiment"), "true");
    EXPECT_EQ(child_config("\"1e3\"", "/tmp/s.db").get_string("run.experiment"), "1e3");
    EXPECT_EQ(child_config("'say \"hi\" \\ 2'", "/tmp/s.db").get_string("run.experiment"), "say \"hi\" \\ 2");
    EXPECT_EQ(child_config("\"x\"", "/tmp/2024").get_string("store.path"), "/tmp/2024");
    EXPECT_EQ(child_config("\"x\"", "/tmp/a \"b\".db").get_string("store.path"), "/tmp/a \"b\".db");
    const Config c = child_config("\"x\"", "/tmp/s.db");
    EXPECT_EQ(c.get_string("balance.policy"), "prophet");
    EXPECT_EQ(c.get_int("run.seed"), 3);
}

// A point of several ranks starts under the testbed's launcher (core/testbed.h): pinned one rank per core when the
// machine has enough, one BLAS thread per rank; a point of one rank runs prophet directly.
TEST(SweepLauncher, PointsOfSeveralRanksRunPinnedUnderMpirun) {
    const SweepSpec spec = parse_sweep_string("[sweep]\nname = \"l\"\nengine = \"real\"\n"
                                              "train_config = \"experiments/train/skewed-4rank.toml\"\n"
                                              "policies = [\"static\"]\nseeds = [1]\nranks = [1, 2]\n",
                                              "real.toml");
    SweepOptions options;
    options.store_path = "/tmp/s.db";
    options.prophet_binary = "prophet";
    const std::vector<SweepPoint> points = expand_points(spec);
    ASSERT_EQ(points.size(), 2u);
    for (const SweepPoint& p : points) {
        const std::vector<std::string> cmd = detail::child_command(spec, p, options);
        const std::vector<std::string> launcher = mpirun_launcher(p.ranks, usable_cores());
        ASSERT_GE(cmd.size(), launcher.size());
        EXPECT_EQ(std::vector<std::string>(cmd.begin(), cmd.begin() + (long)launcher.size()), launcher);
        EXPECT_EQ(cmd[launcher.size()], "prophet");
        if (p.ranks == 1) {
            EXPECT_TRUE(launcher.empty());
        }
    }
}
