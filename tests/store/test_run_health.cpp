// test_run_health.cpp: lost runs: the judgement of a `running` run, the reaper with real dead and live processes,
// --resume links, and the migration of a schema-1 store (lib/store/run_health.h, lib/store/schema.cpp).
#include "store/run_health.h"
#include "store/run_lock.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "store/schema.h"
#include "store/store.h"

namespace prophet {
namespace {

using testing::TempDirTest;

RunInfo info_of(const std::string& experiment) {
    RunInfo info;
    info.experiment = experiment;
    info.command = "train";
    info.config_toml = "[train]\nsteps = 3\n";
    info.config_hash = "hash";
    return info;
}

RunRow running_row(const std::string& host, std::optional<int64_t> pid, int64_t heartbeat_ms) {
    RunRow row;
    row.run_id = "0123456789abcdef";
    row.status = "running";
    row.started_ms = heartbeat_ms - 5000;
    row.heartbeat_ms = heartbeat_ms;
    row.host = host;
    row.pid = pid;
    return row;
}

// Whether a pid is gone, as the tests decide it.
const auto kGone = [](int64_t) { return true; };
const auto kLives = [](int64_t) { return false; };

TEST(JudgeRunningRun, ProcessAliveOnThisHostIsNeverLostHoweverStale) {
    const RunRow row = running_row("here", 42, 1000);
    const RunVerdict v = judge_running_run(row, 1000 + 86400000, 0, "here", kLives);
    EXPECT_EQ(v.liveness, RunLiveness::kAlive) << v.reason;
    EXPECT_NE(v.reason.find("pid 42"), std::string::npos) << v.reason;
}

TEST(JudgeRunningRun, ProcessGoneFromThisHostIsLostEvenWithAFreshHeartbeat) {
    const RunRow row = running_row("here", 42, 1000);
    const RunVerdict v = judge_running_run(row, 1500, 900000, "here", kGone);
    EXPECT_EQ(v.liveness, RunLiveness::kLost) << v.reason;
    EXPECT_EQ(v.silent_ms, 500);
}

TEST(JudgeRunningRun, AnotherHostIsJudgedByTheHeartbeatOnly) {
    const RunRow row = running_row("elsewhere", 42, 1000);
    // the pid is not probed for another host: a "gone" answer must not matter
    EXPECT_EQ(judge_running_run(row, 1000 + 60000, 60000, "here", kGone).liveness, RunLiveness::kFresh);
    EXPECT_EQ(judge_running_run(row, 1000 + 60001, 60000, "here", kLives).liveness, RunLiveness::kLost);
}

TEST(JudgeRunningRun, NoRecordedProcessIsJudgedByTheHeartbeat) {
    const RunRow row = running_row("", std::nullopt, 1000);  // a schema-1 row
    EXPECT_EQ(judge_running_run(row, 2000, 5000, "here", kGone).liveness, RunLiveness::kFresh);
    EXPECT_EQ(judge_running_run(row, 7000, 5000, "here", kGone).liveness, RunLiveness::kLost);
}

TEST(ProcessGone, ThisProcessLivesAReapedChildIsGoneAZombieIsGone) {
    EXPECT_FALSE(process_gone(getpid()));
    const pid_t zombie = fork();
    if (zombie == 0) _exit(0);
    ASSERT_GT(zombie, 0);
    // not yet waited for: a zombie, which no longer runs anything
    for (int i = 0; i < 200 && !process_gone(zombie); ++i) usleep(10000);
    EXPECT_TRUE(process_gone(zombie));
    int status = 0;
    ASSERT_EQ(waitpid(zombie, &status, 0), zombie);
    EXPECT_TRUE(process_gone(zombie));
    EXPECT_FALSE(process_gone(0));  // never a recorded pid: not "gone"
}

class RunHealthTest : public TempDirTest {
  protected:
    // A run begun by a child process that then exits without finishing it, as a SIGKILLed rank 0 leaves it.
    std::string run_of_dead_process() {
        const pid_t child = fork();
        if (child == 0) {
            try {
                Store store = Store::open(db_);
                const std::string id = store.begin_run(info_of("dead"));
                FILE* out = std::fopen((dir_ / "dead_id").c_str(), "w");
                std::fputs(id.c_str(), out);
                std::fclose(out);
            } catch (...) {
                _exit(1);
            }
            _exit(0);
        }
        int status = 0;
        EXPECT_EQ(waitpid(child, &status, 0), child);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        char id[32] = {0};
        FILE* in = std::fopen((dir_ / "dead_id").c_str(), "r");
        EXPECT_NE(in, nullptr);
        if (in) {
            EXPECT_NE(std::fgets(id, sizeof id, in), nullptr);
            std::fclose(in);
        }
        return id;
    }
};

TEST_F(RunHealthTest, BeginRunRecordsThisHostAndPid) {
    Store store = Store::open(db_);
    const RunRow row = store.get_run(store.begin_run(info_of("e")));
    EXPECT_EQ(row.host, current_host());
    ASSERT_TRUE(row.pid.has_value());
    EXPECT_EQ(*row.pid, getpid());
}

TEST_F(RunHealthTest, ReaperMarksTheDeadProcessRunLostAndLeavesTheLiveOneRunning) {
    const std::string dead = run_of_dead_process();
    ASSERT_EQ(dead.size(), 16u);
    Store store = Store::open(db_);
    const std::string live = store.begin_run(info_of("live"));
    const std::string done = store.begin_run(info_of("done"));
    store.finish_run(done, "finished", 0, "");
    const int64_t heartbeat = *store.get_run(dead).heartbeat_ms;

    // a stale-after of 0: every run that cannot prove it lives would go; ours proves it by its pid
    const StoreHealth before = check_store(store, 0);
    EXPECT_FALSE(before.ok());
    ASSERT_EQ(before.running.size(), 2u);

    const std::vector<RunVerdict> reaped = reap_lost_runs(store, 0);
    ASSERT_EQ(reaped.size(), 1u);
    EXPECT_EQ(reaped[0].run.run_id, dead);
    const RunRow lost = store.get_run(dead);
    EXPECT_EQ(lost.status, "lost");
    ASSERT_TRUE(lost.ended_ms.has_value());
    EXPECT_EQ(*lost.ended_ms, heartbeat);  // the time of the last sign of life, not of the reaping
    EXPECT_NE(lost.error.find("is gone"), std::string::npos) << lost.error;
    const std::vector<EventRow> events = store.get_events(dead);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, "lost");
    EXPECT_EQ(store.get_run(live).status, "running");
    EXPECT_EQ(store.get_run(done).status, "finished");

