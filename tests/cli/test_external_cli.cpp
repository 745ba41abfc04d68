// test_external_cli.cpp: `prophet policies`, and external policies (balance.policy = external) as a user runs them:
// in `prophet plan` (bit-identical rows when the answer equals a built-in's; every misbehaviour a clear error and a
// failed run in the store), in a sim sweep, and in `prophet train` on 2 MPI ranks (losses equal static's).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../temp_dir_test.h"
#include "balance/policies.h"
#include "cli_util.h"
#include "core/error.h"
#include "store/store.h"

namespace fs = std::filesystem;
using prophet::testing::CliResult;
using prophet::testing::run_prophet;

namespace {

const std::string kExample = "/usr/bin/python3 experiments/policies/hottest_to_least_loaded.py";
const std::string kFixture = "/usr/bin/python3 tests/fixtures/external_policy_fixture.py";

class ExternalCli : public prophet::testing::TempDirTest {
  protected:
    // plan on the tiny trace (E = D = 4, L = 2, I = 4) into the test store
    CliResult plan(const std::string& extra) {
        return run_prophet("",
                           "plan --trace experiments/traces/tiny-e4-d4.toml --cluster "
                           "experiments/clusters/moetuner-h100-ep4.toml --set store.path=" +
                               db_ + " --set plan.repeats=1 " + extra,
                           dir_);
    }
    CliResult plan_external(const std::string& command, const std::string& extra = "") {
        return plan("--policy external --set 'balance.external=" + command + "' " + extra);
    }
};

TEST_F(ExternalCli, PoliciesJsonIsTheRegistry) {
    const CliResult r = run_prophet("", "policies --json", dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["schema_version"], 1);
    std::vector<std::string> names;
    for (const auto& row : j["policies"]) {
        names.push_back(row["name"]);
        for (const char* key : {"input", "offline", "system_schedule", "system_cost_eq", "route_rule", "token_path",
                                "uses_transitions", "size_limits", "description"})
            EXPECT_TRUE(row.contains(key)) << row["name"] << " lacks " << key;
    }
    EXPECT_EQ(names, prophet::policy_names());
    const CliResult help = run_prophet("", "--help", dir_);
    EXPECT_NE(help.out.find("policies"), std::string::npos) << help.out;
}

// The same placement as static (the fixture answers it) gives the same plan rows, to the bit, but plan_us.
TEST_F(ExternalCli, StaticAnswerGivesBitIdenticalPlanRows) {
    ASSERT_EQ(plan("--policy static").exit_code, 0);
    const CliResult r = plan_external(kFixture + " static");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    prophet::Store store = prophet::Store::open(db_);
    std::vector<prophet::PlanResultRow> rows[2];
    for (const prophet::RunRow& run : store.list_runs())
        for (const prophet::PlanResultRow& row : store.get_plan_results(run.run_id))
            rows[row.policy == "external" ? 1 : 0].push_back(row);
    ASSERT_EQ(rows[0].size(), 8u);
    ASSERT_EQ(rows[1].size(), rows[0].size());
    for (size_t i = 0; i < rows[0].size(); ++i) {
        const prophet::PlanResultRow &a = rows[0][i], &b = rows[1][i];
        EXPECT_EQ(a.iteration, b.iteration);
        EXPECT_EQ(a.layer, b.layer);
        EXPECT_EQ(a.predicted_eq6_ms, b.predicted_eq6_ms) << i;
        EXPECT_EQ(a.predicted_eq8_ms, b.predicted_eq8_ms) << i;
        EXPECT_EQ(a.max_mean_load, b.max_mean_load) << i;
        EXPECT_EQ(a.balance_std, b.balance_std) << i;
        EXPECT_EQ(a.a2a_bytes, b.a2a_bytes) << i;
        EXPECT_EQ(a.trans_bytes, b.trans_bytes) << i;
        EXPECT_EQ(a.agg_bytes, b.agg_bytes) << i;
        EXPECT_EQ(a.replicas, b.replicas) << i;
        EXPECT_EQ(a.dropped_tokens, b.dropped_tokens) << i;
        if (b.iteration > 0) {
            EXPECT_GT(b.plan_us, 0.0) << "the round trip is the external policy's plan time";
        }
    }
}

struct FailureCase {
    const char* mode;   // the fixture's behaviour
    const char* extra;  // further --set
    int exit_code;
    const char* message;
};

TEST_F(ExternalCli, EveryMisbehaviourFailsTheRunWithAClearError) {
    const std::vector<FailureCase> cases = {
        {"malformed", "", prophet::kExitConfig, "the reply is not JSON"},
        {"missing_expert", "", prophet::kExitConfig, "reply field experts has 3 entries, needs 4"},
        {"empty_holders", "", prophet::kExitConfig, "experts[0] is empty"},
        {"slow 30", "--set balance.external_timeout_s=2", prophet::kExitDistributed,
         "no reply to the plan request of iteration 1, layer 0 within 2 s (balance.external_timeout_s"},
        {"exit", "", prophet::kExitDistributed, "exited with status 3 before replying"},
    };
    for (const FailureCase& c : cases) {
        fs::remove(db_);
        const CliResult r = plan_external(kFixture + " " + c.mode, c.extra);
        EXPECT_EQ(r.exit_code, c.exit_code) << c.mode << ": " << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.mode << ": " << r.err;
        prophet::Store store = prophet::Store::open(db_);
        const auto runs = store.list_runs();
        ASSERT_EQ(runs.size(), 1u) << c.mode;
        EXPECT_EQ(runs[0].status, "failed") << c.mode;
        EXPECT_NE(runs[0].error.find(c.message), std::string::npos) << c.mode << ": " << runs[0].error;
        EXPECT_TRUE(store.get_plan_results(runs[0].run_id).empty()) << c.mode << ": nothing half-written";
    }
}

TEST_F(ExternalCli, ExampleRunsInEveryPlanningMode) {
    for (const char* role : {"online", "offline"}) {
        const CliResult r = plan_external(kExample, std::string("--json --set balance.external_role=") + role);
        ASSERT_EQ(r.exit_code, 0) << role << ": " << r.err;
        const auto j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j["policies"].size(), 1u);
        EXPECT_EQ(j["policies"][0]["name"], "external");
        EXPECT_GT(j["policies"][0]["eq6"]["replicas"].get<double>(), 0.0) << role << ": the example replicates";
    }
    const std::string sweep = (dir_ / "ext.toml").string();
    std::ofstream(sweep) << "[sweep]\nname = \"ext\"\nengine = \"sim\"\n"
                            "clusters = [\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
                            "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\npolicies = [\"external\"]\n"
                            "seeds = [1]\n[sweep.grid]\n\"balance.external\" = [\"" +
                                kExample + "\"]\n";
    const CliResult s = run_prophet("", "sweep " + sweep + " --set store.path=" + db_ + " --no-report", dir_);
    ASSERT_EQ(s.exit_code, 0) << s.err << s.out;
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs("ext");
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "finished") << runs[0].error;
    EXPECT_EQ(store.get_metrics(runs[0].run_id, "mean_iteration_ms").size(), 1u);
}

