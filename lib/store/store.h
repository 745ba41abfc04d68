// store.h: the SQLite file every run records into (default `results/prophet.db`).
//
// One writer: only global rank 0 opens a Store for writing; plots open the file read-only. The file is WAL,
// busy_timeout 10 s, synchronous NORMAL, foreign keys on, and carries application_id 'PRPT' plus
// user_version (the schema version) so foreign or newer files are refused with exit code 5. Every write
// method works inside transaction(...) (one BEGIN IMMEDIATE for a whole logging interval) and standalone (its
// own short transaction). Schema and rationale: docs/store.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trace/trace.h"

namespace prophet {

inline constexpr int32_t kStoreApplicationId = 0x50525054;  // 'PRPT'
inline constexpr int kStoreSchemaVersion = 2;               // PRAGMA user_version (lib/store/schema.cpp)

// What a run records at its start.
struct RunInfo {
    std::string experiment, command, config_toml, config_hash, overrides, git_sha;
    bool git_dirty = false;
    std::string prophet_version;
    int64_t seed = 0;
    int world_size = 1;
    std::string backend = "cpu";
    std::string hardware_json = "{}";
    std::string parent_id;  // empty = none
    bool simulated = false;
};

// One row of `runs`.
struct RunRow {
    std::string run_id;
    RunInfo info;
    std::string status;  // running | finished | failed | killed | interrupted | lost | resumed
    int64_t started_ms = 0;
    std::optional<int64_t> ended_ms, heartbeat_ms, resumed_from_step;
    std::optional<int> exit_code;
    std::string error;  // empty = none
    std::string host;            // host of the process that writes the run (rank 0); empty = unknown
    std::optional<int64_t> pid;  // its pid on that host; none for runs recorded before schema 2
    std::string resumed_by;      // the run that continued this one with --resume; empty = none
};

// What `prophet runs` filters on; empty fields match everything.
struct RunFilter {
    std::string experiment, status;
    std::string policy;  // the param balance.policy
    int limit = 0;       // newest first; 0 = all
};

struct MetricRow {
    std::string key;
    int64_t step = 0;
    int layer = -1;  // -1 = not per layer
    int rank = -1;   // -1 = global (reduced over ranks)
    double value = 0;  // NaN round-trips through is_nan
    int64_t ts_ms = 0;
};

struct ExpertLoadRow {
    int64_t step = 0;
    int layer = 0;
    int num_devices = 0;  // D
    int num_experts = 0;  // E
    std::vector<int64_t> tokens;  // [D][E] tokens device d routes to expert e
};

struct PlacementRow {
    int64_t step = 0;
    int layer = 0;
    int expert = 0;
    int replica = 0;  // 0 = owner, 1.. = replica holders
    int rank = 0;
};

struct EventRow {
    int64_t id = 0;
    int64_t ts_ms = 0;
    int64_t step = 0;
    int rank = -1;
    std::string level, kind, message, data_json;  // data_json empty = none
};

// One row of `plan_results`: what one policy predicts for one iteration and layer.
struct PlanResultRow {
    std::string run_id, policy;
    int64_t iteration = 0;
    int layer = 0;
    double predicted_eq6_ms = 0, predicted_eq8_ms = 0;
    double max_mean_load = 0, balance_std = 0;
    double a2a_bytes = 0, trans_bytes = 0, agg_bytes = 0;
    int64_t replicas = 0;
    double plan_us = 0;
    int64_t dropped_tokens = 0;
};

struct BenchRow {
    std::string name;
    int rep = 0;
    double real_ns = 0, cpu_ns = 0;
    int64_t iterations = 0;
    std::string counters_json;
};

struct TraceRow {
    std::string trace_id, run_id;  // run_id empty = not tied to a run
    int64_t created_ms = 0;
    TraceMeta meta;
};

struct StoreImpl;  // the connection and its statement cache (store.cpp)

class Store {
  public:
    // Opens or creates `path` (parent directories included) and checks it; throws prophet::Error (exit 5) naming
    // the file, the problem and the fix for a non-SQLite file, a foreign application_id, a newer schema, or an
    // unwritable location. An empty or missing file gets the schema.
    static Store open(const std::string& path);
    // Opens an existing store only to read it (runs, db check, db merge's shards): SQLITE_OPEN_READONLY through
    // read_only_uri, so a read-only file, directory or mount reads like any other; nothing is created, switched or
    // migrated, and a write through it fails. Exit 5 naming the file for a missing, non-SQLite, foreign or newer
    // file, and for an older schema (which only a writable open migrates).
    static Store open_read_only(const std::string& path);

    Store(Store&&) noexcept;
    Store& operator=(Store&&) noexcept;
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;
    ~Store();

    const std::string& path() const;

    // BEGIN IMMEDIATE, fn, COMMIT; ROLLBACK and rethrow when fn throws. On SQLITE_BUSY (after busy_timeout) the
    // whole transaction is rolled back and retried up to 10 times with backoff, so fn may run more than once and
    // should only do database writes. Nested calls join the outer transaction.
    void transaction(const std::function<void()>& fn);
    bool in_transaction() const;

