// test_policy_registry.cpp: a walk over every row of the policy registry (lib/balance/policy_registry.h) through
// the places that run policies: every name parses where a policy is named, and every offline row is treated as
// offline (planned once, no planning time on the critical path) by plan's evaluation, the simulator, the sweeps'
// sim engine and training. A new row is covered without touching this file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "../temp_dir_test.h"
#include "balance/cluster.h"
#include "balance/evaluate.h"
#include "balance/options.h"
#include "balance/policy_registry.h"
#include "core/config.h"
#include "core/error.h"
#include "sim/simulator.h"
#include "store/store.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"
#include "trace/trace.h"
#include "train/policy_runner.h"

namespace fs = std::filesystem;
using namespace prophet;

namespace {

const char* kCluster = "experiments/clusters/moetuner-h100-ep4.toml";
const char* kTrace = "experiments/traces/tiny-e4-d4.toml";  // E = D = 4, L = 2, I = 4: every row's size limits

struct Fixture {
    Trace trace;
    CostModel cost;
    TraceView view;
    Fixture() {
        fs::current_path(PROPHET_SOURCE_DIR);
        trace = generate_trace_from_toml(kTrace);
        const TraceMeta& m = trace.meta;
        Config config(sweep::point_schema(), "test");
        cost = cost_model_for_trace(
            load_cluster_file(kCluster), kCluster,
            {m.num_devices, m.num_experts, m.tokens_per_iteration, m.d_model, m.d_ffn, m.seq_len}, kTrace, config, "");
        view = sweep::detail::view_of(trace);
    }
};

class RegistryWalk : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        fs::current_path(PROPHET_SOURCE_DIR);  // the sweep files name experiments/ relative to it
        TempDirTest::SetUp();
    }
};

// The rows a run can name without further configuration (an external row needs a command: tests/cli covers it).
std::vector<const PolicyRow*> builtin_rows() {
    std::vector<const PolicyRow*> rows;
    for (const PolicyRow& r : policy_registry())
        if (!r.external_process) rows.push_back(&r);
    return rows;
}

TEST_F(RegistryWalk, EveryNameParsesWherePoliciesAreNamed) {
    Schema schema;
    add_balance_keys(schema, /*allow_all=*/true, "static");
    for (const PolicyRow& row : policy_registry()) {
        Config config(schema, "test");
        EXPECT_NO_THROW(config.apply_set(std::string("balance.policy=") + row.name)) << row.name;
        EXPECT_EQ(&policy_row(row.name), &row);
        EXPECT_TRUE(row.plan_layer || row.plan_window) << row.name << " has no planner";
        EXPECT_EQ(row.plan_window != nullptr, row.input == PolicyInput::kProfileWindow || row.external_process)
            << row.name << ": an offline row plans from a window";
        const std::string sweep_text = std::string("[sweep]\nname = \"w\"\nengine = \"sim\"\nclusters = [\"") +
                                       kCluster + "\"]\ntraces = [\"" + kTrace + "\"]\npolicies = [\"" + row.name +
                                       "\"]\nseeds = [1]\n";
        try {
            sweep::parse_sweep_string(sweep_text, "w.toml");
        } catch (const Error& e) {
            ADD_FAILURE() << row.name << ": " << e.what();
        }
    }
    EXPECT_THROW(policy_row("no-such-policy"), Error);
}

TEST_F(RegistryWalk, PlanEvaluatesOfflineRowsOnce) {
    const Fixture f;
    EvalSettings settings;
    settings.plan_repeats = 1;
    for (const PolicyRow* row : builtin_rows()) {
        if (row->input != PolicyInput::kProfileWindow) continue;
        ASSERT_TRUE(plans_offline(row->name, settings.options)) << row->name;
        const PolicyScore s = evaluate_policy(row->name, f.view, f.cost, settings, false);
        const int L = f.view.num_layers;
        ASSERT_EQ(s.layers.size(), static_cast<size_t>(f.view.num_iterations) * L) << row->name;
        for (size_t k = L; k < s.layers.size(); ++k) {  // one plan for the run: every iteration's is iteration 0's
            EXPECT_EQ(s.layers[k].placement.owner, s.layers[k % L].placement.owner) << row->name;
            EXPECT_EQ(s.layers[k].placement.replica, s.layers[k % L].placement.replica) << row->name;
            EXPECT_EQ(s.layers[k].plan_us, s.layers[k % L].plan_us) << row->name;
        }
    }
}

