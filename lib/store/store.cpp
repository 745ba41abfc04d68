// store.cpp: the SQLite store: opening and checking the file, per-run data, maintenance. The runs table is in
// store_runs.cpp, traces in store_traces.cpp, the schema and its migrations in schema.cpp, the connection in
// store_impl.h.
#include "store/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "store/schema.h"
#include "store/store_impl.h"

namespace prophet {

using namespace store_detail;

namespace {

std::string hex32(int64_t v) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", static_cast<unsigned>(static_cast<uint32_t>(v)));
    return text;
}

}  // namespace

namespace store_detail {

// declared in store_impl.h
std::string encode_i64_le(const int64_t* values, size_t n) {
    std::string out(n * 8, '\0');
    if constexpr (std::endian::native == std::endian::little) {
        if (n > 0) std::memcpy(out.data(), values, n * 8);
    } else {
        for (size_t i = 0; i < n; ++i) {
            auto v = static_cast<uint64_t>(values[i]);
            for (int b = 0; b < 8; ++b) out[i * 8 + b] = static_cast<char>((v >> (8 * b)) & 0xff);
        }
    }
    return out;
}

std::vector<int64_t> decode_i64_le(const void* data, size_t bytes) {
    std::vector<int64_t> out(bytes / 8);
    if (out.empty()) return out;
    if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(out.data(), data, out.size() * 8);
    } else {
        const auto* p = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < out.size(); ++i) {
            uint64_t v = 0;
            for (int b = 0; b < 8; ++b) v |= static_cast<uint64_t>(p[i * 8 + b]) << (8 * b);
            out[i] = static_cast<int64_t>(v);
        }
    }
    return out;
}

// 16 lowercase hex chars: 8 bytes of /dev/urandom, or time, pid and a counter mixed when that is unavailable.
std::string random_id() {
    uint64_t bits = 0;
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    if (!urandom || !urandom.read(reinterpret_cast<char*>(&bits), sizeof bits)) {
        static std::atomic<uint64_t> counter{0};
        auto ns = std::chrono::high_resolution_clock::now().time_since_epoch().count();
        bits = splitmix64(static_cast<uint64_t>(ns) ^ (static_cast<uint64_t>(::getpid()) << 32) ^
                          splitmix64(counter.fetch_add(1)));
    }
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
    return text;
}

}  // namespace store_detail

// ---- open ----------------------------------------------------------------------------------------------------