    // runs
    std::string begin_run(const RunInfo& info);  // new 16-hex-char run_id, status running
    void finish_run(const std::string& run_id, const std::string& status, int exit_code, const std::string& error);
    void heartbeat(const std::string& run_id);
    void mark_resumed(const std::string& run_id, int64_t from_step);  // status back to running, ended_ms cleared
    RunRow get_run(const std::string& run_id);  // exit 3 "no run ..." if absent
    std::vector<RunRow> list_runs(const std::string& experiment = "", int limit = 0);  // newest first; 0 = all
    std::vector<RunRow> list_runs(const RunFilter& filter);
    // A `running` run found dead (lib/store/run_health.h decides): status lost, ended_ms = its last heartbeat,
    // error = reason, and a `lost` event, in one transaction. False (nothing written) when it is no longer running.
    bool mark_lost(const std::string& run_id, const std::string& reason);
    // `--resume`: new_run.resumed_from_step = from_step and old_run.resumed_by = new_run; with close_old a
    // `running` old run becomes `resumed` with ended_ms = its last heartbeat. One transaction.
    void link_resume(const std::string& old_run, const std::string& new_run, int64_t from_step, bool close_old);

    // per-run data (upserts: rewriting the same key never duplicates a row)
    void put_params(const std::string& run_id, const std::vector<std::pair<std::string, std::string>>& params);
    void put_metric(const std::string& run_id, const std::string& key, int64_t step, double value, int layer = -1,
                    int rank = -1);
    // tokens: [D][E] row-major by device
    void put_expert_load(const std::string& run_id, int64_t step, int layer, const int64_t* tokens,
                         int num_devices, int num_experts);
    void put_placement_row(const std::string& run_id, int64_t step, int layer, int expert, int replica, int rank);
    void put_event(const std::string& run_id, int64_t step, int rank, const std::string& level,
                   const std::string& kind, const std::string& message, const std::string& data_json);
    void put_plan_result(const PlanResultRow& row);
    void put_bench(const std::string& run_id, const std::string& name, int rep, double real_ns, double cpu_ns,
                   int64_t iterations, const std::string& counters_json);

    std::vector<std::pair<std::string, std::string>> get_params(const std::string& run_id);  // sorted by key
    std::vector<MetricRow> get_metrics(const std::string& run_id, const std::string& key = "");  // all keys if ""
    std::optional<ExpertLoadRow> get_expert_load(const std::string& run_id, int64_t step, int layer);
    std::vector<PlacementRow> get_placements(const std::string& run_id, int64_t step, int layer);
    std::vector<EventRow> get_events(const std::string& run_id);
    std::vector<PlanResultRow> get_plan_results(const std::string& run_id);
    std::vector<BenchRow> get_bench(const std::string& run_id);

    // traces: counts/transitions as int64 little-endian blobs, meta as JSON
    std::string save_trace(const Trace& trace, const std::string& run_id);  // run_id may be empty; returns trace_id
    Trace load_trace(const std::string& trace_or_run_id);  // a trace_id, or the latest trace of a run; exit 3 if none
    std::vector<TraceRow> list_traces(const std::string& run_id = "");  // newest first

    // Whether the rows of `run_ids` are there for every other process (issue 26 item 9): each run read back through
    // a fresh connection must match this connection's view (status, metric and event counts), and the -wal and
    // -shm files must still be the ones this connection wrote through when it began its first run. One line per
    // problem; empty = all there. Call it before checkpoint(), at the end of a run or sweep.
    std::vector<std::string> verify_recorded(const std::vector<std::string>& run_ids);

    // The tables and indexes of the current schema that this file lacks ("table events", "index events_by_run"),
    // sorted; empty when it has them all. A dropped table passes integrity_check but fails every command that
    // reads it.
    std::vector<std::string> missing_schema_objects();
    std::string integrity_check(bool quick = false);  // "ok" or the problems found
    int schema_version();                              // PRAGMA user_version (kStoreSchemaVersion once open)
    int opened_at_version() const;                     // user_version before open migrated it; 0 = new file
    void checkpoint();  // PRAGMA wal_checkpoint(TRUNCATE); best effort, for the end of a run

  private:
    explicit Store(std::unique_ptr<StoreImpl> impl);
    std::unique_ptr<StoreImpl> impl_;
};

// Whether `path` is a file holding a schema: false for a missing or empty file, or an empty SQLite database
// (nothing to read, and Store::open would write a schema into it); true for anything else, even a file that is not
// SQLite (Store::open then names the problem). Opens the file read-only; writes nothing.
bool has_store_schema(const std::string& path);

// Store::verify_recorded, throwing prophet::Error (exit 5) that names `what` ("run 0123...", "sweep nightly"),
// every problem and the fix when there is one.
void require_recorded(Store& store, const std::vector<std::string>& run_ids, const std::string& what);

}  // namespace prophet
