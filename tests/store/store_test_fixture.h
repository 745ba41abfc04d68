// store_test_fixture.h: StoreTest, the fixture of the store's tests (store_test.cpp, store_open_test.cpp): a
// temporary directory with the store path under it, a sample RunInfo, and raw SQLite access for checks and for
// building foreign files.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "store/store.h"

namespace prophet {

class StoreTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string tmpl = (std::filesystem::temp_directory_path() / "prophet_store_test_XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
        db_path_ = (dir_ / "results" / "prophet.db").string();
    }
    void TearDown() override {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    static RunInfo sample_info() {
        RunInfo info;
        info.experiment = "exp_a";
        info.command = "prophet simulate --config x.toml";
        info.config_toml = "[moe]\nnum_experts = 8\n";
        info.config_hash = "abc123";
        info.overrides = "moe.num_experts=8";
        info.git_sha = "deadbeef";
        info.git_dirty = true;
        info.prophet_version = "0.1.0";
        info.seed = 42;
        info.world_size = 4;
        info.backend = "cuda";
        info.hardware_json = R"({"host":"h"})";
        info.simulated = true;
        return info;
    }

    // A second, raw connection for checks independent of Store's own readers.
    int64_t query_int(const std::string& sql) {
        sqlite3* db = nullptr;
        EXPECT_EQ(sqlite3_open_v2(db_path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
        sqlite3_stmt* stmt = nullptr;
        EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
        int64_t v = -1;
        if (sqlite3_step(stmt) == SQLITE_ROW) v = sqlite3_column_int64(stmt, 0);
        sqlite3_finalize(stmt);
        sqlite3_close(db);
        return v;
    }

    // Runs `sql` on a raw read-write connection to `path` (to build foreign or newer files).
    static void raw_exec(const std::string& path, const std::string& sql) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        char* err = nullptr;
        int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
        std::string message = err ? err : "";
        sqlite3_free(err);
        sqlite3_close(db);
        ASSERT_EQ(rc, SQLITE_OK) << message;
    }

    // Expects Store::open(path) to throw exit code 5 with `needle` and the path in the message.
    static void expect_refused(const std::string& path, const std::string& needle) {
        try {
            Store::open(path);
            FAIL() << "open(" << path << ") did not throw";
        } catch (const Error& e) {
            std::string what = e.what();
            EXPECT_EQ(e.exit_code(), kExitDatabase) << what;
            EXPECT_NE(what.find(needle), std::string::npos) << what;
            EXPECT_NE(what.find(path), std::string::npos) << what;
            EXPECT_NE(what.find("fix:"), std::string::npos) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        }
    }

    std::filesystem::path dir_;
    std::string db_path_;
};

}  // namespace prophet
