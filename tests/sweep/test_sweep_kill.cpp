// test_sweep_kill.cpp: a `prophet sweep` child killed with SIGKILL mid-way and started again finishes every point
// exactly once, and the store passes PRAGMA integrity_check. Each point is recorded in one transaction, so a kill
// loses at most the point in flight; the restart skips every finished point by its config hash (docs/sweep.md).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "sweep/sweep.h"
#include "sweep_child.h"

namespace fs = std::filesystem;
using namespace prophet;
using prophet::testing::read_file;
using prophet::testing::spawn_sweep;

namespace {

// 3 policies x 8 seeds on the 16-device MoE-GPT-S trace: about 0.1 s per point on the development machines, so a
// kill after a few points lands mid-way.
const char* kSweep =
    "[sweep]\nname = \"kill\"\nengine = \"sim\"\n"
    "clusters = [\"experiments/clusters/hpwnv-16.toml\"]\n"
    "traces = [\"experiments/sweeps/paper-e16-k1-s.toml\"]\n"
    "policies = [\"static\", \"fastermoe\", \"prophet\"]\nseeds = [1, 2, 3, 4, 5, 6, 7, 8]\n";
constexpr int kPoints = 3 * 8;

int finished_runs(const std::string& db) {
    return prophet::testing::count_rows(db, "SELECT count(*) FROM runs WHERE status = 'finished'");
}

}  // namespace

TEST(SweepKill, RestartAfterAKillRunsEveryPointOnce) {
    fs::current_path(PROPHET_SOURCE_DIR);
    const fs::path dir = fs::temp_directory_path() / ("prophet-sweep-kill-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string file = (dir / "kill.toml").string(), db = (dir / "store.db").string();
    std::ofstream(file) << kSweep;

    // first invocation: SIGKILL once at least 3 points are finished
    const pid_t pid = spawn_sweep(file, db, (dir / "first.log").string());
    ASSERT_GT(pid, 0);
    int seen = -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
        seen = finished_runs(db);
        if (seen >= 3) break;
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0) << "the sweep exited before the kill: "
                                                     << read_file((dir / "first.log.err").string());
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    const int at_kill = finished_runs(db);
    ASSERT_GE(at_kill, 3);
    ASSERT_LT(at_kill, kPoints) << "the kill came after the last point: make the points slower";

    // second invocation: runs to the end and skips exactly the points the first one finished
    const pid_t again = spawn_sweep(file, db, (dir / "second.log").string());
    ASSERT_GT(again, 0);
    ASSERT_EQ(waitpid(again, &status, 0), again);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file((dir / "second.log.err").string());
    const std::string out = read_file((dir / "second.log").string());
    EXPECT_NE(out.find("\"already_done\": " + std::to_string(at_kill) + ","), std::string::npos) << out;
    EXPECT_NE(out.find("\"ran\": " + std::to_string(kPoints - at_kill) + ","), std::string::npos) << out;

    // every point exactly once, all finished, and the file intact
    Store store = Store::open(db);
    EXPECT_EQ(store.integrity_check(false), "ok");
    const auto runs = store.list_runs("kill");
    EXPECT_EQ(static_cast<int>(runs.size()), kPoints);
    std::map<std::string, int> per_hash;
    for (const RunRow& r : runs) {
        EXPECT_EQ(r.status, "finished") << r.run_id;
        ++per_hash[r.info.config_hash];
    }
    const auto points = sweep::expand_points(sweep::parse_sweep_file(file));
    ASSERT_EQ(static_cast<int>(points.size()), kPoints);
    for (const sweep::SweepPoint& p : points) EXPECT_EQ(per_hash[p.hash], 1) << p.description;
    EXPECT_EQ(static_cast<int>(per_hash.size()), kPoints);
    fs::remove_all(dir);
}
