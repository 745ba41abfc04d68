// test_sweep.cpp: sweep file validation, grid expansion and point identity, and the resumable point loop
// (skips, partial runs, failed points) against a temporary store.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "store/store.h"
#include "sweep/sweep.h"
#include "sweep_parse_error.h"

namespace fs = std::filesystem;
using namespace prophet;
using namespace prophet::sweep;
using prophet::testing::kTiny;
using prophet::testing::sweep_parse_error;

namespace {

class Sweep : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        fs::current_path(PROPHET_SOURCE_DIR);
        TempDirTest::SetUp();
    }

    SweepOptions options(int max_points = -1) const {
        SweepOptions o;
        o.store_path = db_;
        o.max_points = max_points;
        return o;
    }
    int runs_in_store(const std::string& experiment) {
        Store store = Store::open(db_);
        return static_cast<int>(store.list_runs(experiment).size());
    }
};

}  // namespace

TEST_F(Sweep, GridExpansionCountAndOrder) {
    const SweepSpec spec =
        parse_sweep_string(std::string(kTiny) +
                               "policies = [\"static\", \"prophet\"]\nseeds = [1, 2, 3]\n"
                               "[sweep.grid]\n\"trace.zipf_s\" = [0.5, 1.5]\n\"balance.alpha\" = [1.0, 2.0, 4.0]\n",
                           "grid.toml");
    const auto points = expand_points(spec);
    ASSERT_EQ(points.size(), 1u * 1 * 3 * 6 * 2);
    // policies innermost, then the grid (last key fastest), then seeds
    EXPECT_EQ(points[0].policy, "static");
    EXPECT_EQ(points[1].policy, "prophet");
    EXPECT_EQ(points[0].grid[0], std::make_pair(std::string("balance.alpha"), std::string("1.0")));
    EXPECT_EQ(points[0].grid[1].second, "0.5");
    EXPECT_EQ(points[2].grid[1].second, "1.5");
    EXPECT_EQ(points[2].grid[0].second, "1.0");
    EXPECT_EQ(points[4].grid[0].second, "2.0");
    EXPECT_EQ(points[0].seed, 1);
    EXPECT_EQ(points[12].seed, 2);
    for (size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].index, static_cast<int>(i));
    std::set<std::string> hashes;
    for (const auto& p : points) hashes.insert(p.hash);
    EXPECT_EQ(hashes.size(), points.size());
}

TEST_F(Sweep, PointHashStableUnderKeyOrder) {
    const std::string a = std::string(kTiny) +
                          "policies = [\"prophet\"]\nseeds = [7]\n"
                          "[sweep.grid]\n\"trace.zipf_s\" = [1.5]\n\"balance.alpha\" = [2.0]\n";
    const std::string b =
        "[sweep]\nseeds = [7]\npolicies = [\"prophet\"]\n"
        "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\n"
        "clusters = [\"experiments/clusters/moetuner-h100-ep4.toml\"]\nname = \"t\"\n"
        "[sweep.grid]\n\"balance.alpha\" = [2.0]\n\"trace.zipf_s\" = [1.50]\n";
    const auto pa = expand_points(parse_sweep_string(a, "a.toml"));
    const auto pb = expand_points(parse_sweep_string(b, "b.toml"));
    ASSERT_EQ(pa.size(), 1u);
    ASSERT_EQ(pb.size(), 1u);
    EXPECT_EQ(pa[0].canonical, pb[0].canonical);
    EXPECT_EQ(pa[0].hash, pb[0].hash);
    EXPECT_EQ(canonical_text({{"b", "1"}, {"a", "2"}}), canonical_text({{"a", "2"}, {"b", "1"}}));
    const auto pc = expand_points(parse_sweep_string(a.substr(0, a.find("[sweep.grid]")), "c.toml"));
    EXPECT_NE(pa[0].hash, pc[0].hash);
}

