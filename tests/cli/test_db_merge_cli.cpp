// `prophet db merge` as a user runs it: two shards written by `prophet sweep --points` (what Slurm array tasks
// run) merge into one store with every point once; merging again adds nothing; a shard of another schema version
// exits 5 naming the file and both versions. Runs everywhere (no Slurm needed).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "store/store.h"

namespace {

class DbMergeCli : public prophet::testing::TempDirTest {
  protected:
    prophet::testing::CliResult prophet(const std::string& args) {
        return prophet::testing::run_prophet("timeout -s KILL 120", args, dir_);
    }
};

TEST_F(DbMergeCli, MergesShardsOnceAndRefusesAnotherSchema) {
    const std::string a = (dir_ / "a.db").string(), b = (dir_ / "b.db").string();
    // smoke: 6 points; shard a runs 1-2, shard b 2-6 (point 2 in both, as after a re-submission)
    ASSERT_EQ(prophet("sweep experiments/sweeps/smoke.toml --no-report --points 1,2 --set store.path=" + a).exit_code,
              0);
    ASSERT_EQ(prophet("sweep experiments/sweeps/smoke.toml --no-report --points 2,3,4,5,6 --set store.path=" + b)
                  .exit_code,
              0);
    const auto first = prophet("db merge " + a + " " + b + " --into " + db_ + " --json");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const auto j = nlohmann::json::parse(first.out);
    EXPECT_EQ(j["runs_added"], 7);  // point 2 ran in both shards: two runs, both kept
    EXPECT_EQ(j["runs_total"], 7);
    const auto again = prophet("db merge " + a + " " + b + " --into " + db_);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("0 run(s) added, 7 in total"), std::string::npos) << again.out;
    // a resumed local sweep on the merged store finds all 6 points done
    const auto dry = prophet("sweep experiments/sweeps/smoke.toml --dry-run --json --set store.path=" + db_);
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_EQ(nlohmann::json::parse(dry.out)["already_done"], 6);

    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(b.c_str(), &db), SQLITE_OK);
    const std::string bump = "PRAGMA user_version=" + std::to_string(prophet::kStoreSchemaVersion + 1);
    ASSERT_EQ(sqlite3_exec(db, bump.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    const auto refused = prophet("db merge " + b + " --into " + db_);
    EXPECT_EQ(refused.exit_code, 5) << refused.err;
    EXPECT_NE(refused.err.find(b + " has schema version " + std::to_string(prophet::kStoreSchemaVersion + 1)),
              std::string::npos)
        << refused.err;
}

}  // namespace