    // idempotent: a second pass finds nothing, and the store is healthy now
    EXPECT_TRUE(reap_lost_runs(store, 0).empty());
    const StoreHealth after = check_store(store, 0);
    EXPECT_TRUE(after.ok());
    EXPECT_EQ(after.integrity, "ok");
    EXPECT_EQ(after.schema_version, kStoreSchemaVersion);
}

TEST_F(RunHealthTest, MarkLostNeverOverwritesARunThatEnded) {
    Store store = Store::open(db_);
    const std::string id = store.begin_run(info_of("e"));
    store.finish_run(id, "finished", 0, "");
    EXPECT_FALSE(store.mark_lost(id, "lost: test"));
    EXPECT_EQ(store.get_run(id).status, "finished");
    EXPECT_TRUE(store.get_events(id).empty());
}

TEST_F(RunHealthTest, ReapAtStartOfASweepLogsEachLostRun) {
    const std::string dead = run_of_dead_process();
    std::vector<std::string> lines;
    EXPECT_EQ(reap_lost_runs_at(db_, [&](const std::string& line) { lines.push_back(line); }), 1);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find(dead), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("marked lost"), std::string::npos) << lines[0];
    Store store = Store::open(db_);
    EXPECT_EQ(store.get_run(dead).status, "lost");
}

TEST_F(RunHealthTest, LinkResumeClosesARunningRunAndPointsAtTheNewOne) {
    Store store = Store::open(db_);
    const std::string old_run = store.begin_run(info_of("e"));
    const std::string kept = store.begin_run(info_of("e"));
    store.finish_run(kept, "killed", 143, "signal 15");
    const std::string new_run = store.begin_run(info_of("e"));
    store.link_resume(old_run, new_run, 6, true);
    const RunRow old_row = store.get_run(old_run);
    EXPECT_EQ(old_row.status, "resumed");
    EXPECT_EQ(old_row.resumed_by, new_run);
    EXPECT_EQ(old_row.ended_ms, old_row.heartbeat_ms);
    EXPECT_EQ(store.get_run(new_run).resumed_from_step, 6);
    // an ended run keeps its status (the history says how it ended) and only gains the pointer
    const std::string second = store.begin_run(info_of("e"));
    store.link_resume(kept, second, 3, true);
    EXPECT_EQ(store.get_run(kept).status, "killed");
    EXPECT_EQ(store.get_run(kept).resumed_by, second);
    // close_old = false (its process lives): linked, left running
    const std::string live = store.begin_run(info_of("e"));
    const std::string third = store.begin_run(info_of("e"));
    store.link_resume(live, third, 1, false);
    EXPECT_EQ(store.get_run(live).status, "running");
    EXPECT_EQ(store.get_run(live).resumed_by, third);
    EXPECT_THROW(store.link_resume("ffffffffffffffff", third, 1, true), Error);
}