TEST_F(Sweep, SmokeSweepIsResumable) {
    const SweepSpec spec = parse_sweep_file("experiments/sweeps/smoke.toml");
    const SweepSummary first = run_sweep(spec, options());
    EXPECT_EQ(first.points, 6);
    EXPECT_EQ(first.ran, 6);
    EXPECT_EQ(first.failed, 0);
    EXPECT_EQ(runs_in_store("smoke"), 6);
    {
        Store store = Store::open(db_);
        const auto runs = store.list_runs("smoke");
        const RunRow& row = runs.front();
        EXPECT_TRUE(row.info.simulated);
        EXPECT_EQ(row.info.backend, "sim");
        EXPECT_EQ(row.info.world_size, 4);
        EXPECT_EQ(store.get_metrics(row.run_id, "iteration_ms").size(), 4u);
        EXPECT_EQ(store.get_metrics(row.run_id, "speedup_vs_static").size(), 1u);
        EXPECT_EQ(store.get_metrics(row.run_id, "js_divergence_mean").size(), 1u);
        bool has_policy = false;
        for (const auto& [k, v] : store.get_params(row.run_id)) has_policy |= k == "balance.policy";
        EXPECT_TRUE(has_policy);
    }
    const SweepSummary second = run_sweep(spec, options());
    EXPECT_EQ(second.ran, 0);
    EXPECT_EQ(second.skipped, 6);
    EXPECT_TRUE(second.run_ids.empty());
    EXPECT_EQ(runs_in_store("smoke"), 6);
}

// Issue 26 item 9: the sweep reads its points back at the end; their -wal and -shm files removed after the first
// point, the later points never reach the store others read, and the sweep fails with exit 5 saying so.
TEST_F(Sweep, PointsLostWithTheWalFailTheSweep) {
    const SweepSpec spec = parse_sweep_file("experiments/sweeps/smoke.toml");
    SweepOptions o = options();
    bool removed = false;
    o.log = [&](const std::string& line) {
        if (!removed && line.find("ETA") != std::string::npos)
            removed = fs::remove(db_ + "-wal") && fs::remove(db_ + "-shm");
    };
    try {
        run_sweep(spec, o);
        ADD_FAILURE() << "the sweep ended as if every point were recorded";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitDatabase) << e.what();
        EXPECT_NE(std::string(e.what()).find("sweep smoke ended, but its rows are not all in"), std::string::npos)
            << e.what();
    }
    EXPECT_TRUE(removed);
}

// engine sim: per-layer metrics (step 0, layer = block index), L rows each, and RB = 1 for static itself
TEST_F(Sweep, SimPointRecordsPerLayerMetrics) {
    const SweepSpec spec = parse_sweep_file("experiments/sweeps/smoke.toml");  // tiny-e4-d4: L = 2
    const SweepSummary s = run_sweep(spec, options());
    ASSERT_EQ(s.failed, 0);
    const int L = 2;
    Store store = Store::open(db_);
    const auto runs = store.list_runs("smoke");
    ASSERT_EQ(runs.size(), 6u);
    int statics = 0;
    for (const RunRow& row : runs) {
        std::string policy;
        for (const auto& [k, v] : store.get_params(row.run_id))
            if (k == "balance.policy") policy = v;
        for (const char* key : {"layer_moe_ms", "layer_balance_std", "layer_rb_vs_static"}) {
            const auto rows = store.get_metrics(row.run_id, key);
            ASSERT_EQ(rows.size(), static_cast<size_t>(L)) << key << " " << policy;
            std::set<int> layers;
            for (const MetricRow& m : rows) {
                EXPECT_EQ(m.step, 0) << key;
                EXPECT_EQ(m.rank, -1) << key;
                EXPECT_GE(m.value, 0.0) << key;
                layers.insert(m.layer);
            }
            EXPECT_EQ(layers, (std::set<int>{0, 1})) << key;
        }
        for (const MetricRow& m : store.get_metrics(row.run_id, "layer_moe_ms")) EXPECT_GT(m.value, 0.0);
        const auto mean_rb = store.get_metrics(row.run_id, "mean_rb_vs_static");
        ASSERT_EQ(mean_rb.size(), 1u);
        EXPECT_EQ(mean_rb[0].layer, -1);
        if (policy == "\"static\"") {
            ++statics;
            for (const MetricRow& m : store.get_metrics(row.run_id, "layer_rb_vs_static"))
                EXPECT_DOUBLE_EQ(m.value, 1.0) << "layer " << m.layer;
            EXPECT_DOUBLE_EQ(mean_rb[0].value, 1.0);
        } else {
            EXPECT_GT(mean_rb[0].value, 0.0) << policy;
        }
    }
    EXPECT_EQ(statics, 2);
}

