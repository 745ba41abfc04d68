// ci/bench-regress.sh as CI runs it: the quick mode passes against the committed baseline (and records its rows,
// the 2-rank pinned step among them); a baseline edited to be better than this build (one deterministic figure
// changed, one timing made 10x faster, one instruction count 3% lower) makes it fail after re-measuring, naming
// the three rows; an injected slowdown of the training step (--inject-slowdown, test only) fails both training
// rows and no other, each repeat recorded beside the unslowed build's; report/fig_bench_history.py draws
// history.jsonl. The script needs the bench/ binaries of the build and mpirun.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/cli_util.h"
#include "../temp_dir_test.h"
#include "store/store.h"

namespace fs = std::filesystem;

namespace {

struct Script {
    int exit_code = -1;
    std::string out;  // stdout and stderr
};

fs::path build_dir() { return fs::path(PROPHET_BINARY).parent_path(); }

// runs the script from the repository root (under the tests' child guard); its stdout and stderr together
Script bench_regress(const std::string& args, const fs::path& dir) {
    const auto r = prophet::testing::run_command(
        "sh -c \"ci/bench-regress.sh --build '" + build_dir().string() + "' " + args + " 2>&1\"", dir);
    return {r.exit_code, r.out + r.err};
}

// the verdict column of the row `name` in the script's table ("" when the row is not printed)
std::string verdict(const std::string& out, const std::string& name) {
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("time ", 0) != 0) continue;  // kind column, padded
        const size_t row = line.find_first_not_of(' ', 4);
        if (row != std::string::npos && line.compare(row, name.size() + 1, name + " ") == 0)
            return line.substr(line.find_last_of(' ') + 1);
    }
    return "";
}

// What a bench row bench-regress recorded holds, by its name: an exact figure, an instruction count or a timing.
enum class RowKind { kExact, kInstructions, kTimed };
RowKind row_kind(const std::string& name) {
    if (name.rfind("exact: ", 0) == 0) return RowKind::kExact;
    if (name.rfind("instructions ", 0) == 0) return RowKind::kInstructions;
    return RowKind::kTimed;
}

class BenchRegress : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        if (!fs::exists(build_dir() / "bench" / "bench_planner") || !fs::exists(build_dir() / "bench" / "bench_model_step"))
            GTEST_SKIP() << "bench/ not built (PROPHET_BUILD_BENCH=OFF)";
        if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed (the 2-rank step)";
        TempDirTest::SetUp();
    }
};

}  // namespace

TEST_F(BenchRegress, QuickModePassesAgainstTheCommittedBaselineAndRecordsEveryRow) {
    const Script r = bench_regress("--quick --db " + db_, dir_);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(verdict(r.out, "train_step tiny tokens/s"), "ok") << r.out;
    // recorded but not judged in quick mode against the committed baseline (ctest -j2 shares the two cores)
    EXPECT_EQ(verdict(r.out, "train_step 2-rank pinned tokens/s"), "info") << r.out;
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs("bench-regress");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "finished");
    EXPECT_FALSE(runs[0].info.git_sha.empty());
    const auto rows = store.get_bench(runs[0].run_id);
    int exact = 0, instructions = 0, timed = 0;
    for (const prophet::BenchRow& row : rows) {
        const RowKind kind = row_kind(row.name);
        exact += kind == RowKind::kExact;
        instructions += kind == RowKind::kInstructions;
        timed += kind == RowKind::kTimed;
    }
    // 8 policies x (dropped tokens + 3 system models x 7 fields)
    EXPECT_GE(exact, 8 * (1 + 3 * 7)) << "every deterministic figure is recorded";
    EXPECT_EQ(instructions, 3 * 2) << "prophet, fastermoe, eplb x 2 planner sizes";
    EXPECT_EQ(timed, 2 * 8) << "2 repeats x (6 planner rows + one-rank and 2-rank training)";
    EXPECT_EQ(store.integrity_check(), "ok");
    // the history figure draws these rows
    const fs::path figures = dir_ / "figures";
    const auto draw = prophet::testing::run_command("/usr/bin/python3 report/fig_bench_history.py --db '" + db_ +
                                                        "' --history '' --out '" + figures.string() + "'",
                                                    dir_, 300);
    EXPECT_EQ(draw.exit_code, 0) << draw.err;
    EXPECT_TRUE(fs::exists(figures / "fig_bench_history.png"));
}

