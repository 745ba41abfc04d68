// merge.cpp: merging shard stores into one (rules in merge.h, docs/cluster.md).
#include "store/merge.h"

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace prophet {

namespace fs = std::filesystem;

namespace {

struct Db {
    sqlite3* db = nullptr;
    std::string path;
    ~Db() {
        if (db) sqlite3_close_v2(db);
    }
    [[noreturn]] void fail(const std::string& what) const {
        throw Error(kExitDatabase, "prophet db merge: " + path + ": " + what + " (" + sqlite3_errmsg(db) + ")");
    }
    void exec(const std::string& sql) const {
        char* message = nullptr;
        if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
            const std::string text = message ? message : "?";
            sqlite3_free(message);
            throw Error(kExitDatabase, "prophet db merge: " + path + ": " + text + " in: " + sql.substr(0, 120));
        }
    }
    // Rows of a query with text parameters bound in order; every column as text (NULL -> "").
    std::vector<std::vector<std::string>> rows(const std::string& sql,
                                               const std::vector<std::string>& params = {}) const {
        sqlite3_stmt* raw = nullptr;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) fail("prepare " + sql);
        std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
        for (size_t i = 0; i < params.size(); ++i)
            sqlite3_bind_text(raw, static_cast<int>(i + 1), params[i].c_str(), -1, SQLITE_TRANSIENT);
        std::vector<std::vector<std::string>> out;
        int rc;
        while ((rc = sqlite3_step(raw)) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int c = 0; c < sqlite3_column_count(raw); ++c) {
                const unsigned char* text = sqlite3_column_text(raw, c);
                row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
            }
            out.push_back(std::move(row));
        }
        if (rc != SQLITE_DONE) fail("step " + sql.substr(0, 80));
        return out;
    }
    int64_t count(const std::string& table) const { return std::stoll(rows("SELECT count(*) FROM " + table)[0][0]); }
};

