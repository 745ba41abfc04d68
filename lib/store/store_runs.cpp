// store_runs.cpp: Store's methods on the runs table: start, heartbeat, finish, resume, read, list.
#include <unistd.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "store/run_lock.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace prophet {

using namespace store_detail;

namespace {

constexpr const char* kRunColumns =
    "run_id, parent_id, experiment, command, status, started_ms, ended_ms, heartbeat_ms, config, config_hash, "
    "overrides, git_sha, git_dirty, prophet_version, seed, world_size, backend, hardware, resumed_from_step, "
    "exit_code, error, simulated, host, pid, resumed_by";

RunRow read_run(const Stmt& s) {
    RunRow r;
    r.run_id = s.col_text(0);
    r.info.parent_id = s.col_text(1);
    r.info.experiment = s.col_text(2);
    r.info.command = s.col_text(3);
    r.status = s.col_text(4);
    r.started_ms = s.col_i64(5);
    r.ended_ms = s.col_opt_i64(6);
    r.heartbeat_ms = s.col_opt_i64(7);
    r.info.config_toml = s.col_text(8);
    r.info.config_hash = s.col_text(9);
    r.info.overrides = s.col_text(10);
    r.info.git_sha = s.col_text(11);
    r.info.git_dirty = s.col_i64(12) != 0;
    r.info.prophet_version = s.col_text(13);
    r.info.seed = s.col_i64(14);
    r.info.world_size = s.col_int(15);
    r.info.backend = s.col_text(16);
    r.info.hardware_json = s.col_text(17);
    r.resumed_from_step = s.col_opt_i64(18);
    if (auto code = s.col_opt_i64(19)) r.exit_code = static_cast<int>(*code);
    r.error = s.col_text(20);
    r.info.simulated = s.col_i64(21) != 0;
    r.host = s.col_text(22);
    r.pid = s.col_opt_i64(23);
    r.resumed_by = s.col_text(24);
    return r;
}

const std::string kSelectRun = std::string("SELECT ") + kRunColumns + " FROM runs WHERE run_id = ?1";
const std::string kListRuns = std::string("SELECT ") + kRunColumns +
                              " FROM runs WHERE (?1 = '' OR experiment = ?1) ORDER BY started_ms DESC, rowid DESC "
                              "LIMIT ?2";
// The policy is the param balance.policy, TOML text (a quoted string).
const std::string kFilterRuns =
    std::string("SELECT ") + kRunColumns +
    " FROM runs WHERE (?1 = '' OR experiment = ?1) AND (?2 = '' OR status = ?2) AND (?3 = '' OR EXISTS (SELECT 1 "
    "FROM params p WHERE p.run_id = runs.run_id AND p.key = 'balance.policy' AND p.value IN (?3, '\"' || ?3 || "
    "'\"'))) ORDER BY started_ms DESC, rowid DESC LIMIT ?4";

std::string this_host() {
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0) return "";
    return host;
}

}  // namespace

std::string Store::begin_run(const RunInfo& info) {
    std::string run_id = random_id();
    // locked before the row exists: a reaper never sees this run `running` with a free lock while it lives
    FileLock lock = lock_run(impl_->path, run_id);
    int64_t now = now_ms();
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT INTO runs(run_id, parent_id, experiment, command, status, started_ms, heartbeat_ms, config, "
               "config_hash, overrides, git_sha, git_dirty, prophet_version, seed, world_size, backend, hardware, "
               "simulated, host, pid) VALUES(?1, ?2, ?3, ?4, 'running', ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
               "?14, ?15, ?16, ?17, ?18)",
               "begin_run");
        s.text(run_id).text_or_null(info.parent_id).text(info.experiment).text(info.command).i64(now);
        s.text(info.config_toml).text(info.config_hash).text_or_null(info.overrides).text_or_null(info.git_sha);
        s.i64(info.git_dirty ? 1 : 0).text_or_null(info.prophet_version).i64(info.seed).i64(info.world_size);
        s.text(info.backend).text_or_null(info.hardware_json).i64(info.simulated ? 1 : 0);
        s.text_or_null(this_host()).i64(::getpid());  // the writer: a reaper never reaps it while it lives
        s.run();
    });
    impl_->run_locks.emplace(run_id, std::move(lock));
    if (!impl_->wal_identity.exists) {  // the files exist once the row is written
        impl_->wal_identity = file_identity(impl_->path + "-wal");
        impl_->shm_identity = file_identity(impl_->path + "-shm");
    }
    return run_id;
}

