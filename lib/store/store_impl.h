// store_impl.h: the connection behind a Store, shared by the files that implement Store's methods (store.cpp,
// store_runs.cpp, schema.cpp). Not part of the public API: include store/store.h.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_lock.h"

namespace prophet {

namespace store_detail {

constexpr int kBusyTimeoutMs = 10000;
constexpr int kMaxBusyRetries = 10;

// SQLITE_BUSY / SQLITE_LOCKED after busy_timeout: transaction() rolls back and retries on this one.
class BusyError : public Error {
  public:
    explicit BusyError(const std::string& message) : Error(kExitDatabase, message) {}
};

inline int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

inline uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// n int64 values as 8n little-endian bytes (a blob column), and back (bytes / 8 values)
std::string encode_i64_le(const int64_t* values, size_t n);
std::vector<int64_t> decode_i64_le(const void* data, size_t bytes);

// 16 lowercase hex chars: 8 bytes of /dev/urandom, or time, pid and a counter mixed when that is unavailable.
std::string random_id();

// (device, inode) of a file, to tell whether the file at a path is still the one opened earlier
struct FileIdentity {
    uint64_t device = 0, inode = 0;
    bool exists = false;
    bool operator==(const FileIdentity& o) const {
        return exists == o.exists && device == o.device && inode == o.inode;
    }
};
FileIdentity file_identity(const std::string& path);  // exists = false when stat fails

inline bool is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

}  // namespace store_detail

// The connection, its statement cache and transactions with busy retry.

struct StoreImpl {
    std::string path;
    sqlite3* db = nullptr;
    std::unordered_map<std::string, sqlite3_stmt*> statements;
    int txn_depth = 0;
    int opened_at_version = 0;  // user_version the file had when opened (0: new), before any migration
    std::unordered_map<std::string, FileLock> run_locks;
    // the -wal and -shm files this connection wrote through when it began its first run (Store::verify_recorded)
    store_detail::FileIdentity wal_identity, shm_identity;  // run_id -> its lock, for the runs begun here and running

    ~StoreImpl() {
        for (auto& [sql, stmt] : statements) sqlite3_finalize(stmt);
        if (db) sqlite3_close_v2(db);
    }

    std::string message(const std::string& call, const char* what) const {
        return "database error: " + path + ": " + call + ": " + what;
    }

    [[noreturn]] void fail(int rc, const std::string& call) const {
        std::string text = message(call, sqlite3_errmsg(db));
        if (store_detail::is_busy(rc)) throw store_detail::BusyError(text);
        throw Error(kExitDatabase, text);
    }

    sqlite3_stmt* prepare(const char* sql, const std::string& call) {
        auto it = statements.find(sql);
        if (it != statements.end()) return it->second;
        sqlite3_stmt* stmt = nullptr;
        int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
        if (rc != SQLITE_OK) {
            sqlite3_finalize(stmt);
            fail(rc, call);
        }
        statements.emplace(sql, stmt);
        return stmt;
    }

    void exec(const char* sql, const std::string& call) {
        char* err = nullptr;
        int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
        if (rc != SQLITE_OK) {
            std::string text = message(call, err ? err : sqlite3_errstr(rc));
            sqlite3_free(err);
            if (store_detail::is_busy(rc)) throw store_detail::BusyError(text);
            throw Error(kExitDatabase, text);
        }
    }

    void rollback() {
        if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        txn_depth = 0;
    }

