// ci/bench-regress.sh as CI runs it: the quick mode passes against the committed baseline (and records its rows),
// and a baseline edited to be better than this build (one deterministic figure changed, one timing made 10x
// faster, one instruction count 3% lower) makes it fail after re-measuring, naming the three rows. The script needs the bench/ binaries of the build.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "../temp_dir_test.h"
#include "store/store.h"

namespace fs = std::filesystem;

namespace {

struct Script {
    int exit_code = -1;
    std::string out;  // stdout and stderr
};

fs::path build_dir() { return fs::path(PROPHET_BINARY).parent_path(); }

// runs the script from the repository root; its stdout and stderr together, via a file under dir
Script bench_regress(const std::string& args, const fs::path& dir) {
    const std::string log = (dir / "bench-regress.log").string();
    const int status = std::system((std::string("cd '") + PROPHET_SOURCE_DIR + "' && ci/bench-regress.sh --build '" +
                                    build_dir().string() + "' " + args + " >'" + log + "' 2>&1")
                                       .c_str());
    std::ifstream in(log);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
}

class BenchRegress : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        if (!fs::exists(build_dir() / "bench" / "bench_planner") || !fs::exists(build_dir() / "bench" / "bench_model_step"))
            GTEST_SKIP() << "bench/ not built (PROPHET_BUILD_BENCH=OFF)";
        TempDirTest::SetUp();
    }
};

}  // namespace

TEST_F(BenchRegress, QuickModePassesAgainstTheCommittedBaselineAndRecordsEveryRow) {
    const Script r = bench_regress("--quick --db " + db_, dir_);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("train_step tiny tokens/s"), std::string::npos) << r.out;
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs("bench-regress");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "finished");
    EXPECT_FALSE(runs[0].info.git_sha.empty());
    const auto rows = store.get_bench(runs[0].run_id);
    int exact = 0, instructions = 0, timed = 0;
    for (const prophet::BenchRow& row : rows) {
        if (row.name.rfind("exact: ", 0) == 0)
            ++exact;
        else if (row.name.rfind("instructions ", 0) == 0)
            ++instructions;
        else
            ++timed;
    }
    EXPECT_GE(exact, 7 * 9) << "every deterministic figure is recorded";
    EXPECT_EQ(instructions, 3 * 2) << "prophet, fastermoe, eplb x 2 planner sizes";
    EXPECT_GE(timed, 2 * 7) << "2 repeats x (6 planner rows + training)";
    EXPECT_EQ(store.integrity_check(), "ok");
    // the history figure draws these rows
    const fs::path figures = dir_ / "figures";
    const std::string draw = std::string("cd '") + PROPHET_SOURCE_DIR + "' && /usr/bin/python3 report/fig_bench_history.py --db '" +
                             db_ + "' --out '" + figures.string() + "' >/dev/null 2>&1";
    EXPECT_EQ(std::system(draw.c_str()), 0);
    EXPECT_TRUE(fs::exists(figures / "fig_bench_history.png"));
}

TEST_F(BenchRegress, InjectedRegressionFailsAfterReMeasuring) {
    std::ifstream in(std::string(PROPHET_SOURCE_DIR) + "/results/baselines/bench.json");
    nlohmann::json baseline = nlohmann::json::parse(in);
    const std::string det = "plan zipf-e16-k2@hpwnv-16 prophet a2a_bytes";
    const std::string timed = "BM_plan_prophet/E:32/D:16";
    const std::string counted = "instructions plan_fastermoe/E:32/D:16 per plan";
    ASSERT_TRUE(baseline["deterministic"].contains(det));
    ASSERT_TRUE(baseline["timings"].contains(timed));
    ASSERT_TRUE(baseline["instructions"].contains(counted));
    baseline["deterministic"][det] = baseline["deterministic"][det].get<double>() * 0.999;
    baseline["instructions"][counted] = baseline["instructions"][counted].get<double>() * 0.97;  // 3% fewer
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