TEST_F(BenchRegress, InjectedRegressionFailsAfterReMeasuring) {
    std::ifstream in(std::string(PROPHET_SOURCE_DIR) + "/results/baselines/bench.json");
    nlohmann::json baseline = nlohmann::json::parse(in);
    const std::string det = "plan zipf-e16-k2@hpwnv-16 prophet eq6.a2a_bytes";
    const std::string timed = "BM_plan_prophet/E:32/D:16";
    const std::string counted = "instructions plan_fastermoe/E:32/D:16 per plan";
    ASSERT_TRUE(baseline["deterministic"].contains(det));
    ASSERT_TRUE(baseline["timings"].contains(timed));
    ASSERT_TRUE(baseline["instructions"].contains(counted));
    baseline["deterministic"][det] = baseline["deterministic"][det].get<double>() * 0.999;
    // 10% fewer: far past the 2% threshold, so a planner change that lowers the real count a few percent (as the
    // cost model's single accounting did, ~5%) does not hide the injected regression before the baseline is updated
    baseline["instructions"][counted] = baseline["instructions"][counted].get<double>() * 0.90;
    baseline["timings"][timed]["value"] = baseline["timings"][timed]["value"].get<double>() / 10;
    const std::string edited = (dir_ / "bench.json").string();
    std::ofstream(edited) << baseline.dump(1);
    const Script r = bench_regress("--quick --repeats 1 --baseline " + edited + " --db " + db_, dir_);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("measuring again"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("MISMATCH"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("REGRESSION"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("confirmed regression in 3 row(s)"), std::string::npos) << r.out;
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs("bench-regress");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "failed");
    EXPECT_NE(runs[0].error.find(timed), std::string::npos) << runs[0].error;
    EXPECT_NE(runs[0].error.find(counted), std::string::npos) << runs[0].error;
}

// The acceptance path of the gate (docs/reliability.md): debug.slow_step_pct / --slow-step-pct make both training
// rows slower and nothing else. Paired against the same build without the injection (--against), as the 3+3 check
// can be run, so the machine's load falls on both sides. 900% (10x the step) against a 300% threshold (fails
// beyond 4x): the training rows read 0.09-0.10 of the unslowed build's throughput, 2.5x inside the 0.25 they must
// stay below, and a planner row must slow 4x to flake. The planner rows are short CPU-time runs whose paired ratio
// moves far in one repeat: 0.57 to 1.74 over 3 runs x 4 repeats x 6 rows on a quiet machine (2026-12-07), and at
// 400% against 100% (a planner row failing beyond 2x) this test failed once in CI while running alone (RUN_SERIAL,
// tests/test_costs.cmake). The 20% check is the full mode's (threshold 10%), run by hand on a quiet machine.
TEST_F(BenchRegress, InjectedTrainingSlowdownFailsBothTrainingRowsOnly) {
    const Script r = bench_regress("--quick --repeats 1 --threshold 3.0 --inject-slowdown 900 --against '" +
                                       build_dir().string() + "' --db " + db_,
                                   dir_);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(verdict(r.out, "train_step tiny tokens/s"), "REGRESSION") << r.out;
    EXPECT_EQ(verdict(r.out, "train_step 2-rank pinned tokens/s"), "REGRESSION") << r.out;
    EXPECT_EQ(verdict(r.out, "BM_plan_prophet/E:32/D:16"), "ok") << r.out;
    EXPECT_NE(r.out.find("confirmed regression in 2 row(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("INJECTED slowdown 900%"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("ratio = median paired ratio"), std::string::npos) << r.out;
    // every repeat is recorded with the unslowed build's figure of the same repeat, so its paired ratio can be read
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs("bench-regress");
    ASSERT_EQ(runs.size(), 1u);
    int training_repeats = 0;
    for (const prophet::BenchRow& row : store.get_bench(runs[0].run_id)) {
        if (row_kind(row.name) != RowKind::kTimed) continue;
        const nlohmann::json counters = nlohmann::json::parse(row.counters_json);
        ASSERT_TRUE(counters.contains("against_normalized")) << row.name << " " << row.counters_json;
        if (row.name != "train_step tiny tokens/s") continue;
        ++training_repeats;
        EXPECT_LT(counters["normalized"].get<double>() / counters["against_normalized"].get<double>(), 0.25)
            << "repeat " << row.rep << ": 900% slower is 0.1 of the unslowed throughput";
    }
    EXPECT_EQ(training_repeats, 4) << "--repeats 1 rounded up to 2 (ABBA), then 2 more after the suspects";
}

// history.jsonl (one line per landed change) is drawn without any store
TEST_F(BenchRegress, HistoryFigureDrawsHistoryJsonl) {
    const fs::path history = dir_ / "history.jsonl";
    std::ofstream(history) << R"({"commit": "aaaaaaaaaaaa", "timings": {"train_step tiny tokens/s": {"value": 600, "better": "higher", "unit": "u"}}, "instructions": {"instructions plan_eplb/E:32/D:16 per plan": 70000}})" "\n"
                           << R"({"commit": "bbbbbbbbbbbb", "timings": {"train_step tiny tokens/s": {"value": 480, "better": "higher", "unit": "u"}}, "instructions": {"instructions plan_eplb/E:32/D:16 per plan": 70000}})" "\n";
    const auto r = prophet::testing::run_command("/usr/bin/python3 report/fig_bench_history.py --db '" +
                                                     (dir_ / "none.db").string() + "' --history '" + history.string() +
                                                     "' --out '" + (dir_ / "figures").string() + "'",
                                                 dir_, 300);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir_ / "figures" / "fig_bench_history.png"));
    // the second commit's training throughput relative to the first: 480 / 600
    EXPECT_NE(r.out.find("| 1:bbbbbbbb | train_step tiny tokens/s | 0.800 |"), std::string::npos) << r.out;
}
