// test_sweep_real_kill.cpp: the children of a real-engine sweep (prophet train, one rank, a tiny model) end with
// their sweep: after kill -9 of the sweep mid-point the child gets SIGTERM (PR_SET_PDEATHSIG) and records its run
// `killed`, and a re-run runs every point exactly once with no row left `running`; a SIGTERM to the sweep is
// forwarded to the child's process group; a point past the sweep's time_limit_s is stopped and recorded failed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../temp_dir_test.h"
#include "store/store.h"
#include "sweep/sweep.h"
#include "sweep_child.h"

using namespace prophet;
using namespace std::chrono_literals;
using prophet::testing::count_rows;
using prophet::testing::read_file;

namespace {

class SweepRealKill : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        std::filesystem::current_path(PROPHET_SOURCE_DIR);
        TempDirTest::SetUp();
    }
    // A real sweep of skewed-4rank on one rank (no mpirun); `extra` goes under [sweep] before [sweep.set].
    std::string write_sweep(int steps, const std::string& extra = "") {
        const std::string file = (dir_ / "real.toml").string();
        std::ofstream(file) << "[sweep]\nname = \"realkill\"\nengine = \"real\"\n"
                               "train_config = \"experiments/train/skewed-4rank.toml\"\nranks = [1]\n"
                               "policies = [\"static\", \"prophet\"]\nseeds = [1]\n"
                            << extra << "[sweep.set]\n\"train.steps\" = " << steps << "\n";
        return file;
    }
    int rows(const std::string& where) {
        return count_rows(db_, ("SELECT count(*) FROM runs WHERE " + where).c_str());
    }
    // Waits (bounded) until a prophet train child of the sweep has begun its run and recorded a step.
    bool wait_for_child_step(pid_t sweep, const std::string& log) {
        const auto deadline = std::chrono::steady_clock::now() + 120s;
        while (std::chrono::steady_clock::now() < deadline) {
            if (count_rows(db_, "SELECT count(*) FROM metrics m JOIN runs r ON r.run_id = m.run_id "
                                "WHERE r.command = 'train' AND r.status = 'running' AND m.key = 'step_ms'") > 0)
                return true;
            int status = 0;
            if (waitpid(sweep, &status, WNOHANG) == sweep) {
                ADD_FAILURE() << "the sweep ended before its child ran a step: " << read_file(log + ".err");
                return false;
            }
            std::this_thread::sleep_for(10ms);
        }
        ADD_FAILURE() << "no child step within 120 s";
        return false;
    }
};

}  // namespace

TEST_F(SweepRealKill, KillNineMidPointThenRerunRunsEveryPointOnce) {
    // 150 steps of a few ms to tens of ms each: the kill lands inside the first point
    const std::string file = write_sweep(150);
    const std::string log = (dir_ / "first.log").string();
    const pid_t pid = prophet::testing::spawn_sweep(file, db_, log);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_for_child_step(pid, log));
    const std::vector<pid_t> children = prophet::testing::children_of(pid);
    ASSERT_FALSE(children.empty());
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    // the orphaned child ends on its own, soon (before the fix it ran on until a write to the dead pipe)
    for (pid_t child : children) EXPECT_TRUE(prophet::testing::wait_gone(child, 60s)) << "child " << child;
    EXPECT_EQ(rows("status = 'running'"), 0) << "a child's run was left running";
    EXPECT_EQ(rows("command = 'train' AND status = 'killed'"), 1);

    const std::string log2 = (dir_ / "second.log").string();
    const pid_t again = prophet::testing::spawn_sweep(file, db_, log2);
    ASSERT_GT(again, 0);
    status = prophet::testing::wait_bounded(again, 300s);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << read_file(log2 + ".err");

    Store store = Store::open(db_);
    std::map<std::string, int> per_hash;
    for (const RunRow& r : store.list_runs("realkill")) {
        EXPECT_NE(r.status, "running") << r.run_id << " " << r.info.command;
        if (r.info.command == "sweep" && r.status == "finished") ++per_hash[r.info.config_hash];
    }
    const auto points = sweep::expand_points(sweep::parse_sweep_file(file));
    ASSERT_EQ(points.size(), 2u);
    for (const sweep::SweepPoint& p : points) EXPECT_EQ(per_hash[p.hash], 1) << p.description;
    EXPECT_EQ(rows("command = 'train' AND status = 'finished'"), 2);
    EXPECT_EQ(store.integrity_check(false), "ok");
}

TEST_F(SweepRealKill, SigtermToTheSweepIsRecordedWithTheChildStopped) {
    const std::string file = write_sweep(100000);  // would run for an hour: only the signal ends it
    const std::string log = (dir_ / "term.log").string();
    const pid_t pid = prophet::testing::spawn_sweep(file, db_, log);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_for_child_step(pid, log));
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    const int status = prophet::testing::wait_bounded(pid, 60s);
    ASSERT_TRUE(WIFEXITED(status)) << "status " << status << ": the sweep did not end within 60 s of SIGTERM";
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << read_file(log + ".err");
    EXPECT_EQ(rows("status = 'running'"), 0);
    EXPECT_EQ(rows("command = 'train' AND status = 'killed'"), 1);
    EXPECT_EQ(rows("command = 'sweep' AND status = 'killed'"), 1);
    EXPECT_EQ(rows("command = 'sweep'"), 1) << "the sweep went on to the next point";
}

TEST_F(SweepRealKill, PointPastTheTimeLimitIsRecordedFailed) {
    const std::string file = write_sweep(100000, "time_limit_s = 3\n");
    const std::string log = (dir_ / "limit.log").string();
    const pid_t pid = prophet::testing::spawn_sweep(file, db_, log);
    ASSERT_GT(pid, 0);
    const int status = prophet::testing::wait_bounded(pid, 180s);
    ASSERT_TRUE(WIFEXITED(status)) << "status " << status << ": the sweep did not end within 180 s";
    EXPECT_EQ(WEXITSTATUS(status), 1) << read_file(log + ".err");  // kExitRunFailed: a point failed
    Store store = Store::open(db_);
    int sweep_rows = 0;
    for (const RunRow& r : store.list_runs("realkill")) {
        EXPECT_NE(r.status, "running") << r.run_id;
        if (r.info.command != "sweep") continue;
        ++sweep_rows;
        EXPECT_EQ(r.status, "failed");
        EXPECT_EQ(r.exit_code.value_or(-1), 124);
        EXPECT_NE(r.error.find("time_limit_s = 3"), std::string::npos) << r.error;
    }
    EXPECT_EQ(sweep_rows, 2);
    // every child that had begun its run recorded it killed (a child still starting up when the SIGTERM came, on a
    // loaded machine, has no run to record)
    EXPECT_GE(rows("command = 'train'"), 1);
    EXPECT_EQ(rows("command = 'train' AND status = 'killed'"), rows("command = 'train'"));
}
