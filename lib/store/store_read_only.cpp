// store_read_only.cpp: Store::open_read_only and the read-only SQLite URI (store.h, store_impl.h).
//
// A WAL store is read through its -shm index, which a reader creates when it is missing: in a directory that cannot
// be written (a read-only mount, chmod a-w, chattr +i) a plain read-only open fails with "unable to open database
// file". When no -wal file holds pages (a store closed cleanly has none), the file is the whole store, and SQLite's
// immutable=1 reads it without -shm or locks; with a -wal file, mode=ro reads it through the existing -shm.
#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "store/schema.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace prophet {

namespace fs = std::filesystem;

namespace store_detail {

namespace {

// a path inside a file: URI: every byte but letters, digits and - . _ ~ / percent-encoded
std::string uri_path(const std::string& path) {
    std::string out;
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
            out += static_cast<char>(c);
        } else {
            char hex[4];
            std::snprintf(hex, sizeof hex, "%%%02X", c);
            out += hex;
        }
    }
    return out;
}

}  // namespace

std::string read_only_uri(const std::string& path) {
    const fs::path file = fs::absolute(path);
    std::error_code ec;
    const uintmax_t wal_bytes = fs::file_size(file.string() + "-wal", ec);
    const bool wal_pending = !ec && wal_bytes > 0;
    const bool dir_writable = ::access(file.parent_path().c_str(), W_OK) == 0;
    return "file:" + uri_path(file.string()) + (dir_writable || wal_pending ? "?mode=ro" : "?immutable=1");
}

}  // namespace store_detail

using namespace store_detail;

Store Store::open_read_only(const std::string& path) {
    auto refuse = [&](const std::string& problem, const std::string& fix) {
        throw Error(kExitDatabase, "database error: " + path + ": " + problem + "; fix: " + fix);
    };
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
        refuse("no such store file", "pass --db FILE (runs record into store.path, default results/prophet.db)");
    auto impl = std::make_unique<StoreImpl>();
    impl->path = path;
    const std::string uri = read_only_uri(path);
    const int rc = sqlite3_open_v2(uri.c_str(), &impl->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
    if (rc != SQLITE_OK)
        refuse("cannot open the file to read it (" +
                   std::string(impl->db ? sqlite3_errmsg(impl->db) : sqlite3_errstr(rc)) + ")",
               "check that the file is readable");
    sqlite3_busy_timeout(impl->db, kBusyTimeoutMs);
    int64_t app_id = 0, version = 0, objects = 0;
    read_store_header(*impl, refuse, app_id, version, objects);
    check_store_header(refuse, app_id, version, objects);
    if (app_id != kStoreApplicationId)
        refuse("an empty file, not a prophet store yet", "pass a store that prophet has written runs into");
    if (version < kStoreSchemaVersion)
        refuse("schema version " + std::to_string(version) + " is older than this prophet's " +
                   std::to_string(kStoreSchemaVersion) + " and a read-only open cannot migrate it",
               "open it once with a writing command where it is writable (e.g. prophet db check on a copy)");
    impl->opened_at_version = static_cast<int>(version);
    return Store(std::move(impl));
}

}  // namespace prophet
