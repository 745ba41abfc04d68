// test_store_cli.cpp: `prophet db check`, `prophet runs`, `prophet ckpt show`, and the lost-run paths they serve
// (docs/reliability.md "A run whose rank 0 dies"): a training run whose only rank is SIGKILLed stays `running`
// until `db check --repair` or the next sweep marks it `lost`; `--resume` closes the run it continues.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../temp_dir_test.h"
#include "cli_util.h"

namespace prophet::testing {
namespace {

using nlohmann::json;

// Every child is bounded: a regression that hangs fails the test instead of CI.
constexpr const char* kBounded = "timeout -s KILL 120";

class StoreCliTest : public TempDirTest {
  protected:
    CliResult prophet(const std::string& args) { return run_prophet(kBounded, args, dir_); }

    // A tiny one-rank training run into db_; `extra` adds --set/--save/--resume options.
    CliResult train(const std::string& extra) {
        return prophet("train --config experiments/models/tiny.toml --set store.path='" + db_ + "' " + extra);
    }

    // One-rank training SIGKILLed at the start of step 4 (after checkpoints of steps 1 and 3 under ckpt/):
    // what an OOM kill of rank 0 leaves. Returns its run id, read from the store.
    std::string killed_training_run() {
        const CliResult r = train("--set train.steps=6 --save --set train.save_every=2 --set train.checkpoint_dir='" +
                                  (dir_ / "ckpt").string() +
                                  "' --set debug.fail_rank=0 --set debug.fail_step=4 --set debug.fail_mode=kill");
        EXPECT_EQ(r.exit_code, 137) << "SIGKILL expected; stderr: " << r.err;  // 128 + 9, as timeout reports it
        const json runs = runs_json("");
        EXPECT_EQ(runs.size(), 1u) << runs.dump();
        if (runs.size() != 1) return "";
        EXPECT_EQ(runs[0]["status"], "running");
        return runs[0]["run_id"].get<std::string>();
    }

    json runs_json(const std::string& filters) {
        const CliResult r = prophet("runs --db '" + db_ + "' --json " + filters);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return json::parse(r.out.empty() ? "null" : r.out);
    }