Store::Store(std::unique_ptr<StoreImpl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

const std::string& Store::path() const { return impl_->path; }

namespace store_detail {

void read_store_header(StoreImpl& impl, const Refuse& refuse, int64_t& app_id, int64_t& version, int64_t& objects) {
    const char* query =
        "SELECT (SELECT application_id FROM pragma_application_id), "
        "(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)";
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(impl.db, query, -1, &stmt, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        app_id = sqlite3_column_int64(stmt, 0);
        version = sqlite3_column_int64(stmt, 1);
        objects = sqlite3_column_int64(stmt, 2);
        sqlite3_finalize(stmt);
        return;
    }
    std::string what = sqlite3_errmsg(impl.db);
    sqlite3_finalize(stmt);
    if ((rc & 0xff) == SQLITE_NOTADB)
        refuse("not a SQLite database", "move the file away or set store.path to another file");
    if ((rc & 0xff) == SQLITE_CORRUPT)
        refuse("corrupt SQLite file (" + what + ")",
               "restore it from a backup, or move it away and set store.path to another file");
    impl.fail(rc, "read header");
}

void check_store_header(const Refuse& refuse, int64_t app_id, int64_t version, int64_t objects) {
    if (app_id != kStoreApplicationId && (app_id != 0 || objects > 0))
        refuse("not a prophet database (application_id=" + hex32(app_id) + ", expected " + hex32(kStoreApplicationId) +
                   ")",
               "set store.path to a prophet store or to a new file");
    if (app_id == kStoreApplicationId && version > kStoreSchemaVersion)
        refuse("written by a newer prophet (schema " + std::to_string(version) + " > " +
                   std::to_string(kStoreSchemaVersion) + ")",
               "upgrade prophet or use another store.path");
}

}  // namespace store_detail

namespace {

using store_detail::Refuse;

// The store file's directory created if missing; a directory at the path itself refused.
void prepare_store_path(const std::string& path, const Refuse& refuse) {
    namespace fs = std::filesystem;
    fs::path file(path);
    std::error_code ec;
    if (!file.parent_path().empty()) {
        fs::create_directories(file.parent_path(), ec);
        if (ec) {
            refuse("cannot create directory " + file.parent_path().string() + " (" + ec.message() + ")",
                   "set store.path to a writable location");
        }
    }
    if (fs::is_directory(file, ec)) refuse("is a directory", "set store.path to a file inside it");
}

// The SQLite connection, opened read-write (created if missing) with the busy timeout; a read-only file refused.
std::unique_ptr<StoreImpl> open_connection(const std::string& path, const Refuse& refuse) {
    auto impl = std::make_unique<StoreImpl>();
    impl->path = path;
    const int rc = sqlite3_open_v2(path.c_str(), &impl->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    if (rc != SQLITE_OK) {
        std::string what = impl->db ? sqlite3_errmsg(impl->db) : sqlite3_errstr(rc);
        refuse("cannot open or create the file (" + what + ")",
               "check that the file and its directory are writable, or set store.path to another file");
    }
    sqlite3_busy_timeout(impl->db, kBusyTimeoutMs);
    impl->exec("PRAGMA busy_timeout=10000", "PRAGMA busy_timeout");

    // SQLite falls back to read-only when the file exists but cannot be written.
    if (sqlite3_db_readonly(impl->db, "main") == 1) {
        refuse("the file is read-only", "make it writable or set store.path to another file");
    }
    return impl;
}

// journal_mode cannot change inside a transaction; WAL persists in the file once set. The switch needs an
// exclusive lock and can return SQLITE_BUSY without waiting (another process creating the file), so retry it
// for up to the busy timeout.
void switch_to_wal(StoreImpl& impl, const Refuse& refuse) {
    for (int waited_ms = 0;;) {
        sqlite3_stmt* stmt = nullptr;
        int rc = sqlite3_prepare_v2(impl.db, "PRAGMA journal_mode=WAL", -1, &stmt, nullptr);
        if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
        std::string what = sqlite3_errmsg(impl.db);
        sqlite3_finalize(stmt);
        if (rc == SQLITE_ROW) break;
        if (is_busy(rc) && waited_ms < kBusyTimeoutMs) {
            int sleep_ms = std::min(5 + waited_ms / 4, 200);
            std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
            waited_ms += sleep_ms;
            continue;
        }
        refuse("cannot switch to WAL (" + what + ")",
               "check that the directory is writable (WAL needs a -wal and -shm file next to it) and on a local "
               "file system, or stop the process holding the file and retry");
    }
}

// Creates the schema of a new file or migrates an older one to kStoreSchemaVersion. Foreign keys stay off while
// the schema is created or migrated (schema.h); the pragma is a no-op inside a transaction, so it is set before.
// Two processes may race to create or migrate: the header is re-read under the write lock.
void create_or_migrate(StoreImpl& db, const Refuse& refuse) {
    db.exec("PRAGMA foreign_keys=OFF", "PRAGMA foreign_keys");
    db.transaction([&] {
        int64_t app_id = 0, version = 0, objects = 0;
        store_detail::read_store_header(db, refuse, app_id, version, objects);
        store_detail::check_store_header(refuse, app_id, version, objects);
        if (app_id == kStoreApplicationId && version == kStoreSchemaVersion) return;
        if (app_id != kStoreApplicationId || version == 0) {
            db.exec(store_schema_v1(), "create schema");
            db.exec(("PRAGMA application_id=" + std::to_string(kStoreApplicationId)).c_str(), "PRAGMA application_id");
            version = 1;
        }
        migrate_schema(db, version);
    });
}

}  // namespace

Store Store::open(const std::string& path) {
    const Refuse refuse = [&](const std::string& problem, const std::string& fix) {
        throw Error(kExitDatabase, "database error: " + path + ": " + problem + "; fix: " + fix);
    };
    if (path.empty()) refuse("empty store path", "set store.path to a file, e.g. results/prophet.db");
    prepare_store_path(path, refuse);
    std::unique_ptr<StoreImpl> impl = open_connection(path, refuse);

    // Identify the file before writing anything to it. One statement, so one read snapshot: a concurrent creator
    // commits the schema and both pragmas together.
    int64_t app_id = 0, version = 0, objects = 0;
    store_detail::read_store_header(*impl, refuse, app_id, version, objects);
    store_detail::check_store_header(refuse, app_id, version, objects);
    impl->opened_at_version = app_id == kStoreApplicationId ? static_cast<int>(version) : 0;

    switch_to_wal(*impl, refuse);
    impl->exec("PRAGMA synchronous=NORMAL", "PRAGMA synchronous");
    if (app_id == 0 || version < kStoreSchemaVersion) create_or_migrate(*impl, refuse);
    impl->exec("PRAGMA foreign_keys=ON", "PRAGMA foreign_keys");
    return Store(std::move(impl));
}

void Store::transaction(const std::function<void()>& fn) { impl_->transaction(fn); }

bool Store::in_transaction() const { return impl_->txn_depth > 0; }

// ---- per-run data --------------------------------------------------------------------------------------------

void Store::put_params(const std::string& run_id, const std::vector<std::pair<std::string, std::string>>& params) {
    impl_->transaction([&] {
        for (const auto& [key, value] : params) {
            Stmt s(*impl_,
                   "INSERT INTO params(run_id, key, value) VALUES(?1, ?2, ?3) "
                   "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value",
                   "put_params");
            s.text(run_id).text(key).text(value).run();
        }
    });
}

void Store::put_metric(const std::string& run_id, const std::string& key, int64_t step, double value, int layer,
                       int rank) {
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT OR REPLACE INTO metrics(run_id, key, step, layer, rank, value, is_nan, ts_ms) "
               "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
               "put_metric");
        s.text(run_id).text(key).i64(step).i64(layer).i64(rank).real(value).i64(std::isnan(value) ? 1 : 0);
        s.i64(now_ms()).run();
    });
}

