// End-to-end tests of the `prophet` binary: what a user runs, what it prints, its exit codes, and what it leaves
// in the store (a failed command must leave nothing half-written).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "core/error.h"
#include "store/store.h"
#include "store_queries.h"

namespace fs = std::filesystem;

namespace {

using Result = prophet::testing::CliResult;

Result run_prophet(const std::string& args, const fs::path& dir) { return prophet::testing::run_prophet("", args, dir); }

class Cli : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        TempDirTest::SetUp();
        cluster4_ = write("cluster4.toml",
                          "[cluster]\nname = \"test4\"\nnum_devices = 4\ndevices_per_node = 2\ncompute_tflop_s = 1.0\n"
                          "a2a_gbit_s = [10.0]\ntrans_gbit_s = 10.0\n");
    }

    std::string write(const std::string& name, const std::string& text) {
        const std::string path = (dir_ / name).string();
        std::ofstream(path) << text;
        return path;
    }
    // plan on the tiny trace with the test store and extra arguments
    Result plan(const std::string& extra) {
        return run_prophet("plan --trace experiments/traces/tiny-e4-d4.toml --cluster " + cluster4_ +
                               " --set store.path=" + db_ + " --set plan.repeats=1 " + extra,
                           dir_);
    }
    // a failed command: the exit code, a message containing `needle`, and no store written
    void expect_failure(const Result& r, int exit_code, const std::string& needle) {
        EXPECT_EQ(r.exit_code, exit_code) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
        EXPECT_FALSE(fs::exists(db_)) << "a failed command created the store";
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line expected: " << r.err;
    }

    std::string cluster4_;
};

}  // namespace

// fastermoe's Sim column runs FasterMoE's own schedule: with the planner counting Trans/Agg receivers as the
// simulator does (plan.trans_receivers = replicas) it equals the FasterMoE sys column, below Eq 6's blocking
// transfers. A slow device (0.1 TFLOP/s) makes shadowing pay on the tiny trace.
TEST_F(Cli, PlanFasterMoESimColumnIsItsSystemModel) {
    cluster4_ = write("slow4.toml",
                      "[cluster]\nname = \"slow4\"\nnum_devices = 4\ndevices_per_node = 2\ncompute_tflop_s = 0.1\n"
                      "a2a_gbit_s = [10.0]\ntrans_gbit_s = 10.0\n");
    const Result r = plan("--policy fastermoe --json --set plan.trans_receivers=replicas");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json p = nlohmann::json::parse(r.out)["policies"][0];
    EXPECT_EQ(p["sim"]["schedule"], "fastermoe");
    ASSERT_GT(p["eq6"]["trans_bytes"].get<double>(), 0.0) << "no shadowed expert: the case tests nothing";
    const double sim = p["sim"]["predicted_ms"], system = p["fastermoe_system"]["predicted_ms"];
    EXPECT_NEAR(sim, system, 1e-9 * system);
    EXPECT_LT(sim, p["eq6"]["predicted_ms"].get<double>());
}

TEST_F(Cli, HelpListsOnlyWorkingSubcommands) {
    const Result r = run_prophet("--help", dir_);
    EXPECT_EQ(r.exit_code, 0);
    for (const char* present : {"plan", "trace", "train", "profile", "sweep", "ablate"})
        EXPECT_NE(r.out.find(std::string("\n  ") + present), std::string::npos) << present;
    EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
    EXPECT_EQ(run_prophet("frobnicate", dir_).exit_code, prophet::kExitUsage);
    EXPECT_EQ(run_prophet("", dir_).exit_code, prophet::kExitUsage);
}

