// run_health.cpp: judging `running` runs by their process and heartbeat, checking a store, reaping lost runs.
#include "store/run_health.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/enum_table.h"
#include "core/error.h"
#include "store/run_lock.h"

namespace prophet {

bool process_gone(int64_t pid) {
    if (pid <= 0) return false;  // not a process id we could have recorded; never call it gone
    if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;  // EPERM: it exists, owned by someone else
    // /proc/<pid>/stat is "pid (comm) state ...": comm may hold spaces and parentheses, so the state is the first
    // field after the last ')'
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) return false;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    rest >> state;
    return state == "Z" || state == "X";
}

std::string current_host() {
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0) return "";
    return host;
}

namespace {
constexpr EnumName<RunLiveness> kLivenessNames[] = {
    {RunLiveness::kAlive, "alive"}, {RunLiveness::kFresh, "fresh"}, {RunLiveness::kLost, "lost"}};
}  // namespace

const char* liveness_name(RunLiveness liveness) { return enum_name(kLivenessNames, liveness); }

std::string format_utc_ms(int64_t ms) {
    const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
    return text;
}

RunVerdict judge_running_run(const RunRow& run, int64_t now_ms, int64_t stale_after_ms, const std::string& host,
                             const std::function<bool(int64_t)>& gone, LockState lock) {
    RunVerdict v;
    v.run = run;
    const int64_t last = run.heartbeat_ms.value_or(run.started_ms);
    v.silent_ms = std::max<int64_t>(0, now_ms - last);
    const std::string since = "last heartbeat " + format_utc_ms(last) + " (" + std::to_string(v.silent_ms / 1000) +
                              " s ago)";
    const bool same_host = !run.host.empty() && run.host == host;
    const bool here = same_host && run.pid.has_value();
    const std::string process = run.pid ? "pid " + std::to_string(*run.pid) + " on " + run.host : "no pid recorded";
    if (lock == LockState::kHeld) {  // whatever the pid says: from another PID namespace it says nothing
        v.liveness = RunLiveness::kAlive;
        v.reason = "alive: its run lock is held (" + process + "); " + since;
        return v;
    }
    if (lock == LockState::kFree && same_host) {
        v.liveness = RunLiveness::kLost;
        v.reason = "lost: its run lock is free: the process that held it (" + process + ") is gone; " + since;
        return v;
    }
    if (here && lock == LockState::kAbsent) {  // a run recorded before run locks: its pid is all there is
        if (gone(*run.pid)) {
            v.liveness = RunLiveness::kLost;
            v.reason = "lost: its process (" + process + ") is gone; " + since;
        } else {
            v.liveness = RunLiveness::kAlive;
            v.reason = "alive: " + process + " runs; " + since;
        }
        return v;
    }
    const std::string where = run.host.empty() || !run.pid ? std::string("no process recorded")
                                                           : "pid " + std::to_string(*run.pid) + " on host " +
                                                                 run.host + ", not this host (" + host + ")";
    if (v.silent_ms > stale_after_ms) {
        v.liveness = RunLiveness::kLost;
        v.reason = "lost: " + since + ", over the " + std::to_string(stale_after_ms / 1000) + " s limit (" + where +
                   ")";
    } else {
        v.liveness = RunLiveness::kFresh;
        v.reason = "fresh: " + since + " (" + where + ")";
    }
    return v;
}

bool StoreHealth::ok() const {
    if (integrity != "ok" || !missing_objects.empty() || !bad_traces.empty()) return false;
    return std::none_of(running.begin(), running.end(),
                        [](const RunVerdict& v) { return v.liveness == RunLiveness::kLost; });
}

namespace {

int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::vector<RunVerdict> judge_running(Store& store, int64_t stale_after_ms) {
    RunFilter running;
    running.status = "running";
    std::vector<RunRow> rows = store.list_runs(running);  // newest first
    std::reverse(rows.begin(), rows.end());
    const std::string host = current_host();
    const int64_t now = wall_ms();
    std::vector<RunVerdict> verdicts;
    for (const RunRow& row : rows)
        verdicts.push_back(
            judge_running_run(row, now, stale_after_ms, host, process_gone, probe_run_lock(store.path(), row.run_id)));
    return verdicts;
}

}  // namespace

StoreHealth check_store(Store& store, int64_t stale_after_ms) {
    StoreHealth h;
    h.path = store.path();
    h.schema_version = store.schema_version();
    h.opened_at_version = store.opened_at_version();
    h.integrity = store.integrity_check();
    h.missing_objects = store.missing_schema_objects();
    if (!h.missing_objects.empty()) return h;  // reading the runs or traces could fail on the very table missing
    std::map<std::string, int64_t> counts;
    for (const RunRow& row : store.list_runs(RunFilter{})) ++counts[row.status];
    h.status_counts.assign(counts.begin(), counts.end());
    h.running = judge_running(store, stale_after_ms);
    for (const TraceRow& row : store.list_traces()) {
        ++h.traces;
        try {
            store.load_trace(row.trace_id);  // checks both blobs against the meta
        } catch (const Error& e) {
            h.bad_traces.push_back(e.what());
        }
    }
    return h;
}

std::vector<RunVerdict> reap_lost_runs(Store& store, int64_t stale_after_ms) {
    std::vector<RunVerdict> reaped;
    for (RunVerdict& v : judge_running(store, stale_after_ms)) {
        // mark_lost writes only if the run is still running: a run that finished since it was judged keeps its end
        if (v.liveness == RunLiveness::kLost && store.mark_lost(v.run.run_id, v.reason)) {
            std::error_code ec;  // its lock file, free since its writer ended: nobody locks a lost run again
            std::filesystem::remove(run_lock_path(store.path(), v.run.run_id), ec);
            reaped.push_back(std::move(v));
        }
    }
    return reaped;
}

int reap_lost_runs_at(const std::string& store_path, const std::function<void(const std::string&)>& log,
                      int64_t stale_after_ms) {
    Store store = Store::open(store_path);
    const std::vector<RunVerdict> reaped = reap_lost_runs(store, stale_after_ms);
    for (const RunVerdict& v : reaped)
        log("prophet: run " + v.run.run_id + " (" + v.run.info.experiment + ", " + v.run.info.command +
            ") marked lost: " + v.reason);
    return static_cast<int>(reaped.size());
}

}  // namespace prophet