void Store::put_expert_load(const std::string& run_id, int64_t step, int layer, const int64_t* tokens,
                            int num_devices, int num_experts) {
    PROPHET_ASSERT(tokens != nullptr && num_devices >= 1 && num_experts >= 1);
    std::string blob = encode_i64_le(tokens, static_cast<size_t>(num_devices) * num_experts);
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT OR REPLACE INTO expert_load(run_id, step, layer, n_devices, n_experts, tokens) "
               "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
               "put_expert_load");
        s.text(run_id).i64(step).i64(layer).i64(num_devices).i64(num_experts).blob(blob).run();
    });
}

void Store::put_placement_row(const std::string& run_id, int64_t step, int layer, int expert, int replica,
                              int rank) {
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT OR REPLACE INTO placements(run_id, step, layer, expert, replica, rank) "
               "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
               "put_placement_row");
        s.text(run_id).i64(step).i64(layer).i64(expert).i64(replica).i64(rank).run();
    });
}

void Store::put_event(const std::string& run_id, int64_t step, int rank, const std::string& level,
                      const std::string& kind, const std::string& message, const std::string& data_json) {
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT INTO events(run_id, ts_ms, step, rank, level, kind, message, data) "
               "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
               "put_event");
        s.text(run_id).i64(now_ms()).i64(step).i64(rank).text(level).text(kind).text(message);
        s.text_or_null(data_json).run();
    });
}

void Store::put_plan_result(const PlanResultRow& r) {
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT OR REPLACE INTO plan_results(run_id, policy, iteration, layer, predicted_eq6_ms, "
               "predicted_eq8_ms, max_mean_load, balance_std, a2a_bytes, trans_bytes, agg_bytes, replicas, plan_us, "
               "dropped_tokens) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
               "put_plan_result");
        s.text(r.run_id).text(r.policy).i64(r.iteration).i64(r.layer).real(r.predicted_eq6_ms);
        s.real(r.predicted_eq8_ms).real(r.max_mean_load).real(r.balance_std).real(r.a2a_bytes).real(r.trans_bytes);
        s.real(r.agg_bytes).i64(r.replicas).real(r.plan_us).i64(r.dropped_tokens).run();
    });
}

void Store::put_bench(const std::string& run_id, const std::string& name, int rep, double real_ns, double cpu_ns,
                      int64_t iterations, const std::string& counters_json) {
    impl_->transaction([&] {
        Stmt s(*impl_,
               "INSERT OR REPLACE INTO bench(run_id, name, rep, real_ns, cpu_ns, iterations, counters) "
               "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
               "put_bench");
        s.text(run_id).text(name).i64(rep).real(real_ns).real(cpu_ns).i64(iterations).text_or_null(counters_json);
        s.run();
    });
}

std::vector<std::pair<std::string, std::string>> Store::get_params(const std::string& run_id) {
    Stmt s(*impl_, "SELECT key, value FROM params WHERE run_id = ?1 ORDER BY key", "get_params");
    s.text(run_id);
    return s.rows<std::pair<std::string, std::string>>([](Stmt& r) { return std::pair(r.col_text(0), r.col_text(1)); });
}

std::vector<MetricRow> Store::get_metrics(const std::string& run_id, const std::string& key) {
    Stmt s(*impl_,
           "SELECT key, step, layer, rank, value, is_nan, ts_ms FROM metrics WHERE run_id = ?1 "
           "AND (?2 = '' OR key = ?2) ORDER BY key, step, layer, rank",
           "get_metrics");
    s.text(run_id).text(key);
    return s.rows<MetricRow>([](Stmt& s) {
        MetricRow r;
        r.key = s.col_text(0);
        r.step = s.col_i64(1);
        r.layer = s.col_int(2);
        r.rank = s.col_int(3);
        r.value = s.col_i64(5) != 0 ? std::numeric_limits<double>::quiet_NaN() : s.col_real(4);
        r.ts_ms = s.col_i64(6);
        return r;
    });
}