    json show_json(const std::string& run_id) {
        const CliResult r = prophet("runs show " + run_id + " --db '" + db_ + "' --json");
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return json::parse(r.out.empty() ? "null" : r.out);
    }
};

TEST_F(StoreCliTest, MissingStoreIsExitFiveCreatingNoFile) {
    for (const char* command : {"db check", "runs", "runs show 0123456789abcdef"}) {
        const CliResult r = prophet(std::string(command) + " --db '" + db_ + "'");
        EXPECT_EQ(r.exit_code, 5) << command << ": " << r.err;
        EXPECT_NE(r.err.find(db_), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("no such store file"), std::string::npos) << r.err;
        EXPECT_FALSE(std::filesystem::exists(db_)) << command;
    }
}

TEST_F(StoreCliTest, HelpTeachesEachCommand) {
    for (const char* command : {"runs", "db check", "ckpt show"}) {
        const CliResult r = prophet(std::string(command) + " --help");
        EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
        EXPECT_NE(r.out.find("Examples:"), std::string::npos) << command << ": " << r.out;
    }
}

TEST_F(StoreCliTest, RankZeroKilledLeavesARunThatDbCheckFindsAndRepairMarksLost) {
    const std::string id = killed_training_run();
    ASSERT_FALSE(id.empty());

    CliResult check = prophet("db check --db '" + db_ + "'");
    EXPECT_EQ(check.exit_code, 5) << check.out << check.err;
    EXPECT_NE(check.out.find("integrity ok"), std::string::npos) << check.out;
    // the run lock (issue 26 item 7) is what proves the killed rank 0 gone, not its pid
    EXPECT_NE(check.out.find(id + " (train): lost: its run lock is free"), std::string::npos) << check.out;
    EXPECT_NE(check.err.find("--repair"), std::string::npos) << check.err;
    EXPECT_EQ(runs_json("--status running").size(), 1u);  // a check alone writes nothing

    const CliResult repair = prophet("db check --repair --json --db '" + db_ + "'");
    EXPECT_EQ(repair.exit_code, 0) << repair.out << repair.err;
    const json report = json::parse(repair.out);
    ASSERT_EQ(report["repaired"].size(), 1u) << repair.out;
    EXPECT_EQ(report["repaired"][0]["run_id"], id);
    EXPECT_EQ(report["status_counts"]["lost"], 1);
    EXPECT_TRUE(report["ok"].get<bool>());

    const json run = show_json(id);
    EXPECT_EQ(run["status"], "lost");
    EXPECT_EQ(run["ended_ms"], run["heartbeat_ms"]);  // ended at its last sign of life
    EXPECT_EQ(run["events"]["lost"], 1);
    EXPECT_EQ(run["metrics"]["loss"]["rows"], 4);  // steps 0..3 were recorded before the kill

    check = prophet("db check --db '" + db_ + "'");
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    EXPECT_NE(check.out.find("runs: 1 lost"), std::string::npos) << check.out;
}

TEST_F(StoreCliTest, DbCheckNamesATraceWhoseBlobWasDamaged) {
    const CliResult imported = prophet("trace import experiments/traces/tiny-e4-d4.toml --store '" + db_ + "'");
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    CliResult check = prophet("db check --db '" + db_ + "'");
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    EXPECT_NE(check.out.find("traces: 1, 0 unreadable"), std::string::npos) << check.out;
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE traces SET counts = x'0102'", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    check = prophet("db check --db '" + db_ + "'");
    EXPECT_EQ(check.exit_code, 5) << check.out << check.err;
    EXPECT_NE(check.out.find("bad trace: "), std::string::npos) << check.out;
    EXPECT_NE(check.out.find("is corrupt: counts blob has 2 bytes"), std::string::npos) << check.out;
}

TEST_F(StoreCliTest, SweepStartMarksTheDeadRunLost) {
    const std::string id = killed_training_run();
    ASSERT_FALSE(id.empty());
    const CliResult sweep = prophet("sweep experiments/sweeps/smoke.toml --max-points 1 --no-report --set store.path='" +
                                    db_ + "'");
    EXPECT_EQ(sweep.exit_code, 0) << sweep.err;
    EXPECT_NE(sweep.err.find("run " + id), std::string::npos) << sweep.err;
    EXPECT_EQ(show_json(id)["status"], "lost");
    EXPECT_TRUE(runs_json("--status running").empty());
}

TEST_F(StoreCliTest, ResumeClosesTheRunItContinues) {
    const std::string old_id = killed_training_run();
    ASSERT_FALSE(old_id.empty());
    const CliResult resumed = train("--set train.steps=6 --set train.checkpoint_dir='" + (dir_ / "ckpt2").string() +
                                    "' --resume '" + (dir_ / "ckpt").string() + "'");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const json finished = runs_json("--status finished");
    ASSERT_EQ(finished.size(), 1u);
    const std::string new_id = finished[0]["run_id"];
    EXPECT_EQ(finished[0]["resumed_from_step"], 4);

    const json old_run = show_json(old_id);
    EXPECT_EQ(old_run["status"], "resumed");
    EXPECT_EQ(old_run["resumed_by"], new_id);
    EXPECT_EQ(old_run["ended_ms"], old_run["heartbeat_ms"]);
    EXPECT_TRUE(runs_json("--status running").empty());
}

TEST_F(StoreCliTest, RunsListsFiltersShowsAndCompares) {
    ASSERT_EQ(train("--set train.steps=3 --set balance.policy=static").exit_code, 0);
    ASSERT_EQ(train("--set train.steps=3 --set balance.policy=prophet --set run.experiment=other").exit_code, 0);
    const json all = runs_json("");
    ASSERT_EQ(all.size(), 2u);
    const json prophet_runs = runs_json("--policy prophet");
    ASSERT_EQ(prophet_runs.size(), 1u);
    EXPECT_EQ(prophet_runs[0]["policy"], "prophet");
    const std::string a = prophet_runs[0]["run_id"];
    const std::string b = all[0]["run_id"] == a ? all[1]["run_id"] : all[0]["run_id"];
    EXPECT_EQ(runs_json("--experiment other").size(), 1u);
    EXPECT_TRUE(runs_json("--status failed").empty());
    EXPECT_EQ(runs_json("--limit 1").size(), 1u);

    const CliResult table = prophet("runs --db '" + db_ + "'");
    EXPECT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find(a), std::string::npos) << table.out;
    EXPECT_NE(table.out.find(b), std::string::npos) << table.out;