// engine sim: every policy's simulated MoE time is at or above the layer lower bound (balance/bounds.h), recorded
// as bound_sim_ms and gap_sim, with vLLM's balancedness in (0, 1]
TEST_F(Sweep, SimPointIsNeverBelowTheBound) {
    const SweepSpec spec = parse_sweep_file("experiments/sweeps/smoke.toml");
    ASSERT_EQ(run_sweep(spec, options()).failed, 0);
    Store store = Store::open(db_);
    for (const RunRow& row : store.list_runs("smoke")) {
        const auto bound = store.get_metrics(row.run_id, "bound_sim_ms");
        const auto gap = store.get_metrics(row.run_id, "gap_sim");
        const auto balanced = store.get_metrics(row.run_id, "balancedness");
        ASSERT_EQ(bound.size(), 1u);
        ASSERT_EQ(gap.size(), 1u);
        ASSERT_EQ(balanced.size(), 1u);
        EXPECT_GT(bound[0].value, 0.0);
        EXPECT_GE(gap[0].value, -1e-9) << row.run_id;
        EXPECT_GT(balanced[0].value, 0.0);
        EXPECT_LE(balanced[0].value, 1.0);
    }
}

// both engines record training's owner moves (moves.h owner_moves_of) beside the times that include them: static
// moves nothing; eplb re-packs the tiny trace's owners in iteration 0, and its charge per layer is inside its
// simulated MoE block time (sim) or its Eq 6 time (model)
TEST_F(Sweep, PointRecordsOwnerMoves) {
    for (const std::string engine : {"sim", "model"}) {
        const std::string name = "moves-" + engine;
        const SweepSpec spec = parse_sweep_string(
            "[sweep]\nname = \"" + name + "\"\nengine = \"" + engine +
                "\"\nclusters = [\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
                "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\npolicies = [\"static\", \"eplb\"]\nseeds = [1]\n",
            "moves.toml");
        ASSERT_EQ(run_sweep(spec, options()).failed, 0) << engine;
        Store store = Store::open(db_);
        for (const RunRow& row : store.list_runs(name)) {
            std::string policy;
            for (const auto& [k, v] : store.get_params(row.run_id))
                if (k == "balance.policy") policy = v;
            auto one = [&](const char* key) {
                const auto rows = store.get_metrics(row.run_id, key);
                EXPECT_EQ(rows.size(), 1u) << key << " " << policy << " " << engine;
                return rows.empty() ? -1.0 : rows[0].value;
            };
            const double experts = one("owner_moves"), bytes = one("owner_move_bytes"), ms = one("owner_move_ms");
            if (policy == "\"static\"") {
                EXPECT_EQ(experts, 0.0) << engine;
                EXPECT_EQ(bytes, 0.0) << engine;
                EXPECT_EQ(ms, 0.0) << engine;
                continue;
            }
            EXPECT_GT(experts, 0.0) << "eplb moves no owner on the tiny trace: the case tests nothing (" << engine
                                    << ")";
            EXPECT_GT(bytes, 0.0) << engine;
            EXPECT_GT(ms, 0.0) << engine;
            double layer_ms = 0;
            for (const MetricRow& m : store.get_metrics(row.run_id, "layer_moe_ms")) layer_ms += m.value / 2;
            EXPECT_GE(engine == "sim" ? layer_ms : one("eq6_ms"), ms) << engine;
        }
    }
}