std::optional<ExpertLoadRow> Store::get_expert_load(const std::string& run_id, int64_t step, int layer) {
    Stmt s(*impl_,
           "SELECT n_devices, n_experts, tokens FROM expert_load WHERE run_id = ?1 AND step = ?2 AND layer = ?3",
           "get_expert_load");
    s.text(run_id).i64(step).i64(layer);
    if (!s.step()) return std::nullopt;
    ExpertLoadRow r;
    r.step = step;
    r.layer = layer;
    r.num_devices = s.col_int(0);
    r.num_experts = s.col_int(1);
    auto [data, bytes] = s.col_blob(2);
    r.tokens = decode_i64_le(data, bytes);
    return r;
}

std::vector<PlacementRow> Store::get_placements(const std::string& run_id, int64_t step, int layer) {
    Stmt s(*impl_,
           "SELECT step, layer, expert, replica, rank FROM placements WHERE run_id = ?1 AND step = ?2 AND layer = ?3 "
           "ORDER BY expert, replica",
           "get_placements");
    s.text(run_id).i64(step).i64(layer);
    return s.rows<PlacementRow>([](Stmt& s) {
        return PlacementRow{s.col_i64(0), s.col_int(1), s.col_int(2), s.col_int(3), s.col_int(4)};
    });
}

std::vector<EventRow> Store::get_events(const std::string& run_id) {
    Stmt s(*impl_,
           "SELECT id, ts_ms, step, rank, level, kind, message, data FROM events WHERE run_id = ?1 ORDER BY id",
           "get_events");
    s.text(run_id);
    return s.rows<EventRow>([](Stmt& s) {
        return EventRow{s.col_i64(0),  s.col_i64(1),  s.col_i64(2),  s.col_int(3),
                        s.col_text(4), s.col_text(5), s.col_text(6), s.col_text(7)};
    });
}

std::vector<PlanResultRow> Store::get_plan_results(const std::string& run_id) {
    Stmt s(*impl_,
           "SELECT run_id, policy, iteration, layer, predicted_eq6_ms, predicted_eq8_ms, max_mean_load, balance_std, "
           "a2a_bytes, trans_bytes, agg_bytes, replicas, plan_us, dropped_tokens FROM plan_results WHERE run_id = ?1 "
           "ORDER BY policy, iteration, layer",
           "get_plan_results");
    s.text(run_id);
    return s.rows<PlanResultRow>([](Stmt& s) {
        PlanResultRow r;
        r.run_id = s.col_text(0);
        r.policy = s.col_text(1);
        r.iteration = s.col_i64(2);
        r.layer = s.col_int(3);
        r.predicted_eq6_ms = s.col_real(4);
        r.predicted_eq8_ms = s.col_real(5);
        r.max_mean_load = s.col_real(6);
        r.balance_std = s.col_real(7);
        r.a2a_bytes = s.col_real(8);
        r.trans_bytes = s.col_real(9);
        r.agg_bytes = s.col_real(10);
        r.replicas = s.col_i64(11);
        r.plan_us = s.col_real(12);
        r.dropped_tokens = s.col_i64(13);
        return r;
    });
}

std::vector<BenchRow> Store::get_bench(const std::string& run_id) {
    Stmt s(*impl_,
           "SELECT name, rep, real_ns, cpu_ns, iterations, counters FROM bench WHERE run_id = ?1 ORDER BY name, rep",
           "get_bench");
    s.text(run_id);
    return s.rows<BenchRow>([](Stmt& s) {
        return BenchRow{s.col_text(0), s.col_int(1), s.col_real(2), s.col_real(3), s.col_i64(4), s.col_text(5)};
    });
}

// ---- maintenance ---------------------------------------------------------------------------------------------

std::string Store::integrity_check(bool quick) {
    Stmt s(*impl_, quick ? "PRAGMA quick_check" : "PRAGMA integrity_check", quick ? "quick_check" : "integrity_check");
    std::string result;
    while (s.step()) {
        if (!result.empty()) result += "; ";
        result += s.col_text(0);
    }
    return result;
}

int Store::schema_version() {
    Stmt s(*impl_, "PRAGMA user_version", "schema_version");
    return s.step() ? s.col_int(0) : 0;
}

int Store::opened_at_version() const { return impl_->opened_at_version; }

void Store::checkpoint() {
    PROPHET_ASSERT_MSG(impl_->txn_depth == 0, "checkpoint() inside a transaction");
    // A reader left open must not hold the end of a run for the full busy timeout.
    sqlite3_busy_timeout(impl_->db, 1000);
    sqlite3_wal_checkpoint_v2(impl_->db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    sqlite3_busy_timeout(impl_->db, kBusyTimeoutMs);
}

}  // namespace prophet
