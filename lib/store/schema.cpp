// schema.cpp: the store's schema: version 1 as first created, and the migrations that bring a file of an older
// version up to kStoreSchemaVersion in the transaction that opens it.
#include "store/schema.h"

#include <string>

#include "store/store_impl.h"

namespace prophet {

namespace {

// Schema version 1. STRICT tables; per-run tables are WITHOUT ROWID keyed by run_id first, so their primary key
// doubles as the run_id index. Documented column by column in docs/store.md.
const char* const kSchemaV1 = R"sql(
CREATE TABLE runs(
    run_id TEXT NOT NULL PRIMARY KEY,
    parent_id TEXT REFERENCES runs(run_id) ON DELETE SET NULL,
    experiment TEXT NOT NULL,
    command TEXT NOT NULL,
    status TEXT NOT NULL CHECK(status IN ('running', 'finished', 'failed', 'killed', 'interrupted')),
    started_ms INTEGER NOT NULL,
    ended_ms INTEGER,
    heartbeat_ms INTEGER,
    config TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    overrides TEXT,
    git_sha TEXT,
    git_dirty INTEGER,
    prophet_version TEXT,
    seed INTEGER NOT NULL,
    world_size INTEGER NOT NULL CHECK(world_size >= 1),
    backend TEXT NOT NULL,
    hardware TEXT,
    resumed_from_step INTEGER,
    exit_code INTEGER,
    error TEXT,
    simulated INTEGER NOT NULL DEFAULT 0 CHECK(simulated IN (0, 1))
) STRICT;
CREATE INDEX runs_by_experiment ON runs(experiment, started_ms);
CREATE INDEX runs_by_parent ON runs(parent_id);

CREATE TABLE params(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY(run_id, key)
) STRICT, WITHOUT ROWID;

CREATE TABLE metrics(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    step INTEGER NOT NULL,
    layer INTEGER NOT NULL DEFAULT -1,
    rank INTEGER NOT NULL DEFAULT -1,
    value REAL,
    is_nan INTEGER NOT NULL DEFAULT 0 CHECK(is_nan IN (0, 1)),
    ts_ms INTEGER NOT NULL,
    PRIMARY KEY(run_id, key, step, layer, rank)
) STRICT, WITHOUT ROWID;

CREATE TABLE expert_load(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    n_devices INTEGER NOT NULL CHECK(n_devices >= 1),
    n_experts INTEGER NOT NULL CHECK(n_experts >= 1),
    tokens BLOB NOT NULL CHECK(length(tokens) = 8 * n_devices * n_experts),
    PRIMARY KEY(run_id, step, layer)
) STRICT, WITHOUT ROWID;

CREATE TABLE placements(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    expert INTEGER NOT NULL,
    replica INTEGER NOT NULL CHECK(replica >= 0),
    rank INTEGER NOT NULL,
    PRIMARY KEY(run_id, step, layer, expert, replica)
) STRICT, WITHOUT ROWID;

CREATE TABLE events(
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    ts_ms INTEGER NOT NULL,
    step INTEGER,
    rank INTEGER,
    level TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    data TEXT
) STRICT;
CREATE INDEX events_by_run ON events(run_id, step);

CREATE TABLE bench(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    rep INTEGER NOT NULL,
    real_ns REAL,
    cpu_ns REAL,
    iterations INTEGER,
    counters TEXT,
    PRIMARY KEY(run_id, name, rep)
) STRICT, WITHOUT ROWID;

CREATE TABLE traces(
    trace_id TEXT NOT NULL PRIMARY KEY,
    run_id TEXT REFERENCES runs(run_id) ON DELETE SET NULL,
    created_ms INTEGER NOT NULL,
    meta TEXT NOT NULL,
    counts BLOB NOT NULL,
    transitions BLOB
) STRICT;
CREATE INDEX traces_by_run ON traces(run_id, created_ms);

CREATE TABLE plan_results(
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    policy TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    predicted_eq6_ms REAL,
    predicted_eq8_ms REAL,
    max_mean_load REAL,
    balance_std REAL,
    a2a_bytes REAL,
    trans_bytes REAL,
    agg_bytes REAL,
    replicas INTEGER,
    plan_us REAL,
    dropped_tokens INTEGER,
    PRIMARY KEY(run_id, policy, iteration, layer)
) STRICT, WITHOUT ROWID;
)sql";

// Version 2: runs gains the statuses `lost` (the reaper found it dead: lib/store/run_health.h) and `resumed` (a
// `--resume` continued it in another run), the columns `host` and `pid` (the process that writes the run, so a
// reaper can tell a live run on this host from a dead one) and `resumed_by` (the run that continued this one).
// SQLite cannot change a CHECK constraint in place, so runs is rebuilt (the 12-step procedure of
// https://sqlite.org/lang_altertable.html#otheralter): copy, drop, rename; rowids are kept so that list order
// (started_ms, rowid) is unchanged. Foreign keys must be off meanwhile, or dropping runs would cascade into every
// per-run table; migrate_schema checks them before the commit.
constexpr const char* kMigrateV1ToV2 = R"sql(
CREATE TABLE runs_v2(
    run_id TEXT NOT NULL PRIMARY KEY,
    parent_id TEXT REFERENCES runs(run_id) ON DELETE SET NULL,
    experiment TEXT NOT NULL,
    command TEXT NOT NULL,
    status TEXT NOT NULL CHECK(status IN ('running', 'finished', 'failed', 'killed', 'interrupted', 'lost',
                                          'resumed')),
    started_ms INTEGER NOT NULL,
    ended_ms INTEGER,
    heartbeat_ms INTEGER,
    config TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    overrides TEXT,
    git_sha TEXT,
    git_dirty INTEGER,
    prophet_version TEXT,
    seed INTEGER NOT NULL,
    world_size INTEGER NOT NULL CHECK(world_size >= 1),
    backend TEXT NOT NULL,
    hardware TEXT,
    resumed_from_step INTEGER,
    exit_code INTEGER,
    error TEXT,
    simulated INTEGER NOT NULL DEFAULT 0 CHECK(simulated IN (0, 1)),
    host TEXT,
    pid INTEGER,
    resumed_by TEXT REFERENCES runs(run_id) ON DELETE SET NULL
) STRICT;
INSERT INTO runs_v2(rowid, run_id, parent_id, experiment, command, status, started_ms, ended_ms, heartbeat_ms, config,
                    config_hash, overrides, git_sha, git_dirty, prophet_version, seed, world_size, backend, hardware,
                    resumed_from_step, exit_code, error, simulated, host)
    SELECT rowid, run_id, parent_id, experiment, command, status, started_ms, ended_ms, heartbeat_ms, config,
           config_hash, overrides, git_sha, git_dirty, prophet_version, seed, world_size, backend, hardware,
           resumed_from_step, exit_code, error, simulated,
           CASE WHEN json_valid(hardware) THEN json_extract(hardware, '$.host') END
    FROM runs ORDER BY rowid;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
CREATE INDEX runs_by_experiment ON runs(experiment, started_ms);
CREATE INDEX runs_by_parent ON runs(parent_id);
CREATE INDEX runs_by_status ON runs(status);
)sql";

}  // namespace

const char* store_schema_v1() { return kSchemaV1; }

void migrate_schema(StoreImpl& db, int64_t from_version) {
    PROPHET_ASSERT_MSG(db.txn_depth > 0, "migrate_schema outside a transaction");
    PROPHET_ASSERT_MSG(sqlite3_get_autocommit(db.db) == 0, "migrate_schema needs an open transaction");
    if (from_version < 2) db.exec(kMigrateV1ToV2, "migrate schema 1 -> 2");
    // A foreign key broken by a migration would otherwise go unnoticed while they are off.
    store_detail::Stmt check(db, "PRAGMA foreign_key_check", "foreign_key_check");
    if (check.step()) {
        throw Error(kExitDatabase, db.message("migrate schema", ("a foreign key of table " + check.col_text(0) +
                                                                 " is broken after the migration; nothing was changed")
                                                                    .c_str()));
    }
    db.exec(("PRAGMA user_version=" + std::to_string(kStoreSchemaVersion)).c_str(), "PRAGMA user_version");
}

}  // namespace prophet