// Every layer's planning time set to 10 ms: the simulator charges it to online rows and not to offline ones.
TEST_F(RegistryWalk, SimulatorChargesNoPlanningTimeToOfflineRows) {
    const Fixture f;
    EvalSettings settings;
    settings.plan_repeats = 1;
    for (const PolicyRow* row : builtin_rows()) {
        PolicyScore s = evaluate_policy(row->name, f.view, f.cost, settings, false);
        for (LayerScore& ls : s.layers) ls.plan_us = 1e4;
        sim::SimOptions measured, none;
        measured.plan_s = -1;  // the score's times
        none.plan_s = 0;
        const double with = sim::simulate_score(s, f.view, f.cost, settings, measured).mean_iteration_s;
        const double without = sim::simulate_score(s, f.view, f.cost, settings, none).mean_iteration_s;
        if (plans_offline(row->name, settings.options))
            EXPECT_EQ(with, without) << row->name;
        else
            EXPECT_GT(with, without) << row->name;
    }
}

// The sweeps' sim engine on every offline row, twice: no measured planning time enters, so the two runs agree
// to the bit (an online row's measured times differ between runs).
TEST_F(RegistryWalk, SweepChargesNoPlanningTimeToOfflineRows) {
    std::string policies;
    for (const PolicyRow* row : builtin_rows())
        if (row->input == PolicyInput::kProfileWindow)
            policies += std::string(policies.empty() ? "" : ", ") + "\"" + row->name + "\"";
    const sweep::SweepSpec spec = sweep::parse_sweep_string(
        std::string("[sweep]\nname = \"w\"\nengine = \"sim\"\nclusters = [\"") + kCluster + "\"]\ntraces = [\"" +
            kTrace + "\"]\npolicies = [" + policies + "]\nseeds = [1]\n",
        "w.toml");
    std::vector<std::vector<double>> means(2);
    for (int run = 0; run < 2; ++run) {
        sweep::SweepOptions o;
        o.store_path = (dir_ / ("s" + std::to_string(run) + ".db")).string();
        ASSERT_EQ(sweep::run_sweep(spec, o).failed, 0);
        Store store = Store::open(o.store_path);
        for (const RunRow& r : store.list_runs("w"))
            for (const MetricRow& m : store.get_metrics(r.run_id, "mean_iteration_ms")) means[run].push_back(m.value);
    }
    ASSERT_FALSE(means[0].empty());
    std::sort(means[0].begin(), means[0].end());
    std::sort(means[1].begin(), means[1].end());
    EXPECT_EQ(means[0], means[1]);
}

TEST_F(RegistryWalk, TrainingPlansOfflineRowsOnceAfterTheWindow) {
    const Fixture f;
    const int L = f.view.num_layers, D = f.view.num_devices, E = f.view.num_experts;
    const size_t per_iteration = static_cast<size_t>(L) * D * E;
    for (const PolicyRow* row : builtin_rows()) {
        if (row->input != PolicyInput::kProfileWindow) continue;
        PolicyRunner runner(row->name, L, D, E, f.cost, BalanceOptions{}, /*profile_iterations=*/2, 1);
        EXPECT_FALSE(runner.plans_online()) << row->name;
        const Placement fixed = Placement::make_static(D, E);
        std::vector<Placement> after;
        for (int it = 0; it < f.view.num_iterations; ++it) {
            const std::vector<int64_t> counts(f.trace.counts.begin() + it * per_iteration,
                                              f.trace.counts.begin() + (it + 1) * per_iteration);
            for (int l = 0; l < L; ++l) {
                const Placement p = runner.plan(it, l, counts.data() + static_cast<size_t>(l) * D * E);
                if (it < 2) {
                    EXPECT_EQ(p.owner, fixed.owner) << row->name << ": static during the window";
                } else if (it == 2) {
                    after.push_back(p);
                } else {
                    EXPECT_EQ(p.replica, after[l].replica) << row->name << ": kept";
                    EXPECT_EQ(p.owner, after[l].owner) << row->name << ": kept";
                }
            }
            runner.end_iteration(it, counts);
        }
    }
}

}  // namespace
