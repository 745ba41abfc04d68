// store_verify.cpp: Store::verify_recorded: are the rows this process wrote there for every other process?
//
// Deleting a store's -wal and -shm files while a run writes (a cleanup script, a user "fixing" a stuck store)
// leaves the run writing into a WAL nobody else can see: other processes read the main file alone, a sweep then
// writes beside it, and the rows are lost while every command exits 0 (issue 26 item 9). Two checks catch it:
// the identity (device, inode) of the -wal and -shm files against the ones this connection first wrote through,
// and each run read back through a fresh connection against this connection's own view.
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "store/schema.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace prophet {

using namespace store_detail;

namespace {

// A run's row as one connection sees it: status and its metric and event counts; "" status = no such run.
struct RunView {
    std::string status;
    int64_t metrics = 0, events = 0;
    bool operator==(const RunView& o) const { return status == o.status && metrics == o.metrics && events == o.events; }
};

constexpr const char* kRunView =
    "SELECT status, (SELECT count(*) FROM metrics WHERE run_id = ?1), (SELECT count(*) FROM events WHERE run_id = ?1) "
    "FROM runs WHERE run_id = ?1";

// nullopt: the query failed (the message in `error`)
std::optional<RunView> read_view(sqlite3* db, const std::string& run_id, std::string& error) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, kRunView, -1, &stmt, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(stmt, 1, run_id.c_str(), -1, SQLITE_TRANSIENT);
    RunView view;
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
        view.status = text ? text : "";
        view.metrics = sqlite3_column_int64(stmt, 1);
        view.events = sqlite3_column_int64(stmt, 2);
    } else if (rc != SQLITE_DONE) {
        error = sqlite3_errmsg(db);
        sqlite3_finalize(stmt);
        return std::nullopt;
    }
    sqlite3_finalize(stmt);
    return view;
}

std::string describe(const RunView& v) {
    if (v.status.empty()) return "no such run";
    return v.status + ", " + std::to_string(v.metrics) + " metric rows, " + std::to_string(v.events) + " events";
}

}  // namespace

FileIdentity store_detail::file_identity(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), true};
}

std::vector<std::string> Store::verify_recorded(const std::vector<std::string>& run_ids) {
    std::vector<std::string> problems;
    for (const char* suffix : {"-wal", "-shm"}) {
        const FileIdentity* first = suffix[1] == 'w' ? &impl_->wal_identity : &impl_->shm_identity;
        if (first->exists && !(file_identity(impl_->path + suffix) == *first))
            problems.push_back(impl_->path + suffix +
                               " was removed or replaced while this process wrote through it: "
                               "what it wrote since is not in the store other processes read");
    }
    sqlite3* fresh = nullptr;
    if (sqlite3_open_v2(impl_->path.c_str(), &fresh, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
        problems.push_back(impl_->path + ": cannot open it again to read the rows back: " +
                           (fresh ? sqlite3_errmsg(fresh) : "out of memory"));
        sqlite3_close_v2(fresh);
        return problems;
    }
    sqlite3_busy_timeout(fresh, kBusyTimeoutMs);
    for (const std::string& run_id : run_ids) {
        std::string own_error, fresh_error;
        const std::optional<RunView> own = read_view(impl_->db, run_id, own_error);
        const std::optional<RunView> other = read_view(fresh, run_id, fresh_error);
        if (!own || own->status.empty()) {
            problems.push_back("run " + run_id + " is not in " + impl_->path + (own ? "" : " (" + own_error + ")"));
        } else if (!other || !(*other == *own)) {
            problems.push_back("run " + run_id + ": this process wrote " + describe(*own) + "; another connection to " +
                               impl_->path + " reads " + (other ? describe(*other) : "nothing (" + fresh_error + ")"));
        }
    }
    sqlite3_close_v2(fresh);
    return problems;
}

namespace {

// "table runs", "index events_by_run", ... of a connection's schema, sorted (SQLite's own objects left out)
std::vector<std::string> schema_objects(sqlite3* db) {
    std::vector<std::string> names;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT type || ' ' || name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'", -1,
                           &stmt, nullptr) != SQLITE_OK) {
        sqlite3_finalize(stmt);
        throw Error(kExitDatabase, std::string("database error: reading the schema: ") + sqlite3_errmsg(db));
    }
    while (sqlite3_step(stmt) == SQLITE_ROW)
        names.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
    sqlite3_finalize(stmt);
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace

std::vector<std::string> Store::missing_schema_objects() {
    // the schema a new store gets: version 1 migrated to the current version, built in memory
    StoreImpl reference;
    reference.path = ":memory: (the reference schema)";
    if (sqlite3_open(":memory:", &reference.db) != SQLITE_OK)
        throw Error(kExitResource, "resource error: cannot open an in-memory SQLite database");
    reference.exec(store_schema_v1(), "reference schema");
    reference.transaction([&] { migrate_schema(reference, 1); });
    const std::vector<std::string> expected = schema_objects(reference.db);
    const std::vector<std::string> present = schema_objects(impl_->db);
    std::vector<std::string> missing;
    std::set_difference(expected.begin(), expected.end(), present.begin(), present.end(), std::back_inserter(missing));
    return missing;
}

bool has_store_schema(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0) return false;
    sqlite3* db = nullptr;
    bool has = true;  // unreadable or not SQLite: Store::open names the problem
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema", -1, &stmt, nullptr) == SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW)
            has = sqlite3_column_int64(stmt, 0) > 0;
        sqlite3_finalize(stmt);
    }
    sqlite3_close_v2(db);
    return has;
}

void require_recorded(Store& store, const std::vector<std::string>& run_ids, const std::string& what) {
    const std::vector<std::string> problems = store.verify_recorded(run_ids);
    if (problems.empty()) return;
    std::string text = "database error: " + what + " ended, but its rows are not all in " + store.path() + ":";
    for (const std::string& p : problems) text += "\n  " + p;
    text += "\nfix: do not remove a store's -wal or -shm file while anything writes it; run `prophet db check --db " +
            store.path() + "`, then run the lost work again";
    throw Error(kExitDatabase, text);
}

}  // namespace prophet