void Store::finish_run(const std::string& run_id, const std::string& status, int exit_code,
                       const std::string& error) {
    PROPHET_ASSERT_MSG(status == "finished" || status == "failed" || status == "killed" || status == "interrupted",
                       "finish_run status must be finished|failed|killed|interrupted, got '" + status + "'");
    int64_t now = now_ms();
    impl_->transaction([&] {
        Stmt s(*impl_,
               "UPDATE runs SET status = ?1, ended_ms = ?2, heartbeat_ms = ?2, exit_code = ?3, error = ?4 "
               "WHERE run_id = ?5",
               "finish_run");
        s.text(status).i64(now).i64(exit_code).text_or_null(error).text(run_id).run();
        if (changes(*impl_) == 0) {
            throw Error(kExitDatabase, impl_->message("finish_run", ("no run " + run_id).c_str()));
        }
    });
    // released once the end is written (inside an outer transaction too: mark_lost re-reads the status before it
    // writes, so a reaper that sees the free lock first still finds the run ended)
    auto lock = impl_->run_locks.find(run_id);
    if (lock != impl_->run_locks.end()) {
        lock->second.release_and_remove();
        impl_->run_locks.erase(lock);
    }
}

void Store::heartbeat(const std::string& run_id) {
    impl_->transaction([&] {
        Stmt s(*impl_, "UPDATE runs SET heartbeat_ms = ?1 WHERE run_id = ?2", "heartbeat");
        s.i64(now_ms()).text(run_id).run();
        if (changes(*impl_) == 0) {
            throw Error(kExitDatabase, impl_->message("heartbeat", ("no run " + run_id).c_str()));
        }
    });
}

void Store::mark_resumed(const std::string& run_id, int64_t from_step) {
    impl_->transaction([&] {
        Stmt s(*impl_,
               "UPDATE runs SET status = 'running', resumed_from_step = ?1, heartbeat_ms = ?2, ended_ms = NULL, "
               "exit_code = NULL, error = NULL WHERE run_id = ?3",
               "mark_resumed");
        s.i64(from_step).i64(now_ms()).text(run_id).run();
        if (changes(*impl_) == 0) {
            throw Error(kExitDatabase, impl_->message("mark_resumed", ("no run " + run_id).c_str()));
        }
    });
}

RunRow Store::get_run(const std::string& run_id) {
    Stmt s(*impl_, kSelectRun.c_str(), "get_run");
    s.text(run_id);
    if (!s.step()) {
        throw Error(kExitConfig,
                    "no run '" + run_id + "' in " + impl_->path + "; fix: `prophet runs` lists the run ids");
    }
    return read_run(s);
}

std::vector<RunRow> Store::list_runs(const std::string& experiment, int limit) {
    Stmt s(*impl_, kListRuns.c_str(), "list_runs");
    s.text(experiment).i64(limit > 0 ? limit : -1);
    return s.rows<RunRow>(read_run);
}

std::vector<RunRow> Store::list_runs(const RunFilter& filter) {
    Stmt s(*impl_, kFilterRuns.c_str(), "list_runs");
    s.text(filter.experiment).text(filter.status).text(filter.policy).i64(filter.limit > 0 ? filter.limit : -1);
    return s.rows<RunRow>(read_run);
}

bool Store::mark_lost(const std::string& run_id, const std::string& reason) {
    bool marked = false;
    impl_->transaction([&] {
        // ended_ms = the last sign of life, not the time it was found dead
        Stmt s(*impl_,
               "UPDATE runs SET status = 'lost', ended_ms = coalesce(heartbeat_ms, started_ms), error = ?1 "
               "WHERE run_id = ?2 AND status = 'running'",
               "mark_lost");
        s.text(reason).text(run_id).run();
        marked = changes(*impl_) > 0;
        if (marked) {
            Stmt e(*impl_,
                   "INSERT INTO events(run_id, ts_ms, step, rank, level, kind, message, data) "
                   "VALUES(?1, ?2, NULL, -1, 'error', 'lost', ?3, NULL)",
                   "mark_lost");
            e.text(run_id).i64(now_ms()).text(reason).run();
        }
    });
    return marked;
}

void Store::link_resume(const std::string& old_run, const std::string& new_run, int64_t from_step,
                        bool close_old) {
    impl_->transaction([&] {
        {
            Stmt s(*impl_, "UPDATE runs SET resumed_from_step = ?1 WHERE run_id = ?2", "link_resume");
            s.i64(from_step).text(new_run).run();
            if (changes(*impl_) == 0)
                throw Error(kExitDatabase, impl_->message("link_resume", ("no run " + new_run).c_str()));
        }
        Stmt s(*impl_,
               "UPDATE runs SET resumed_by = ?1, status = CASE WHEN ?2 AND status = 'running' THEN 'resumed' ELSE "
               "status END, ended_ms = CASE WHEN ?2 AND status = 'running' THEN coalesce(heartbeat_ms, started_ms) "
               "ELSE ended_ms END WHERE run_id = ?3",
               "link_resume");
        s.text(new_run).i64(close_old ? 1 : 0).text(old_run).run();
        if (changes(*impl_) == 0)
            throw Error(kExitDatabase, impl_->message("link_resume", ("no run " + old_run).c_str()));
    });
}

}  // namespace prophet