TEST_F(Cli, PlanSaysWhichBroadcastItPricesAndThePaperClustersSayChain) {
    // hpwnv-16 describes its topology and the papers' collective (trans_broadcast = "chain"); --set overrides it
    auto pricing = [&](const std::string& extra) {
        const Result r = run_prophet("plan --trace experiments/traces/zipf-e16-k2.toml --cluster "
                                     "experiments/clusters/hpwnv-16.toml --policy static --json --set store.path=" +
                                         db_ + extra,
                                     dir_);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return nlohmann::json::parse(r.out)["pricing"];
    };
    const nlohmann::json chain = pricing("");
    EXPECT_TRUE(chain["topology_aware"].get<bool>());
    EXPECT_EQ(chain["trans_broadcast"], "chain");
    EXPECT_EQ(pricing(" --set plan.trans_broadcast='\"star\"'")["trans_broadcast"], "star");
}

TEST_F(Cli, PlanAllPoliciesJsonAndStore) {
    const Result r = plan("--policy all --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);  // stdout is pure JSON; logs went to stderr
    ASSERT_EQ(j["policies"].size(), 12u);  // every registry row but external (prophet policies lists them)
    // flow, routed by the per-batch LP, starts first (the longest evaluation), and still reports in registry order
    const size_t first_start = r.err.find("prophet plan: [");
    ASSERT_NE(first_start, std::string::npos) << r.err;
    const std::string flow_starts = "prophet plan: [12/12] flow ...";
    EXPECT_EQ(r.err.compare(first_start, flow_starts.size(), flow_starts), 0) << r.err;
    EXPECT_EQ(j["policies"][11]["name"], "flow");
    for (const auto& p : j["policies"]) {
        ASSERT_FALSE(p["skipped"].get<bool>()) << p.dump();  // D = E = 4: exhaustive and the joint ILP fit
        EXPECT_FALSE(p.contains("predicted_ms")) << "no headline number mixing system models";
        for (const char* key :
             {"name", "route_rule", "plan_us", "dropped_tokens", "eq6", "eq8", "fastermoe_system", "sim"})
            EXPECT_TRUE(p.contains(key)) << key;
        for (const char* model : {"eq6", "eq8", "fastermoe_system", "sim"}) {
            for (const char* key : {"predicted_ms", "speedup_vs_static", "planned_with_eq", "max_mean_load",
                                    "balance_std", "rb_vs_static", "a2a_bytes", "a2a_ms", "trans_bytes", "agg_bytes",
                                    "replicas"})
                EXPECT_TRUE(p[model].contains(key)) << model << "." << key;
            EXPECT_GT(p[model]["predicted_ms"].get<double>(), 0.0);
        }
        const std::string name = p["name"];
        if (name == "prophet" || name == "prophet-oracle" || name == "fastermoe" || name == "exhaustive") {
            EXPECT_EQ(p["eq6"]["planned_with_eq"], 6) << name;  // each column planned by its own equation
            EXPECT_EQ(p["eq8"]["planned_with_eq"], 8) << name;
        }
        if (name == "moetuner" || name == "moetuner-joint") {
            EXPECT_TRUE(p.contains("solver_status")) << name;
        }
        EXPECT_EQ(p["route_rule"], name == "eplb" ? "even_split" : name == "flow" ? "flow" : "owner") << name;
        // the simulator column: each system's schedule on the placements of its own equation
        const bool scheduled = name == "prophet" || name == "prophet-oracle" || name == "flow";
        EXPECT_EQ(p["sim"]["schedule"], scheduled ? "blockwise" : name == "fastermoe" ? "fastermoe" : "none") << name;
        if (name == "prophet" || name == "fastermoe") {
            EXPECT_EQ(p["sim"]["planned_with_eq"], scheduled ? 8 : 6) << name;
        }
        EXPECT_GE(p["sim"]["iteration_ms"].get<double>(), p["sim"]["predicted_ms"].get<double>()) << name;
        if (name == "static") {  // no transfers, blocking schedule: the simulated MoE time is Eq 6's terms
            const double eq6 = p["eq6"]["predicted_ms"];
            EXPECT_NEAR(p["sim"]["predicted_ms"].get<double>(), eq6, 1e-9 * eq6);
            EXPECT_DOUBLE_EQ(p["sim"]["speedup_vs_static"].get<double>(), 1.0);
        }
        // balance.token_path = auto: MoETuner's layer-to-layer dispatch for its policies (the trace has transitions)
        EXPECT_EQ(p["token_path"], name == "moetuner" || name == "moetuner-joint" ? "layer_to_layer" : "home") << name;
    }
    EXPECT_TRUE(j["models"].contains("sim"));
    EXPECT_FALSE(j["pricing"]["topology_aware"].get<bool>());  // cluster4.toml describes no topology
    EXPECT_EQ(j["pricing"]["trans_broadcast"], "flat (Eqs 4-5)");
    // the exact optimum under its own objective is never beaten by the greedy, under either equation
    for (const char* model : {"eq6", "eq8"}) {
        double exhaustive = 0, prophet_oracle = 0;
        for (const auto& p : j["policies"]) {
            if (p["name"] == "exhaustive") exhaustive = p[model]["predicted_ms"];
            if (p["name"] == "prophet-oracle") prophet_oracle = p[model]["predicted_ms"];
        }
        EXPECT_LE(exhaustive, prophet_oracle * (1 + 1e-9)) << model;
    }

    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "finished");
    EXPECT_EQ(runs[0].run_id, j["run_id"].get<std::string>());
    EXPECT_EQ(runs[0].info.config_hash.size(), 64u);
    EXPECT_EQ(store.get_plan_results(runs[0].run_id).size(), 12u * 4 * 2);  // policies x iterations x layers
    EXPECT_EQ(store.load_trace(runs[0].run_id).meta.num_devices, 4);
}