    const json shown = show_json(a);
    EXPECT_EQ(shown["params"]["balance.policy"], "\"prophet\"");
    EXPECT_EQ(shown["metrics"]["loss"]["rows"], 3);
    EXPECT_EQ(shown["metrics"]["loss"]["last_step"], 2);

    const CliResult compare = prophet("runs compare " + a + " " + b + " --db '" + db_ + "' --json");
    ASSERT_EQ(compare.exit_code, 0) << compare.err;
    const json diff = json::parse(compare.out);
    ASSERT_TRUE(diff["params"].contains("balance.policy")) << compare.out;
    EXPECT_EQ(diff["params"]["balance.policy"], json({"\"prophet\"", "\"static\""}));
    EXPECT_FALSE(diff["params"].contains("train.steps")) << "equal params are not a difference";
    EXPECT_EQ(diff["metrics"]["loss"].size(), 2u);

    const CliResult missing = prophet("runs show ffffffffffffffff --db '" + db_ + "'");
    EXPECT_EQ(missing.exit_code, 3) << missing.err;
    EXPECT_NE(missing.err.find("no run 'ffffffffffffffff'"), std::string::npos) << missing.err;
    const CliResult bad_status = prophet("runs --status bogus --db '" + db_ + "'");
    EXPECT_EQ(bad_status.exit_code, 2) << bad_status.err;
    EXPECT_NE(bad_status.err.find("bogus"), std::string::npos) << bad_status.err;
}

TEST_F(StoreCliTest, CkptShowListsStepsTensorsSizesAndPolicyState) {
    const std::string ckpt = (dir_ / "ckpt").string();
    ASSERT_EQ(train("--set train.steps=5 --set balance.policy=prophet --save --set train.save_every=2 "
                    "--set train.checkpoint_dir='" + ckpt + "'")
                  .exit_code,
              0);
    const CliResult r = prophet("ckpt show '" + ckpt + "' --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json info = json::parse(r.out);
    EXPECT_EQ(info["step"], 4);
    std::vector<std::string> steps;
    for (const json& s : info["steps"]) steps.push_back(s["name"]);
    EXPECT_EQ(steps, (std::vector<std::string>{"step-00000001", "step-00000003", "step-00000004"}));
    EXPECT_EQ(info["config_hash"].get<std::string>().size(), 64u);
    EXPECT_EQ(info["policy_state"]["policy"], "prophet");
    ASSERT_FALSE(info["model"]["tensors"].empty());
    for (const json& t : info["model"]["tensors"]) {
        int64_t elements = 1;
        for (const json& d : t["shape"]) elements *= d.get<int64_t>();
        EXPECT_EQ(t["bytes"].get<int64_t>(), 4 * elements) << t.dump();  // F32
    }
    EXPECT_EQ(info["optimizer"]["tensors"].size(), 2 * info["model"]["tensors"].size());  // m and v

    const CliResult text = prophet("ckpt show '" + ckpt + "/step-00000003'");
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("step 3,"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("policy state: "), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("h.0.attn.qkv.w"), std::string::npos) << text.out;

    const CliResult missing = prophet("ckpt show '" + (dir_ / "nope").string() + "'");
    EXPECT_EQ(missing.exit_code, 3) << missing.err;
    EXPECT_NE(missing.err.find("nope"), std::string::npos) << missing.err;
    std::ofstream(ckpt + "/step-00000004/state.json") << "{ not json";
    const CliResult corrupt = prophet("ckpt show '" + ckpt + "'");
    EXPECT_EQ(corrupt.exit_code, 3) << corrupt.err;
    EXPECT_NE(corrupt.err.find("step-00000004/state.json"), std::string::npos) << corrupt.err;
}

}  // namespace
}  // namespace prophet::testing