    void transaction(const std::function<void()>& fn) {
        if (txn_depth > 0) {
            fn();
            return;
        }
        std::minstd_rand jitter(static_cast<unsigned>(
            store_detail::splitmix64(static_cast<uint64_t>(store_detail::now_ms()) ^ ::getpid())));
        for (int attempt = 0;; ++attempt) {
            try {
                exec("BEGIN IMMEDIATE", "BEGIN IMMEDIATE");
                txn_depth = 1;
                fn();
                exec("COMMIT", "COMMIT");
                txn_depth = 0;
                return;
            } catch (const store_detail::BusyError& e) {
                rollback();
                if (attempt + 1 >= store_detail::kMaxBusyRetries) {
                    throw Error(kExitDatabase, std::string(e.what()) + " (gave up after " +
                                                   std::to_string(store_detail::kMaxBusyRetries) +
                                                   " attempts; fix: stop the other writer of this file)");
                }
                int sleep_ms = std::min(10 << attempt, 1000) + static_cast<int>(jitter() % 10);
                std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
            } catch (...) {
                rollback();
                throw;
            }
        }
    }
};

namespace store_detail {

// A cached statement in use: binds left to right, steps, and resets itself (and its bindings) on scope exit.
class Stmt {
  public:
    Stmt(StoreImpl& impl, const char* sql, const char* call)
        : impl_(impl), stmt_(impl.prepare(sql, call)), call_(call) {}
    ~Stmt() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
    }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& i64(int64_t v) { return check(sqlite3_bind_int64(stmt_, ++arg_, v)); }
    Stmt& real(double v) {
        if (std::isnan(v)) return null();
        return check(sqlite3_bind_double(stmt_, ++arg_, v));
    }
    Stmt& text(const std::string& v) {
        return check(sqlite3_bind_text(stmt_, ++arg_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    }
    Stmt& text_or_null(const std::string& v) { return v.empty() ? null() : text(v); }
    Stmt& blob(const std::string& bytes) {
        if (bytes.empty()) return check(sqlite3_bind_zeroblob(stmt_, ++arg_, 0));
        return check(sqlite3_bind_blob64(stmt_, ++arg_, bytes.data(), bytes.size(), SQLITE_TRANSIENT));
    }
    Stmt& null() { return check(sqlite3_bind_null(stmt_, ++arg_)); }

    bool step() {
        int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        impl_.fail(rc, call_);
    }
    void run() {
        while (step()) {
        }
    }
    // every result row, in the query's order, each made by read_row(*this) from the current row's columns
    template <typename Row, typename ReadRow>
    std::vector<Row> rows(ReadRow read_row) {
        std::vector<Row> out;
        while (step()) out.push_back(read_row(*this));
        return out;
    }

    bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
    int64_t col_i64(int col) const { return sqlite3_column_int64(stmt_, col); }
    int col_int(int col) const { return sqlite3_column_int(stmt_, col); }
    double col_real(int col) const {
        return is_null(col) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(stmt_, col);
    }
    std::optional<int64_t> col_opt_i64(int col) const {
        if (is_null(col)) return std::nullopt;
        return col_i64(col);
    }
    std::string col_text(int col) const {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
        return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
    }
    // (pointer, bytes) of a blob column; pointer may be null for an empty blob
    std::pair<const void*, size_t> col_blob(int col) const {
        const void* p = sqlite3_column_blob(stmt_, col);
        return {p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
    }

  private:
    Stmt& check(int rc) {
        if (rc != SQLITE_OK) impl_.fail(rc, call_);
        return *this;
    }

    StoreImpl& impl_;
    sqlite3_stmt* stmt_;
    const char* call_;
    int arg_ = 0;
};

inline int64_t changes(StoreImpl& impl) { return sqlite3_changes64(impl.db); }

// Throws prophet::Error (exit 5) "database error: <path>: <problem>; fix: <fix>".
using Refuse = std::function<void(const std::string& problem, const std::string& fix)>;

// (application_id, user_version, schema objects) of the open file in one read snapshot; refuses a non-SQLite or
// corrupt file.
void read_store_header(StoreImpl& impl, const Refuse& refuse, int64_t& app_id, int64_t& version, int64_t& objects);
// Refuses a foreign application_id (unless the file is empty) and a schema newer than this prophet's.
void check_store_header(const Refuse& refuse, int64_t app_id, int64_t version, int64_t objects);

// The SQLite URI that opens `path` only to read it (store_read_only.cpp): "file:<path>?mode=ro", or
// "?immutable=1" where a WAL reader could not create its -shm file (the directory cannot be written) and no -wal
// file holds pages the file lacks.
std::string read_only_uri(const std::string& path);

}  // namespace store_detail

}  // namespace prophet
