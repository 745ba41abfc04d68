// run_health.h: finding runs that died without recording their end, and closing them (`prophet db check`, the
// start of `prophet sweep`). docs/reliability.md "A run whose rank 0 dies" explains the rules.
//
// A run is written by one process (rank 0), whose host and pid the store records (runs.host, runs.pid), and which
// holds the run's lock file while the run lives (lib/store/run_lock.h). When that process dies without finishing
// the run (SIGKILL, OOM killer, power loss) nobody can write: the run stays `running`. A `running` run is judged:
//   - its run lock is held: alive, on any host and from any PID namespace, however old its heartbeat;
//   - its run lock is free and it was recorded on this host: lost at once (the kernel released the lock of a
//     process that ended);
//   - no lock file (a run recorded before run locks) and its process is alive on this host: alive; gone (no such
//     pid, or a zombie): lost at once;
//   - otherwise (another host, whose lock a network file system may not share, or no pid recorded, as in schema-1
//     rows): lost when its heartbeat is older than stale_after, else fresh.
// A lost run gets status `lost`, ended_ms = its last heartbeat and a `lost` event (Store::mark_lost).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/file_lock.h"
#include "store/store.h"

namespace prophet {

// Heartbeats come every step (training) or at start and end (plan, simulated points); 15 min of silence from a
// run on another host is taken as death.
inline constexpr int64_t kDefaultStaleAfterS = 900;

// True when `pid` does not exist on this host or is a zombie (exited, not yet reaped by its parent).
bool process_gone(int64_t pid);
// gethostname(), empty when it fails
std::string current_host();

enum class RunLiveness {
    kAlive,  // its process lives on this host
    kFresh,  // cannot be probed here, heartbeat within stale_after
    kLost,   // its process is gone from this host, or it cannot be probed and its heartbeat is stale
};
const char* liveness_name(RunLiveness liveness);  // "alive" | "fresh" | "lost"

struct RunVerdict {
    RunRow run;
    RunLiveness liveness = RunLiveness::kFresh;
    int64_t silent_ms = 0;  // now - last heartbeat (or start)
    std::string reason;     // one line: why this verdict
};

// Judges one `running` run at `now_ms` (Unix ms) as the top of this file says. `host` is this machine's name;
// `gone` tells whether a pid is gone on this host (process_gone, replaced in tests); `lock` is the state of the
// run's lock (probe_run_lock).
RunVerdict judge_running_run(const RunRow& run, int64_t now_ms, int64_t stale_after_ms, const std::string& host,
                             const std::function<bool(int64_t)>& gone = process_gone,
                             LockState lock = LockState::kAbsent);

struct StoreHealth {
    std::string path;
    int schema_version = 0;       // user_version now
    int opened_at_version = 0;    // user_version before this open migrated it (0: a new file)
    std::string integrity;        // "ok" or what PRAGMA integrity_check found
    std::vector<std::string> missing_objects;  // tables and indexes of the schema the file lacks (a dropped table)
    std::vector<std::pair<std::string, int64_t>> status_counts;  // (status, runs), by status
    std::vector<RunVerdict> running;                              // every `running` run, oldest first
    int64_t traces = 0;                                           // traces read back
    std::vector<std::string> bad_traces;  // one line per trace whose blobs disagree with its meta (load_trace)
    bool ok() const;                      // integrity ok, schema complete, every trace readable, no lost run
};

// Integrity, schema version, runs by status, every trace read back and a verdict for every `running` run. Writes
// nothing.
StoreHealth check_store(Store& store, int64_t stale_after_ms);

// Marks every lost run of the store (judged now) `lost`; returns the verdicts of those it marked.
std::vector<RunVerdict> reap_lost_runs(Store& store, int64_t stale_after_ms);

// The call at the start of `prophet sweep`: opens (or creates) the store at `store_path`, reaps it and logs one
// line per run marked lost, then closes it (a sweep must not carry a connection into its children). Returns how
// many it marked.
int reap_lost_runs_at(const std::string& store_path, const std::function<void(const std::string&)>& log,
                      int64_t stale_after_ms = kDefaultStaleAfterS * 1000);

// "2026-12-01 14:08:19 UTC" for Unix ms
std::string format_utc_ms(int64_t ms);

}  // namespace prophet