std::string ident(const std::string& name) {  // a quoted SQL identifier
    std::string out = "\"";
    for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string sql_text(const std::string& s) {  // a quoted SQL string literal
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

// (application_id, user_version) of a file opened read-only; exit 5 naming the file when it is no SQLite file.
std::pair<int64_t, int64_t> read_header(const std::string& path) {
    Db d;
    d.path = path;
    // read-only even where the shard's directory is (store_read_only.cpp: no -shm can be created there)
    if (sqlite3_open_v2(store_detail::read_only_uri(path).c_str(), &d.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                        nullptr) != SQLITE_OK)
        d.fail("cannot open the shard read-only");
    sqlite3_stmt* raw = nullptr;
    const char* query =
        "SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version)";
    int rc = sqlite3_prepare_v2(d.db, query, -1, &raw, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(raw);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(raw);
        throw Error(kExitDatabase, "prophet db merge: " + path + ": not a SQLite database (" +
                                       sqlite3_errmsg(d.db) + "); pass only prophet store files");
    }
    const std::pair<int64_t, int64_t> header{sqlite3_column_int64(raw, 0), sqlite3_column_int64(raw, 1)};
    sqlite3_finalize(raw);
    return header;
}

struct Column {
    std::string name, type;
    int pk = 0;  // 1-based position in the primary key; 0 = not part of it
};

std::vector<Column> columns(const Db& d, const std::string& schema, const std::string& table) {
    std::vector<Column> out;
    for (const auto& r : d.rows("SELECT name, type, pk FROM " + schema + ".pragma_table_info(?1)", {table}))
        out.push_back({r[0], r[1], std::stoi(r[2])});
    return out;
}

std::string join(const std::vector<Column>& cols, const std::string& prefix, bool skip_pk) {
    std::string out;
    for (const Column& c : cols) {
        if (skip_pk && c.pk > 0) continue;
        out += (out.empty() ? "" : ", ") + prefix + ident(c.name);
    }
    return out;
}

// One table of the attached shard `src` into main; returns the rows added (or, runs, replaced).
int64_t merge_table(const Db& d, const std::string& table, const std::vector<Column>& cols) {
    const std::string t = ident(table);
    int pk_columns = 0;
    for (const Column& c : cols) pk_columns += c.pk > 0;
    bool integer_key = false;  // the one primary key column is INTEGER: an alias of the rowid in a rowid table
    for (const Column& c : cols)
        if (c.pk == 1) integer_key = pk_columns == 1 && c.type == "INTEGER";
    const bool rowid_alias =
        integer_key &&
        !d.rows("SELECT 1 FROM pragma_table_list WHERE schema = 'main' AND name = ?1 AND wr = 0", {table}).empty();
    std::string sql;
    if (rowid_alias) {
        // no natural key: copy a row unless an equal one (all columns but the rowid) is already there
        std::string equal;
        for (const Column& c : cols)
            if (c.pk == 0) equal += (equal.empty() ? "" : " AND ") + ("m." + ident(c.name)) + " IS s." + ident(c.name);
        sql = "INSERT INTO main." + t + "(" + join(cols, "", true) + ") SELECT " + join(cols, "s.", true) +
              " FROM src." + t + " AS s WHERE NOT EXISTS (SELECT 1 FROM main." + t + " AS m WHERE " + equal +
              ") ORDER BY s.rowid";
    } else if (table == "runs") {
        // the newer row of a run wins: a point merged while running, then again once finished, ends finished
        std::string set;
        for (const Column& c : cols)
            if (c.pk == 0) set += (set.empty() ? "" : ", ") + ident(c.name) + " = excluded." + ident(c.name);
        const char* newer =
            "coalesce(excluded.ended_ms, excluded.heartbeat_ms, excluded.started_ms) > "
            "coalesce(runs.ended_ms, runs.heartbeat_ms, runs.started_ms)";
        sql = "INSERT INTO main.runs(" + join(cols, "", false) + ") SELECT " + join(cols, "", false) +
              " FROM src.runs WHERE true ON CONFLICT(run_id) DO UPDATE SET " + set + " WHERE " + newer;
    } else {
        sql = "INSERT INTO main." + t + "(" + join(cols, "", false) + ") SELECT " + join(cols, "", false) +
              " FROM src." + t + " WHERE true ON CONFLICT DO NOTHING";
    }
    d.exec(sql);
    return sqlite3_changes64(d.db);
}

// Every shard checked before anything is written: a file, not the target, a prophet store of the target's schema.
void check_shards(const std::vector<std::string>& shards, const std::string& into, int64_t target_version) {
    std::error_code ec;
    for (const std::string& shard : shards) {
        if (!fs::is_regular_file(shard, ec))
            throw Error(kExitConfig, "prophet db merge: shard " + shard + " does not exist or is not a file");
        if (fs::equivalent(shard, into, ec))
            throw Error(kExitConfig, "prophet db merge: shard " + shard + " is the target store itself");
        const auto [app, version] = read_header(shard);
        if (app != kStoreApplicationId)
            throw Error(kExitDatabase, "prophet db merge: " + shard + ": not a prophet store (application_id " +
                                           std::to_string(app) + ", expected " +
                                           std::to_string(kStoreApplicationId) + ")");
        if (version != target_version)
            throw Error(kExitDatabase, "prophet db merge: " + shard + " has schema version " +
                                           std::to_string(version) + " but " + into + " has schema version " +
                                           std::to_string(target_version) +
                                           "; merge only stores of the same schema (open the older one with this "
                                           "prophet first when it migrates, or merge with the prophet that wrote it)");
    }
}

// Every table of the attached shard `src` into main, in one transaction (rolled back on a failure); returns the
// rows added.
int64_t merge_attached_shard(const Db& d, const std::string& shard, const std::vector<std::string>& tables) {
    int64_t rows_added = 0;
    d.exec("BEGIN IMMEDIATE");
    try {
        for (const std::string& table : tables) {
            const std::vector<Column> cols = columns(d, "main", table);
            const std::vector<Column> shard_cols = columns(d, "src", table);
            if (shard_cols.empty()) continue;  // same version: cannot happen unless the shard was edited
            if (join(shard_cols, "", false) != join(cols, "", false))
                throw Error(kExitDatabase, "prophet db merge: " + shard + ": table " + table + " has columns (" +
                                               join(shard_cols, "", false) + "), the target (" + join(cols, "", false) +
                                               ")");
            rows_added += merge_table(d, table, cols);
        }
        d.exec("COMMIT");
    } catch (...) {
        sqlite3_exec(d.db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
    return rows_added;
}

// One shard attached as `src`, merged and detached again (also when the merge fails).
MergeCount merge_shard(const Db& d, const std::string& shard, const std::vector<std::string>& tables) {
    MergeCount count;
    count.shard = shard;
    d.exec("ATTACH DATABASE " + sql_text(store_detail::read_only_uri(shard)) + " AS src");
    try {
        const int64_t runs_before = d.count("main.runs");
        count.rows_added = merge_attached_shard(d, shard, tables);
        count.runs_added = d.count("main.runs") - runs_before;
    } catch (...) {
        sqlite3_exec(d.db, "DETACH DATABASE src", nullptr, nullptr, nullptr);
        throw;
    }
    d.exec("DETACH DATABASE src");
    return count;
}

}  // namespace

MergeSummary merge_stores(const std::vector<std::string>& shards, const std::string& into) {
    if (shards.empty()) throw Error(kExitUsage, "usage error: prophet db merge needs at least one shard store");
    // creates the target with the current schema, or refuses a foreign / newer / unmigratable one (exit 5)
    { Store::open(into); }
    const auto [target_app, target_version] = read_header(into);
    check_shards(shards, into, target_version);

    Db d;
    d.path = into;
    if (sqlite3_open_v2(into.c_str(), &d.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, nullptr) != SQLITE_OK)
        d.fail("cannot open");  // SQLITE_OPEN_URI: the shards are attached read-only by URI
    sqlite3_busy_timeout(d.db, 10000);
    // ATTACH is refused inside a transaction, so each shard is its own transaction; a resumed run may name a
    // parent in a later shard, so foreign keys are checked once at the end (foreign_key_check) instead of per row
    d.exec("PRAGMA foreign_keys=OFF");

    std::vector<std::string> tables;  // runs first: the other tables reference it
    for (const auto& r : d.rows("SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name NOT LIKE "
                                "'sqlite_%' ORDER BY name <> 'runs', name"))
        tables.push_back(r[0]);

    MergeSummary summary;
    for (const std::string& shard : shards) {
        const MergeCount count = merge_shard(d, shard, tables);
        summary.rows_added += count.rows_added;
        summary.runs_added += count.runs_added;
        summary.shards.push_back(count);
    }
    // a partial merge (some shards not yet merged) may leave a resumed run's parent missing: reported, not refused
    summary.dangling_references = static_cast<int64_t>(d.rows("PRAGMA foreign_key_check").size());
    summary.runs_total = d.count("main.runs");
    return summary;
}

}  // namespace prophet