TEST_F(RunHealthTest, ListRunsFiltersByExperimentStatusAndPolicy) {
    Store store = Store::open(db_);
    const std::string a = store.begin_run(info_of("x"));
    store.put_params(a, {{"balance.policy", "\"prophet\""}});
    const std::string b = store.begin_run(info_of("x"));
    store.put_params(b, {{"balance.policy", "\"static\""}});
    store.finish_run(b, "failed", 1, "boom");
    const std::string c = store.begin_run(info_of("y"));
    auto ids = [&](const RunFilter& f) {
        std::vector<std::string> out;
        for (const RunRow& r : store.list_runs(f)) out.push_back(r.run_id);
        return out;
    };
    EXPECT_EQ(ids({"x", "", "", 0}).size(), 2u);
    EXPECT_EQ(ids({"", "failed", "", 0}), std::vector<std::string>{b});
    EXPECT_EQ(ids({"", "", "prophet", 0}), std::vector<std::string>{a});
    EXPECT_EQ(ids({"y", "running", "", 0}), std::vector<std::string>{c});
    EXPECT_TRUE(ids({"y", "", "prophet", 0}).empty());
    EXPECT_EQ(ids({"", "", "", 1}).size(), 1u);
}

// A pid that names no process here: a child this test started and reaped. A run written from another PID
// namespace (a container with host networking: same host name, its own pids) looks exactly like this.
int64_t reaped_pid() {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    int status = 0;
    waitpid(child, &status, 0);
    return child;
}

// Issue 26 item 7: a live run is never reaped because its pid means nothing here.
TEST_F(RunHealthTest, ARunHoldingItsLockIsNotReapedWhenItsPidLooksGone) {
    Store store = Store::open(db_);
    const std::string live = store.begin_run(info_of("other-namespace"));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    const std::string sql = "UPDATE runs SET pid = " + std::to_string(reaped_pid()) + " WHERE run_id = '" + live + "'";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    ASSERT_TRUE(process_gone(*store.get_run(live).pid));

    EXPECT_TRUE(reap_lost_runs(store, kDefaultStaleAfterS * 1000).empty());
    EXPECT_EQ(store.get_run(live).status, "running");
    const StoreHealth health = check_store(store, kDefaultStaleAfterS * 1000);
    ASSERT_EQ(health.running.size(), 1u);
    EXPECT_EQ(health.running[0].liveness, RunLiveness::kAlive) << health.running[0].reason;
}

TEST_F(RunHealthTest, ADeadWritersRunLockIsFreeAndItsRunLost) {
    const std::string dead = run_of_dead_process();
    EXPECT_EQ(probe_run_lock(db_, dead), LockState::kFree);  // the file stays; the kernel released the lock
    Store store = Store::open(db_);
    const std::vector<RunVerdict> reaped = reap_lost_runs(store, kDefaultStaleAfterS * 1000);
    ASSERT_EQ(reaped.size(), 1u);
    EXPECT_NE(reaped[0].reason.find("run lock is free"), std::string::npos) << reaped[0].reason;
    EXPECT_EQ(probe_run_lock(db_, dead), LockState::kAbsent) << "the reaper removes the lost run's lock file";
}

TEST_F(RunHealthTest, FinishRunRemovesItsLock) {
    Store store = Store::open(db_);
    const std::string id = store.begin_run(info_of("e"));
    EXPECT_EQ(probe_run_lock(db_, id), LockState::kHeld);
    store.finish_run(id, "finished", 0, "");
    EXPECT_EQ(probe_run_lock(db_, id), LockState::kAbsent);
}

