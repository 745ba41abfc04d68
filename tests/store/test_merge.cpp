// test_merge.cpp: merging shard stores (lib/store/merge.h): every row arrives once, a second merge changes
// nothing, a newer run row replaces a stale one, and a shard of another schema version is refused with exit 5.
#include "store/merge.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "store/store.h"

namespace prophet {
namespace {

class Merge : public testing::TempDirTest {
  protected:
    std::string shard(const std::string& name) { return (dir_ / name).string(); }

    // one finished run with a metric, a param, an event and a plan result
    std::string write_run(const std::string& path, const std::string& experiment, double value) {
        Store store = Store::open(path);
        RunInfo info;
        info.experiment = experiment;
        info.command = "sweep";
        info.config_toml = "x=1\n";
        info.config_hash = experiment + std::to_string(value);
        const std::string id = store.begin_run(info);
        store.put_params(id, {{"balance.policy", "\"static\""}});
        store.put_metric(id, "step_ms", 0, value);
        store.put_event(id, 0, 0, "info", "note", "hello", "");
        PlanResultRow plan;
        plan.run_id = id;
        plan.policy = "static";
        store.put_plan_result(plan);
        store.finish_run(id, "finished", 0, "");
        return id;
    }

    // (runs, metrics, params, events, plan_results) rows of a store
    std::vector<int64_t> counts(const std::string& path) {
        sqlite3* db = nullptr;
        EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
        std::vector<int64_t> out;
        for (const char* table : {"runs", "metrics", "params", "events", "plan_results"}) {
            sqlite3_stmt* stmt = nullptr;
            const std::string sql = std::string("SELECT count(*) FROM ") + table;
            EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
            EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW);
            out.push_back(sqlite3_column_int64(stmt, 0));
            sqlite3_finalize(stmt);
        }
        sqlite3_close(db);
        return out;
    }
};

TEST_F(Merge, EveryRowOnceAndASecondMergeChangesNothing) {
    const std::string a = shard("a.db"), b = shard("b.db");
    const std::string ra = write_run(a, "e", 1.0);
    const std::string rb1 = write_run(b, "e", 2.0);
    const std::string rb2 = write_run(b, "e", 3.0);

    const MergeSummary first = merge_stores({a, b}, db_);
    EXPECT_EQ(first.runs_added, 3);
    EXPECT_EQ(first.runs_total, 3);
    ASSERT_EQ(first.shards.size(), 2u);
    EXPECT_EQ(first.shards[0].runs_added, 1);
    EXPECT_EQ(first.shards[1].runs_added, 2);
    EXPECT_EQ(first.dangling_references, 0);
    // events carry a rowid per shard (both shards have event id 1): both arrive
    EXPECT_EQ(counts(db_), (std::vector<int64_t>{3, 3, 3, 3, 3}));
    Store merged = Store::open(db_);
    for (const auto& [id, value] : std::vector<std::pair<std::string, double>>{{ra, 1.0}, {rb1, 2.0}, {rb2, 3.0}}) {
        EXPECT_EQ(merged.get_run(id).status, "finished");
        const auto m = merged.get_metrics(id, "step_ms");
        ASSERT_EQ(m.size(), 1u);
        EXPECT_EQ(m[0].value, value);
        EXPECT_EQ(merged.get_events(id).size(), 1u);
    }

    const MergeSummary again = merge_stores({a, b, a}, db_);
    EXPECT_EQ(again.rows_added, 0);
    EXPECT_EQ(again.runs_added, 0);
    EXPECT_EQ(counts(db_), (std::vector<int64_t>{3, 3, 3, 3, 3}));
}

TEST_F(Merge, ANewerRunRowReplacesTheRunningOne) {
    // a shard merged while its point ran, then again once it finished
    const std::string a = shard("a.db");
    std::string id;
    {
        Store store = Store::open(a);
        RunInfo info;
        info.experiment = "e";
        info.command = "sweep";
        info.config_toml = "x=1\n";
        info.config_hash = "h";
        id = store.begin_run(info);
    }
    merge_stores({a}, db_);
    EXPECT_EQ(Store::open(db_).get_run(id).status, "running");
    {
        Store store = Store::open(a);
        store.put_metric(id, "final_loss", 0, 2.5);
        store.finish_run(id, "finished", 0, "");
    }
    const MergeSummary s = merge_stores({a}, db_);
    EXPECT_EQ(s.runs_added, 0);
    EXPECT_EQ(Store::open(db_).get_run(id).status, "finished");
    EXPECT_EQ(Store::open(db_).get_metrics(id, "final_loss").size(), 1u);
    EXPECT_EQ(merge_stores({a}, db_).rows_added, 0);  // and then nothing more
}

TEST_F(Merge, AShardOfAnotherSchemaVersionIsRefusedWithExit5) {
    const std::string a = shard("a.db"), other = shard("other.db");
    write_run(a, "e", 1.0);
    write_run(other, "e", 2.0);
    {  // the file a prophet of the next schema version would have written
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
        const std::string sql = "PRAGMA user_version=" + std::to_string(kStoreSchemaVersion + 1);
        ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }
    try {
        merge_stores({a, other}, db_);
        FAIL() << "merged a shard of schema version " << kStoreSchemaVersion + 1;
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitDatabase);
        const std::string what = e.what();
        EXPECT_NE(what.find(other), std::string::npos) << what;
        EXPECT_NE(what.find("schema version " + std::to_string(kStoreSchemaVersion + 1)), std::string::npos) << what;
        EXPECT_NE(what.find("schema version " + std::to_string(kStoreSchemaVersion) + ";"), std::string::npos) << what;
    }
    // refused before anything was written: not even the valid first shard
    EXPECT_EQ(counts(db_)[0], 0);
}

TEST_F(Merge, AForeignFileOrTheTargetItselfIsRefused) {
    const std::string text = shard("notes.db");
    FILE* f = std::fopen(text.c_str(), "w");
    std::fputs("not a database, just text that is long enough to fill a header..........................", f);
    std::fclose(f);
    try {
        merge_stores({text}, db_);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitDatabase);
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
    try {
        merge_stores({db_}, db_);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
    }
}

}  // namespace
}  // namespace prophet