TEST_F(Sweep, KilledMidwayRunsOnlyTheRest) {
    const SweepSpec spec = parse_sweep_file("experiments/sweeps/smoke.toml");
    const SweepSummary part = run_sweep(spec, options(2));
    EXPECT_EQ(part.ran, 2);
    EXPECT_EQ(runs_in_store("smoke"), 2);
    SweepOptions dry = options();
    dry.dry_run = true;
    EXPECT_EQ(run_sweep(spec, dry).already_done, 2);
    const SweepSummary rest = run_sweep(spec, options());
    EXPECT_EQ(rest.skipped, 2);
    EXPECT_EQ(rest.ran, 4);
    EXPECT_EQ(runs_in_store("smoke"), 6);
}

TEST_F(Sweep, FailingPointIsRecordedAndOthersRun) {
    const SweepSpec spec = parse_sweep_string(
        "[sweep]\nname = \"f\"\nclusters = [\"experiments/clusters/hpwnv-16.toml\", "
        "\"experiments/clusters/moetuner-h100-ep4.toml\"]\ntraces = [\"experiments/traces/tiny-e4-d4.toml\"]\n"
        "policies = [\"static\", \"prophet\"]\nseeds = [1]\nengine = \"model\"\n",
        "f.toml");
    std::vector<std::string> lines;
    SweepOptions o = options();
    o.log = [&](const std::string& line) { lines.push_back(line); };
    const SweepSummary s = run_sweep(spec, o);
    EXPECT_EQ(s.points, 4);
    EXPECT_EQ(s.failed, 2);
    EXPECT_EQ(s.ran, 2);
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_NE(lines[0].find("failed:"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("[1/4]"), std::string::npos) << lines[0];
    Store store = Store::open(db_);
    int failed = 0, finished = 0;
    for (const RunRow& r : store.list_runs("f")) {
        if (r.status == "failed") {
            ++failed;
            EXPECT_NE(r.error.find("D = 4"), std::string::npos) << r.error;
        }
        if (r.status == "finished") {
            ++finished;
            EXPECT_EQ(r.info.backend, "model");
            EXPECT_FALSE(r.info.simulated);
            EXPECT_EQ(store.get_metrics(r.run_id, "eq8_ms").size(), 1u);
        }
    }
    EXPECT_EQ(failed, 2);
    EXPECT_EQ(finished, 2);
    // failed points are retried on the next invocation
    EXPECT_EQ(run_sweep(spec, options()).failed, 2);
}

TEST_F(Sweep, BadSweepFilesExit3) {
    const std::string base = std::string(kTiny) + "policies = [\"static\"]\nseeds = [1]\n";
    EXPECT_NE(sweep_parse_error(base + "colour = 1\n").find("sweep.colour"), std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kTiny) + "policies = []\nseeds = [1]\n").find("sweep.policies"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kTiny) + "policies = [\"static\"]\nseeds = []\n").find("must not be empty"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(std::string(kTiny) + "policies = [\"nope\"]\nseeds = [1]\n").find("unknown policy"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(base + "engine = \"gpu\"\n").find("sweep.engine"), std::string::npos);
    EXPECT_NE(sweep_parse_error(base + "[sweep.grid]\n\"sim.split\" = [1]\n").find("sweep.grid.sim.split"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(base + "[sweep.grid]\n\"trace.drift_rat\" = [0.1]\n").find("did you mean"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(base + "[sweep.grid]\n\"balance.alpha\" = [-1.0]\n").find("balance.alpha"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(base + "[sweep.grid]\n\"trace.zipf_s\" = []\n").find("non-empty"), std::string::npos);
    EXPECT_NE(
        sweep_parse_error("[sweep]\nname = \"t\"\nclusters = [\"no/such.toml\"]\n"
                          "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\npolicies = [\"static\"]\nseeds = [1]\n")
            .find("no such file"),
        std::string::npos);
    EXPECT_NE(sweep_parse_error(base + "[other]\nx = 1\n").find("other"), std::string::npos);
}

TEST_F(Sweep, ShippedSweepFilesParse) {
    for (const char* name : {"smoke", "locality-stress", "sensitivity", "paper-tables", "fig11-layers", "fig16-rb",
                             "fig14-ablation", "planner-scaling"}) {
        const SweepSpec spec = parse_sweep_file(std::string("experiments/sweeps/") + name + ".toml");
        EXPECT_FALSE(expand_points(spec).empty()) << name;
    }
    // match_devices pairs every cluster with its own D: lpwnv-8 with S, M, DS, DM (no L) x k in {1, 2}, the three
    // larger clusters with all five models x k; x 4 policies (static, deepspeed: the paper's baseline, fastermoe,
    // prophet) x 3 seeds
    const auto paper = expand_points(parse_sweep_file("experiments/sweeps/paper-tables.toml"));
    EXPECT_EQ(paper.size(), (4u * 2 + 3 * 5 * 2) * 4 * 3);
    for (const SweepPoint& p : paper)
        EXPECT_FALSE(p.cluster.find("lpwnv") != std::string::npos && p.trace.find("-l.toml") != std::string::npos)
            << p.description;
    // the ablation: 5 variants x 2 traces x 3 seeds, each recording ablate.variant
    const auto ablation = expand_points(parse_sweep_file("experiments/sweeps/fig14-ablation.toml"));
    EXPECT_EQ(ablation.size(), 5u * 2 * 3);
    std::set<std::string> variants;
    for (const SweepPoint& p : ablation) variants.insert(p.variant);
    EXPECT_EQ(variants, (std::set<std::string>{"none", "planner", "scheduler", "planner+scheduler", "full"}));
}

namespace {

std::string param(const SweepPoint& p, const std::string& key) {
    for (const auto& [k, v] : p.params)
        if (k == key) return v;
    return "(absent)";
}

}  // namespace

// [sweep.variants]: each variant is a policy with fixed keys, recorded as ablate.variant; policies and variants
// exclude each other; every key is checked
TEST_F(Sweep, VariantsExpandWithTheirKeys) {
    const std::string head = std::string(kTiny) + "seeds = [1, 2]\n";
    const auto points = expand_points(parse_sweep_string(
        head + "[sweep.variants.none]\n\"balance.policy\" = \"static\"\n\"sim.schedule\" = \"none\"\n"
               "[sweep.variants.planner]\n\"balance.policy\" = \"prophet\"\n\"balance.cost_eq\" = 6\n",
        "v.toml"));
    ASSERT_EQ(points.size(), 2u * 2);
    // variants are the innermost axis, in name order
    EXPECT_EQ(points[0].variant, "none");
    EXPECT_EQ(points[0].policy, "static");
    EXPECT_EQ(param(points[0], "ablate.variant"), "\"none\"");
    EXPECT_EQ(param(points[0], "sim.schedule"), "\"none\"");
    EXPECT_EQ(points[1].variant, "planner");
    EXPECT_EQ(points[1].policy, "prophet");
    EXPECT_EQ(param(points[1], "balance.cost_eq"), "6");
    EXPECT_EQ(param(points[1], "sim.schedule"), "\"system\"");
    EXPECT_EQ(points[2].seed, 2);
    // a plain sweep records no variant
    const auto plain = expand_points(parse_sweep_string(head + "policies = [\"static\"]\n", "p.toml"));
    EXPECT_EQ(param(plain[0], "ablate.variant"), "(absent)");
    EXPECT_EQ(param(plain[0], "sim.schedule"), "\"system\"");

    const std::string v = "[sweep.variants.a]\n\"balance.policy\" = \"prophet\"\n";
    EXPECT_NE(sweep_parse_error(head + "policies = [\"static\"]\n" + v).find("sweep.policies"), std::string::npos);
    EXPECT_NE(sweep_parse_error(head + "[sweep.variants.a]\n\"balance.cost_eq\" = 6\n").find("balance.policy"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(head + v + "\"sim.schedul\" = \"none\"\n").find("did you mean"), std::string::npos);
    EXPECT_NE(sweep_parse_error(head + v + "\"sim.schedule\" = \"overlap\"\n").find("sim.schedule"), std::string::npos);
    EXPECT_NE(sweep_parse_error(head + "[sweep.variants]\na = 1\n").find("sweep.variants.a"), std::string::npos);
    EXPECT_NE(sweep_parse_error(head + v + "\"balance.alpha\" = 1.0\n[sweep.grid]\n\"balance.alpha\" = [2.0]\n")
                  .find("also in [sweep.grid]"),
              std::string::npos);
    // engine model has no schedule to set
    try {
        expand_points(parse_sweep_string(head + "engine = \"model\"\n" + v + "\"sim.schedule\" = \"none\"\n", "m.toml"));
        ADD_FAILURE() << "engine model accepted sim.schedule";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("sim.schedule"), std::string::npos) << e.what();
    }
}

// The cost-model keys whose default is the cluster file's are recorded with the file's values (and so applied by
// the engines, which apply every recorded key), unless the sweep sets them.
struct ClusterDefaultCase {
    const char* name;
    const char* cluster;  // experiments/clusters/<cluster>.toml
    const char* trace;    // experiments/traces/<trace>.toml, on the cluster's D
    const char* set;      // a [sweep.grid] line, or ""
    const char* topology_aware;
    const char* trans_broadcast;
};

class SweepClusterDefaults : public ::testing::TestWithParam<ClusterDefaultCase> {
  protected:
    void SetUp() override { fs::current_path(PROPHET_SOURCE_DIR); }
};

TEST_P(SweepClusterDefaults, PointRecordsTheModelItRuns) {
    const ClusterDefaultCase c = GetParam();
    const std::string text = std::string("[sweep]\nname = \"d\"\nclusters = [\"experiments/clusters/") + c.cluster +
                             ".toml\"]\ntraces = [\"experiments/traces/" + c.trace +
                             ".toml\"]\npolicies = [\"static\"]\nseeds = [1]\n" +
                             (*c.set ? std::string("[sweep.grid]\n") + c.set + "\n" : "");
    const auto points = expand_points(parse_sweep_string(text, "d.toml"));
    ASSERT_EQ(points.size(), 1u);
    EXPECT_EQ(param(points[0], "plan.topology_aware"), c.topology_aware);
    EXPECT_EQ(param(points[0], "plan.trans_broadcast"), c.trans_broadcast);
}

INSTANTIATE_TEST_SUITE_P(
    Table, SweepClusterDefaults,
    ::testing::Values(ClusterDefaultCase{"nvlink_pairs_chain", "hpnv-16", "zipf-e16-k2", "", "true", "\"chain\""},
                      ClusterDefaultCase{"nvswitch_nodes_star", "h100-64", "deepseek-v3-e256-k8", "", "true",
                                         "\"star\""},
                      ClusterDefaultCase{"flat_file", "moetuner-h100-ep4", "tiny-e4-d4", "", "false", "\"star\""},
                      ClusterDefaultCase{"sweep_sets_flat", "hpnv-16", "zipf-e16-k2",
                                         "\"plan.topology_aware\" = [false]", "false", "\"chain\""},
                      ClusterDefaultCase{"sweep_sets_star", "hpnv-16", "zipf-e16-k2",
                                         "\"plan.trans_broadcast\" = [\"star\"]", "true", "\"star\""}),
    [](const ::testing::TestParamInfo<ClusterDefaultCase>& info) { return std::string(info.param.name); });

// sim.schedule picks the simulated schedule: static under "none" is its own system (equal up to the measured
// planning time, recorded as busy_ms.plan); prophet under "none" exposes
// the Trans and Agg that "blockwise" hides; fastermoe's own system ("system" = "fastermoe") hides under the
// all-to-alls part of what "none" exposes
TEST_F(Sweep, SimScheduleKeyChangesTheSchedule) {
    const SweepSpec spec = parse_sweep_string(
        "[sweep]\nname = \"sched\"\nclusters = [\"experiments/clusters/hpwnv-16.toml\"]\n"
        "traces = [\"experiments/sweeps/paper-e16-k2-s.toml\"]\nseeds = [1]\n"
        "[sweep.variants.static-system]\n\"balance.policy\" = \"static\"\n"
        "[sweep.variants.static-none]\n\"balance.policy\" = \"static\"\n\"sim.schedule\" = \"none\"\n"
        "[sweep.variants.blockwise]\n\"balance.policy\" = \"prophet\"\n\"sim.schedule\" = \"blockwise\"\n"
        "[sweep.variants.none]\n\"balance.policy\" = \"prophet\"\n\"sim.schedule\" = \"none\"\n"
        "[sweep.variants.fm-system]\n\"balance.policy\" = \"fastermoe\"\n"
        "[sweep.variants.fm-shadow]\n\"balance.policy\" = \"fastermoe\"\n\"sim.schedule\" = \"fastermoe\"\n"
        "[sweep.variants.fm-none]\n\"balance.policy\" = \"fastermoe\"\n\"sim.schedule\" = \"none\"\n",
        "sched.toml");
    ASSERT_EQ(run_sweep(spec, options()).ran, 7);
    Store store = Store::open(db_);
    std::map<std::string, double> ms, plan_ms;  // per variant: mean iteration, and its measured planning time
    for (const RunRow& row : store.list_runs("sched")) {
        std::string variant;
        for (const auto& [k, v] : store.get_params(row.run_id))
            if (k == "ablate.variant") variant = v;
        const auto m = store.get_metrics(row.run_id, "mean_iteration_ms");
        ASSERT_EQ(m.size(), 1u);
        ms[variant] = m[0].value;
        const auto plan = store.get_metrics(row.run_id, "busy_ms.plan");
        plan_ms[variant] = plan.empty() ? 0.0 : plan[0].value;
    }
    ASSERT_EQ(ms.size(), 7u);
    // two runs of one system differ only by their measured (wall-clock) planning time: on a busy machine that is
    // a tenth of a millisecond per iteration, so the tolerance is both runs' planning time plus rounding
    const auto same_system = [&](const std::string& a, const std::string& b) {
        EXPECT_NEAR(ms[a], ms[b], plan_ms[a] + plan_ms[b] + 1e-9 * ms[b]) << a << " vs " << b;
    };
    same_system("\"static-none\"", "\"static-system\"");
    EXPECT_GT(ms["\"none\""], ms["\"blockwise\""] * 1.01);
    same_system("\"fm-system\"", "\"fm-shadow\"");
    EXPECT_LT(ms["\"fm-system\""], ms["\"fm-none\""]);
    std::printf(
        "prophet simulated: blockwise %.2f ms, none %.2f ms; fastermoe: own %.2f ms, none %.2f ms; static "
        "%.2f ms; planning: fastermoe %.3f/%.3f ms\n",
        ms["\"blockwise\""], ms["\"none\""], ms["\"fm-system\""], ms["\"fm-none\""], ms["\"static-system\""],
        plan_ms["\"fm-system\""], plan_ms["\"fm-shadow\""]);
}

TEST(SweepFormat, Duration) {
    EXPECT_EQ(format_duration(80), "1m20s");
    EXPECT_EQ(format_duration(12.2), "12s");
    EXPECT_EQ(format_duration(3720), "1h02m");
}