// The judgement by lock state, one row per case: a held lock wins over any pid or heartbeat; a free lock on this
// host is death; no lock file falls back to the pid (here) or the heartbeat (elsewhere).
TEST(JudgeRunningRun, ByLockState) {
    struct Case {
        const char* host;
        LockState lock;
        bool pid_gone;
        int64_t silent_ms;
        RunLiveness expected;
    };
    const Case cases[] = {
        {"here", LockState::kHeld, true, 86400000, RunLiveness::kAlive},
        {"elsewhere", LockState::kHeld, true, 86400000, RunLiveness::kAlive},
        {"here", LockState::kFree, false, 0, RunLiveness::kLost},
        {"elsewhere", LockState::kFree, false, 0, RunLiveness::kFresh},
        {"elsewhere", LockState::kFree, false, 60001, RunLiveness::kLost},
        {"here", LockState::kAbsent, false, 86400000, RunLiveness::kAlive},
        {"here", LockState::kAbsent, true, 0, RunLiveness::kLost},
    };
    for (const Case& c : cases) {
        const RunRow row = running_row(c.host, 42, 1000);
        const auto gone = [&](int64_t) { return c.pid_gone; };
        const RunVerdict v = judge_running_run(row, 1000 + c.silent_ms, 60000, "here", gone, c.lock);
        EXPECT_EQ(v.liveness, c.expected) << c.host << " " << lock_state_name(c.lock) << ": " << v.reason;
    }
}

// A store written by schema 1 (before host, pid, resumed_by and the statuses lost / resumed).
class MigrationTest : public TempDirTest {
  protected:
    void exec(sqlite3* db, const std::string& sql) {
        char* err = nullptr;
        const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
        const std::string message = err ? err : "";
        sqlite3_free(err);
        ASSERT_EQ(rc, SQLITE_OK) << message;
    }
    void write_v1_store() {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
        exec(db, "PRAGMA journal_mode=WAL");
        exec(db, std::string("BEGIN;") + store_schema_v1() + "PRAGMA application_id=" +
                     std::to_string(kStoreApplicationId) + "; PRAGMA user_version=1;");
        const char* run =
            "INSERT INTO runs(run_id, parent_id, experiment, command, status, started_ms, heartbeat_ms, config, "
            "config_hash, seed, world_size, backend, hardware) VALUES('%s', %s, 'old', 'train', '%s', %d, %d, "
            "'[x]', 'h', 1, 2, 'cpu', '{\"host\":\"oldhost\"}');";
        char sql[512];
        std::snprintf(sql, sizeof sql, run, "aaaaaaaaaaaaaaaa", "NULL", "running", 1000, 2000);
        exec(db, sql);
        std::snprintf(sql, sizeof sql, run, "bbbbbbbbbbbbbbbb", "'aaaaaaaaaaaaaaaa'", "finished", 3000, 4000);
        exec(db, sql);
        exec(db, "INSERT INTO metrics(run_id, key, step, value, ts_ms) VALUES('aaaaaaaaaaaaaaaa', 'loss', 0, 2.5, 1);");
        exec(db, "COMMIT;");
        sqlite3_close(db);
    }
};

TEST_F(MigrationTest, SchemaOneStoreIsMigratedKeepingEveryRowAndLink) {
    write_v1_store();
    Store store = Store::open(db_);
    EXPECT_EQ(store.opened_at_version(), 1);
    EXPECT_EQ(store.schema_version(), kStoreSchemaVersion);
    const RunRow a = store.get_run("aaaaaaaaaaaaaaaa");
    EXPECT_EQ(a.status, "running");
    EXPECT_EQ(a.heartbeat_ms, 2000);
    EXPECT_EQ(a.host, "oldhost");  // taken from the hardware JSON
    EXPECT_FALSE(a.pid.has_value());
    EXPECT_EQ(store.get_run("bbbbbbbbbbbbbbbb").info.parent_id, "aaaaaaaaaaaaaaaa");
    ASSERT_EQ(store.get_metrics("aaaaaaaaaaaaaaaa").size(), 1u);  // no cascade while runs was rebuilt
    EXPECT_EQ(store.integrity_check(), "ok");
    // the new statuses are accepted, and foreign keys are enforced again after the migration
    EXPECT_TRUE(store.mark_lost("aaaaaaaaaaaaaaaa", "lost: test"));
    EXPECT_EQ(store.get_run("aaaaaaaaaaaaaaaa").status, "lost");
    EXPECT_THROW(store.put_metric("cccccccccccccccc", "loss", 0, 1.0), Error);
    // the list order (started_ms, then insertion) is kept
    const std::vector<RunRow> runs = store.list_runs();
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].run_id, "bbbbbbbbbbbbbbbb");
}

TEST_F(MigrationTest, AStaleSchemaOneRunIsReapedByItsHeartbeat) {
    write_v1_store();
    Store store = Store::open(db_);
    // no pid was recorded: judged by the heartbeat (2000 ms after the epoch: long stale)
    const std::vector<RunVerdict> reaped = reap_lost_runs(store, kDefaultStaleAfterS * 1000);
    ASSERT_EQ(reaped.size(), 1u);
    EXPECT_EQ(store.get_run("aaaaaaaaaaaaaaaa").ended_ms, 2000);
}

}  // namespace
}  // namespace prophet