// every policy, exhaustive and the simulator's schedules included, is at or above the layer lower bound under every
// model (docs/bounds.md), and the bound reaches the JSON, the table and the store
TEST_F(Cli, PlanNoPolicyBeatsTheBound) {
    const Result r = plan("--policy all --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    for (const char* key : {"eq6_ms", "eq8_ms", "fastermoe_system_ms", "sim_ms"})
        EXPECT_GT(j["bound"][key].get<double>(), 0.0) << key;
    for (const auto& p : j["policies"]) {
        for (const char* model : {"eq6", "eq8", "fastermoe_system", "sim"})
            EXPECT_GE(p[model]["gap_to_bound"].get<double>(), -1e-9) << p["name"] << " " << model;
        const double balanced = p["metrics"]["balancedness"];
        EXPECT_GT(balanced, 0.0) << p["name"];
        EXPECT_LE(balanced, 1.0) << p["name"];
    }
    prophet::Store store = prophet::Store::open(db_);
    const std::string run_id = j["run_id"];
    EXPECT_EQ(store.get_metrics(run_id, "plan.bound.eq6_ms").size(), 1u + 4 * 2);  // mean + iterations x layers
    EXPECT_EQ(store.get_metrics(run_id, "plan.prophet.gap_sim").size(), 1u);
    const Result table = plan("--policy prophet");
    EXPECT_NE(table.out.find("  bound "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("gapEq6"), std::string::npos) << table.out;
}

// the per-layer rows (plan_results, plan.<policy>.sim_ms per block, plan.bound.* per layer, the layer_to_layer
// path's bound for the policies scored on it) add up to each policy's recorded gap under Eq 6, Eq 8 and Sim, so a
// report can split a gap by iteration (report/fig_gap_iterations.py)
TEST_F(Cli, PlanPerLayerRowsAddUpToEachPolicysGap) {
    const Result r = plan("--policy all --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string run_id = nlohmann::json::parse(r.out)["run_id"];
    prophet::Store store = prophet::Store::open(db_);
    auto per_layer = [&](const std::string& key) {  // (iteration, layer) -> value, the per-layer rows only
        std::map<std::pair<int64_t, int>, double> rows;
        for (const prophet::MetricRow& m : store.get_metrics(run_id, key))
            if (m.layer >= 0) rows[{m.step, m.layer}] = m.value;
        return rows;
    };
    auto mean_of = [&](const std::string& key) { return prophet::testing::metric(store, run_id, key); };  // one row
    std::map<std::string, std::map<std::pair<int64_t, int>, std::pair<double, double>>> planned;          // eq6, eq8
    for (const prophet::PlanResultRow& row : store.get_plan_results(run_id))
        planned[row.policy][{row.iteration, row.layer}] = {row.predicted_eq6_ms, row.predicted_eq8_ms};
    int layer_to_layer = 0;
    for (const auto& [policy, rows] : planned) {
        const bool l2l = mean_of("plan." + policy + ".layer_to_layer") == 1.0;
        layer_to_layer += l2l;
        const auto eq6_bound = per_layer(l2l ? "plan.bound.eq6_l2l_ms" : "plan.bound.eq6_ms");
        const auto eq8_bound = per_layer(l2l ? "plan.bound.eq8_l2l_ms" : "plan.bound.eq8_ms");
        const auto sim = per_layer("plan." + policy + ".sim_ms"), sim_bound = per_layer("plan.bound.sim_ms");
        ASSERT_EQ(sim.size(), 4u * 2) << policy;  // iterations x layers
        ASSERT_EQ(rows.size(), 4u * 2) << policy;
        double eq6 = 0, eq8 = 0, b6 = 0, b8 = 0, s = 0, bs = 0;
        for (const auto& [at, v] : rows)
            eq6 += v.first, eq8 += v.second, b6 += eq6_bound.at(at), b8 += eq8_bound.at(at), s += sim.at(at),
                bs += sim_bound.at(at);
        EXPECT_NEAR(eq6 / b6 - 1, mean_of("plan." + policy + ".gap_eq6"), 1e-9) << policy;
        EXPECT_NEAR(eq8 / b8 - 1, mean_of("plan." + policy + ".gap_eq8"), 1e-9) << policy;
        EXPECT_NEAR(s / bs - 1, mean_of("plan." + policy + ".gap_sim"), 1e-9) << policy;
    }
    EXPECT_GT(layer_to_layer, 0) << "no policy took the layer_to_layer path: its bound rows went untested";
}

// plan.record_layers = false keeps each policy's means only: no plan_results rows and no Sim rows per block
TEST_F(Cli, PlanWithoutRecordLayersStoresOnlyTheMeans) {
    const Result r = plan("--policy static,flow --set plan.record_layers=false --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string run_id = nlohmann::json::parse(r.out)["run_id"];
    prophet::Store store = prophet::Store::open(db_);
    EXPECT_TRUE(store.get_plan_results(run_id).empty());
    for (const char* key : {"plan.flow.sim_ms", "plan.flow.gap_sim", "plan.flow.layer_to_layer"}) {
        const auto rows = store.get_metrics(run_id, key);
        ASSERT_EQ(rows.size(), 1u) << key;
        EXPECT_EQ(rows[0].layer, -1) << key;
    }
}

// what routing one batch costs is measured for every policy (flow's is its per-batch routing LP or max-flow splits,
// which no column charges) and reaches the JSON, the table and the store, beside the rule that routed
TEST_F(Cli, PlanReportsEachPolicysRoutingTime) {
    for (const std::string& rule : {std::string("flow"), std::string("max_flow")}) {
        const Result r = plan("--policy eplb,flow --set balance.route_to=" + rule + " --json");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        ASSERT_EQ(j["policies"].size(), 2u);
        for (const auto& p : j["policies"]) {
            EXPECT_GT(p["metrics"]["route_us"].get<double>(), 0.0) << p["name"] << " under " << rule;
            EXPECT_EQ(p["route_rule"].get<std::string>(), rule) << p["name"];
        }
        prophet::Store store = prophet::Store::open(db_);
        EXPECT_EQ(store.get_metrics(j["run_id"].get<std::string>(), "plan.flow.route_us").size(), 1u) << rule;
    }
    const Result table = plan("--policy flow");
    EXPECT_NE(table.out.find("route"), std::string::npos) << table.out;
}

TEST_F(Cli, PlanTableAndTraceFromTheStore) {
    const Result r = plan("--policy prophet");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("prophet"), std::string::npos);
    EXPECT_NE(r.out.find("Sim"), std::string::npos) << "the simulator column is labelled";
    EXPECT_NE(r.out.find("Sim sys = trace-driven simulator"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("JS divergence"), std::string::npos) << "every trace reports its JS divergence";
    prophet::Store store = prophet::Store::open(db_);
    const std::string run_id = store.list_runs()[0].run_id;
    // the recorded trace can be planned again by run id, and exported to a file
    const Result again = run_prophet("plan --trace run:" + run_id + " --cluster " + cluster4_ + " --set store.path=" +
                                         db_ + " --policy static --json",
                                     dir_);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    const std::string out = (dir_ / "out.ptrace").string();
    ASSERT_EQ(run_prophet("trace export " + run_id + " --store " + db_ + " -o " + out, dir_).exit_code, 0);
    const Result info = run_prophet("trace info " + out + " --json", dir_);
    ASSERT_EQ(info.exit_code, 0) << info.err;
    const nlohmann::json ij = nlohmann::json::parse(info.out);
    EXPECT_EQ(ij["experts"], 4);
    // the heaviest expert's share is over token-expert assignments, so uniform is 1/E (not k/E)
    EXPECT_DOUBLE_EQ(ij["top_expert_share_uniform"].get<double>(), 0.25);
    EXPECT_EQ(ij["js_divergence_per_layer"].size(), ij["layers"].get<size_t>());
    const Result text = run_prophet("trace info " + out, dir_);
    EXPECT_NE(text.out.find("uniform = 1/E = 0.250"), std::string::npos) << text.out;
}

TEST_F(Cli, DryRunTouchesNothing) {
    const Result r = plan("--dry-run");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("dry run"), std::string::npos);
    EXPECT_FALSE(fs::exists(db_));
}

TEST_F(Cli, HelpConfigListsKeys) {
    const Result r = run_prophet("plan --help-config", dir_);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("balance.alpha"), std::string::npos);
    EXPECT_NE(r.out.find("store.path"), std::string::npos);
}

TEST_F(Cli, ConfigErrorsExitThree) {
    expect_failure(plan("--set balance.alpah=2"), prophet::kExitConfig, "balance.alpah");
    expect_failure(plan("--set balance.alpha=-1"), prophet::kExitConfig, "balance.alpha = -1");
    expect_failure(plan("--policy greedy"), prophet::kExitConfig, "greedy");
    const std::string bad_toml = write("bad.toml", "[balance]\nalpha = = 2\n");
    expect_failure(plan("--config " + bad_toml), prophet::kExitConfig, "line 2");
    const std::string unknown = write("unknown.toml", "[plan]\nrepeatz = 2\n");
    expect_failure(plan("--config " + unknown), prophet::kExitConfig, "did you mean plan.repeats");
    expect_failure(plan("--set balance.token_path=sideways"), prophet::kExitConfig, "balance.token_path");
    // training's executor combines at home: the layer-to-layer path is refused before anything runs
    expect_failure(run_prophet("train --dry-run --config experiments/train/skewed-4rank.toml --set store.path=" + db_ +
                                   " --set balance.token_path=layer_to_layer",
                               dir_),
                   prophet::kExitConfig, "balance.token_path");
}

TEST_F(Cli, UsageErrorsExitTwo) {
    const Result r = run_prophet("plan --cluster " + cluster4_, dir_);
    EXPECT_EQ(r.exit_code, prophet::kExitUsage);
    EXPECT_NE(r.err.find("--trace"), std::string::npos) << r.err;
    EXPECT_EQ(plan("--set novalue").exit_code, prophet::kExitUsage);
}

TEST_F(Cli, TraceErrorsExitThreeWritingNothing) {
    // a trace whose D disagrees with the cluster
    const std::string cluster16 = "experiments/clusters/hpwnv-16.toml";
    expect_failure(run_prophet("plan --trace experiments/traces/tiny-e4-d4.toml --cluster " + cluster16 +
                                   " --set store.path=" + db_,
                               dir_),
                   prophet::kExitConfig, "num_devices = 16");
    // E not divisible by D
    const std::string e6 = write("e6.toml",
                                 "[trace]\ngenerator = \"uniform\"\nnum_experts = 6\nnum_devices = 4\ntop_k = 1\n"
                                 "tokens_per_iteration = 64\nnum_iterations = 2\nnum_layers = 1\n");
    expect_failure(run_prophet("plan --trace " + e6 + " --cluster " + cluster4_ + " --set store.path=" + db_, dir_),
                   prophet::kExitConfig, "not divisible");
    // a missing trace file
    expect_failure(run_prophet("plan --trace " + (dir_ / "nope.ptrace").string() + " --cluster " + cluster4_ +
                                   " --set store.path=" + db_,
                               dir_),
                   prophet::kExitConfig, "nope.ptrace");

    // a binary trace: truncated, then with a negative count
    const std::string good = (dir_ / "tiny.ptrace").string();
    ASSERT_EQ(run_prophet("trace convert experiments/traces/tiny-e4-d4.toml -o " + good, dir_).exit_code, 0);
    std::string bytes;
    {
        std::ifstream in(good, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const std::string truncated = (dir_ / "truncated.ptrace").string();
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
    expect_failure(run_prophet("plan --trace " + truncated + " --cluster " + cluster4_ + " --set store.path=" + db_,
                               dir_),
                   prophet::kExitConfig, "truncated");
    uint64_t header_len = 0;
    for (int i = 0; i < 8; ++i) header_len |= uint64_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    std::string negative = bytes;
    for (int i = 0; i < 8; ++i) negative[16 + header_len + i] = static_cast<char>(0xff);  // counts[0] = -1
    const std::string neg_path = (dir_ / "negative.ptrace").string();
    std::ofstream(neg_path, std::ios::binary) << negative;
    expect_failure(run_prophet("plan --trace " + neg_path + " --cluster " + cluster4_ + " --set store.path=" + db_,
                               dir_),
                   prophet::kExitConfig, "negative");
}

TEST_F(Cli, CsvTracesRoundTripAndNaNCountsAreRefused) {
    const std::string csv = (dir_ / "tiny.csv").string();
    ASSERT_EQ(run_prophet("trace convert experiments/traces/tiny-e4-d4.toml --format csv -o " + csv, dir_).exit_code, 0);
    const Result ok = run_prophet("plan --trace " + csv + " --cluster " + cluster4_ + " --set store.path=" + db_ +
                                      " --policy static --json",
                                  dir_);
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    std::filesystem::remove(db_);
    // a spreadsheet's NaN in one cell
    std::ifstream in(csv);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t header = text.find("iteration,layer,device,expert,tokens\n");
    ASSERT_NE(header, std::string::npos);
    const size_t row = header + std::string("iteration,layer,device,expert,tokens\n").size();
    const size_t comma = text.rfind(',', text.find('\n', row));
    const std::string nan_csv = write("nan.csv", text.substr(0, comma + 1) + "nan" + text.substr(text.find('\n', row)));
    expect_failure(run_prophet("plan --trace " + nan_csv + " --cluster " + cluster4_ + " --set store.path=" + db_, dir_),
                   prophet::kExitConfig, "NaN");
    const std::string negative_csv =
        write("negative.csv", text.substr(0, comma + 1) + "-4" + text.substr(text.find('\n', row)));
    expect_failure(
        run_prophet("plan --trace " + negative_csv + " --cluster " + cluster4_ + " --set store.path=" + db_, dir_),
        prophet::kExitConfig, "negative");
}

TEST_F(Cli, ForeignStoreExitsFive) {
    std::ofstream(db_) << "this is not a database, just text that is long enough to have a header of sorts......";
    const Result r = plan("--policy static");
    EXPECT_EQ(r.exit_code, prophet::kExitDatabase) << r.err;
    EXPECT_NE(r.err.find("not a SQLite"), std::string::npos) << r.err;
}
