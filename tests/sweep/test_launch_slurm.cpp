// The Slurm launcher's pieces that need no Slurm (lib/sweep/launch_slurm.h): [sweep.slurm] parsing and its
// errors, the batch script (resources, array, chunks, one shard per task), and which points count as done from
// the store and the shards together. The end-to-end run through a real Slurm: tests/cluster/slurm_sweep_test.sh.
#include "sweep/launch_slurm.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "sweep/sweep.h"

namespace fs = std::filesystem;
using namespace prophet;
using namespace prophet::sweep;

namespace {

class LaunchSlurm : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        fs::current_path(PROPHET_SOURCE_DIR);
        TempDirTest::SetUp();
    }
    // a 4-point model sweep (2 clusters x 2 policies) with the given [sweep.slurm] body
    std::string write(const std::string& slurm) {
        const std::string path = (dir_ / "sweep.toml").string();
        std::ofstream(path) << "[sweep]\nname = \"s\"\nengine = \"model\"\n"
                               "clusters = [\"experiments/clusters/hpwnv-16.toml\", "
                               "\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
                               "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\n"
                               "policies = [\"static\", \"prophet\"]\nseeds = [1]\n[sweep.slurm]\n"
                            << slurm;
        return path;
    }
};

std::string slurm_error(const std::string& path) {
    try {
        parse_slurm_spec(path);
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
}

}  // namespace

TEST_F(LaunchSlurm, ScriptCarriesResourcesArrayAndOneShardPerTask) {
    const std::string file = write(
        "nodes = 2\ntasks_per_node = 3\ntime = \"00:10:00\"\npartition = \"cpu\"\naccount = \"proj\"\n"
        "points_per_task = 2\nmax_parallel = 1\n");
    const SweepSpec spec = parse_sweep_file(file);  // [sweep.slurm] is a known key
    const SlurmSpec slurm = parse_slurm_spec(file);
    const BatchJob job = make_batch_job(spec, slurm, expand_points(spec), {1, 2, 4}, file, "/opt/prophet", "/work",
                                        "/shared/shards");
    ASSERT_EQ(job.tasks.size(), 2u);
    EXPECT_EQ(job.tasks[0], (std::vector<int>{1, 2}));
    EXPECT_EQ(job.tasks[1], (std::vector<int>{4}));
    for (const char* line :
         {"#SBATCH --job-name=prophet-s\n", "#SBATCH --array=0-1%1\n", "#SBATCH --nodes=2\n",
          "#SBATCH --ntasks-per-node=3\n", "#SBATCH --time=00:10:00\n", "#SBATCH --partition=cpu\n",
          "#SBATCH --account=proj\n", "#SBATCH --chdir=/work\n", "#SBATCH --output=/shared/shards/slurm-%A_%a.out\n",
          "POINTS=( 1,2 4 )\n", "shard='/shared/shards'/shard-\"${points%%,*}\".db\n",
          "--points \"$points\" --no-report --set store.path=\"$shard\"\n"})
        EXPECT_NE(job.script.find(line), std::string::npos) << line << "\nin\n" << job.script;
}

TEST_F(LaunchSlurm, DefaultsAndBadKeys) {
    const SlurmSpec d = parse_slurm_spec(write(""));
    EXPECT_EQ(d.nodes, 1);
    EXPECT_EQ(d.points_per_task, 1);
    EXPECT_EQ(shard_directory(d, "/r/x.db"), "/r/x.db.shards");
    EXPECT_NE(slurm_error(write("gpus = 2\n")).find("sweep.slurm.gpus"), std::string::npos);
    EXPECT_NE(slurm_error(write("nodes = 0\n")).find("sweep.slurm.nodes"), std::string::npos);
    EXPECT_NE(slurm_error(write("partition = \"a b\"\n")).find("sweep.slurm.partition"), std::string::npos);
    // a point larger than the allocation
    const std::string file = write("tasks_per_node = 1\n");
    const SweepSpec spec = parse_sweep_file(file);
    std::vector<SweepPoint> points = expand_points(spec);
    points[0].ranks = 4;
    try {
        make_batch_job(spec, parse_slurm_spec(file), points, {1}, file, "/p", "/w", "/s");
        FAIL() << "a 4-rank point fit 1 task";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("sweep.slurm.tasks_per_node"), std::string::npos) << e.what();
    }
}

TEST_F(LaunchSlurm, ProgressReadsTheStoreAndEveryShard) {
    const std::string file = write("");
    const SweepSpec spec = parse_sweep_file(file);
    const std::vector<SweepPoint> points = expand_points(spec);
    const std::string shards = (dir_ / "shards").string();
    fs::create_directories(shards);
    // point 4 into the store, points 1 (fails: 16-device cluster, 4-device trace) and 3 into two shards
    auto run = [&](const std::string& store, std::vector<int> only) {
        SweepOptions o;
        o.store_path = store;
        o.only_points = std::move(only);
        return run_sweep(spec, o);
    };
    EXPECT_EQ(run(db_, {4}).ran, 1);
    EXPECT_EQ(run(shards + "/shard-1.db", {1}).failed, 1);
    const SweepSummary third = run(shards + "/shard-3.db", {3});
    EXPECT_EQ(third.ran, 1);
    EXPECT_EQ(third.points, 4);
    const SweepProgress p = read_progress(spec, points, db_, shards);
    EXPECT_EQ(p.shards.size(), 2u);
    EXPECT_EQ(p.state.at(1), "failed");
    EXPECT_EQ(p.state.at(2), "missing");
    EXPECT_EQ(p.state.at(3), "finished");
    EXPECT_EQ(p.state.at(4), "finished");
    EXPECT_EQ(p.finished, 2);
    EXPECT_EQ(p.failed, 1);
    EXPECT_EQ(p.missing, 1);
}