// The example on 2 real MPI ranks (its process on rank 0, the placement broadcast): the losses are static's.
TEST_F(ExternalCli, MpiTrainingWithTheExampleMatchesStatic) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    const std::string mpirun = "mpirun --allow-run-as-root --oversubscribe -np 2";
    const std::string base =
        "train --config experiments/train/skewed-4rank.toml --json --set train.steps=8 "
        "--set store.path=" +
        db_ + " ";
    const CliResult fixed = run_prophet(mpirun, base, dir_);
    ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
    const CliResult ext =
        run_prophet(mpirun, base + "--set balance.policy=external --set 'balance.external=" + kExample + "'", dir_);
    ASSERT_EQ(ext.exit_code, 0) << ext.err;
    const std::vector<double> a = prophet::testing::json_losses(fixed.out), b = prophet::testing::json_losses(ext.out);
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(std::fabs(a[i] - b[i]), 1e-5 * std::fabs(a[i])) << "step " << i;
    // and it did replicate (the step lines' replicas, summed over layers)
    double replicas = 0;
    std::istringstream lines(ext.out);
    for (std::string line; std::getline(lines, line);)
        if (!line.empty() && line[0] == '{') replicas += nlohmann::json::parse(line).value("replicas", 0.0);
    EXPECT_GT(replicas, 0.0);
}

}  // namespace
