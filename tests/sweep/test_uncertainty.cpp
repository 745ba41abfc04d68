// test_uncertainty.cpp: truth_scale / uncertainty in a sweep file (validated with clear errors, expanded into
// truth.*_scale grid axes), and the shipped uncertainty sweep's band: non-empty and holding the nominal value.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "core/error.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"
#include "sweep_parse_error.h"

namespace fs = std::filesystem;
using namespace prophet;
using namespace prophet::sweep;
using prophet::testing::sweep_parse_error;

namespace {

std::string spec_text(const std::string& engine, const std::string& extra) {
    return "[sweep]\nname = \"u\"\nengine = \"" + engine +
           "\"\nclusters = [\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
           "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\npolicies = [\"static\"]\nseeds = [1]\n" + extra;
}

const GridAxis* axis(const SweepSpec& spec, const std::string& key) {
    for (const GridAxis& a : spec.grid)
        if (a.key == key) return &a;
    return nullptr;
}

double metric(const detail::SimulatedPoint& p, const std::string& key) {
    for (const detail::Metric& m : p.metrics)
        if (m.key == key && m.layer < 0 && m.step == 0) return m.value;
    ADD_FAILURE() << "no metric " << key;
    return 0;
}

std::string param(const SweepPoint& p, const std::string& key) {
    for (const auto& [k, v] : p.params)
        if (k == key) return v;
    return "";
}

}  // namespace

class Uncertainty : public ::testing::Test {
  protected:
    void SetUp() override { fs::current_path(PROPHET_SOURCE_DIR); }
};

TEST_F(Uncertainty, ShorthandBecomesThreeTruthAxes) {
    const SweepSpec u = parse_sweep_string(spec_text("sim", "uncertainty = 0.3\n"), "u.toml");
    for (const char* k : {"truth.compute_scale", "truth.bandwidth_scale", "truth.latency_scale"}) {
        const GridAxis* a = axis(u, k);
        ASSERT_NE(a, nullptr) << k;
        EXPECT_EQ(a->values, (std::vector<std::string>{"0.7", "1.0", "1.3"})) << k;
    }
    EXPECT_EQ(expand_points(u).size(), 27u);
}

TEST_F(Uncertainty, TruthScaleTableBecomesSortedTruthAxes) {
    const SweepSpec t = parse_sweep_string(
        spec_text("sim", "truth_scale = { inter_bandwidth = [0.5, 1.0], compute = [0.8] }\n"), "u.toml");
    ASSERT_NE(axis(t, "truth.inter_bandwidth_scale"), nullptr);
    EXPECT_EQ(axis(t, "truth.inter_bandwidth_scale")->values.size(), 2u);
    ASSERT_NE(axis(t, "truth.compute_scale"), nullptr);
    EXPECT_EQ(axis(t, "truth.bandwidth_scale"), nullptr);
    EXPECT_TRUE(std::is_sorted(t.grid.begin(), t.grid.end(),
                               [](const GridAxis& a, const GridAxis& b) { return a.key < b.key; }));
}

TEST_F(Uncertainty, EveryDefectNamesTheKeyWithItsRule) {
    EXPECT_NE(sweep_parse_error(spec_text("sim", "uncertainty = 1.5\n")).find("sweep.uncertainty"), std::string::npos);
    EXPECT_NE(sweep_parse_error(spec_text("sim", "uncertainty = \"30%\"\n")).find("(0, 1)"), std::string::npos);
    EXPECT_NE(sweep_parse_error(spec_text("sim", "uncertainty = 0.3\ntruth_scale = { compute = [0.9] }\n"))
                  .find("beside truth_scale"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(spec_text("sim", "truth_scale = { flops = [0.9] }\n")).find("sweep.truth_scale.flops"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(spec_text("sim", "truth_scale = { compute = [0.0] }\n")).find("> 0"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(spec_text("sim", "truth_scale = { compute = [] }\n")).find("non-empty"),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(spec_text("model", "uncertainty = 0.3\n")).find("only engine = \"sim\""),
              std::string::npos);
    EXPECT_NE(sweep_parse_error(spec_text("sim", "uncertainty = 0.3\n[sweep.grid]\n\"truth.compute_scale\" = [2.0]\n"))
                  .find("also set by truth_scale"),
              std::string::npos);
    // a truth axis written in the grid of a model sweep: rejected when the points expand
    const SweepSpec model = parse_sweep_string(spec_text("model", "[sweep.grid]\n\"truth.compute_scale\" = [0.5]\n"),
                                               "u.toml");
    try {
        expand_points(model);
        ADD_FAILURE() << "a model sweep with truth.compute_scale = 0.5 expanded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no simulated truth"), std::string::npos) << e.what();
    }
    EXPECT_EQ(sweep_parse_error(spec_text("sim", "[sweep.grid]\n\"sim.iteration\" = [\"full\"]\n")), "");
    EXPECT_THROW(expand_points(parse_sweep_string(
                     spec_text("model", "[sweep.grid]\n\"sim.iteration\" = [\"full\"]\n"), "u.toml")),
                 Error);
    EXPECT_NE(
        sweep_parse_error(spec_text("sim", "[sweep.grid]\n\"sim.allreduce\" = [\"ddp\"]\n")).find("sim.allreduce"),
        std::string::npos);
    EXPECT_THROW(expand_points(parse_sweep_string(spec_text("model", "[sweep.grid]\n\"sim.plan_time\" = [\"none\"]\n"),
                                                  "u.toml")),
                 Error);
}

// sim.plan_time = none: the Plan op of an online policy takes no time, so a point's simulated times depend on no
// clock: no planning time is charged (measured charges what this run's planning took, never 0 s) and two runs
// agree to the bit
TEST_F(Uncertainty, PlanTimeNoneChargesNoPlanningTime) {
    std::string text = spec_text("sim", "[sweep.grid]\n\"sim.plan_time\" = [\"none\"]\n");
    text.replace(text.find("[\"static\"]"), 10, "[\"prophet\"]");  // an online policy: it has a Plan op
    const SweepSpec spec = parse_sweep_string(text, "u.toml");
    const std::vector<SweepPoint> points = expand_points(spec);
    ASSERT_EQ(points.size(), 1u);
    ASSERT_EQ(points[0].policy, "prophet");
    const detail::SimulatedPoint first = detail::run_simulated_point(spec, points[0]);
    const detail::SimulatedPoint second = detail::run_simulated_point(spec, points[0]);
    EXPECT_EQ(metric(first, "busy_ms.plan"), 0.0);
    for (const char* key : {"busy_ms.plan", "mean_iteration_ms", "speedup_vs_static", "mean_exposed_comm_ms"})
        EXPECT_EQ(metric(first, key), metric(second, key)) << key;
}

// The shipped sweep, prophet's 27 truth points: the band of the speedup and of the iteration time is non-empty
// and holds the nominal point; a slower truth (every scale against it) is slower than nominal, a faster one faster.
// With sim.plan_time = none: the sweep's default charges each layer's planning time as measured on this machine,
// which a loaded machine stretches by more than a latency step of the truth moves the time, so the extremes'
// order would depend on the load (the planner plans the same placements at every truth point).
TEST_F(Uncertainty, ShippedSweepBandHoldsTheNominalValue) {
    SweepSpec spec = parse_sweep_file("experiments/sweeps/uncertainty-hpnv.toml");
    ASSERT_EQ(axis(spec, "sim.plan_time"), nullptr) << "the shipped sweep sets sim.plan_time itself";
    spec.grid.push_back({"sim.plan_time", {"\"none\""}});
    std::sort(spec.grid.begin(), spec.grid.end(), [](const GridAxis& a, const GridAxis& b) { return a.key < b.key; });
    std::map<std::string, std::pair<double, double>> by_scales;  // "c b l" -> (iteration ms, speedup)
    double lo_ms = 1e300, hi_ms = 0, lo_sp = 1e300, hi_sp = 0;
    for (const SweepPoint& p : expand_points(spec)) {
        if (p.policy != "prophet") continue;
        const detail::SimulatedPoint r = detail::run_simulated_point(spec, p);
        const double ms = metric(r, "mean_iteration_ms"), sp = metric(r, "speedup_vs_static");
        by_scales[param(p, "truth.compute_scale") + " " + param(p, "truth.bandwidth_scale") + " " +
                  param(p, "truth.latency_scale")] = {ms, sp};
        lo_ms = std::min(lo_ms, ms), hi_ms = std::max(hi_ms, ms);
        lo_sp = std::min(lo_sp, sp), hi_sp = std::max(hi_sp, sp);
    }
    ASSERT_EQ(by_scales.size(), 27u);
    const auto nominal = by_scales.at("1.0 1.0 1.0");
    EXPECT_LT(lo_ms, hi_ms);
    EXPECT_LT(lo_sp, hi_sp) << "the speedup band is empty";
    EXPECT_LE(lo_ms, nominal.first);
    EXPECT_GE(hi_ms, nominal.first);
    EXPECT_LE(lo_sp, nominal.second);
    EXPECT_GE(hi_sp, nominal.second);
    EXPECT_GT(by_scales.at("0.7 0.7 1.3").first, nominal.first);
    EXPECT_LT(by_scales.at("1.3 1.3 0.7").first, nominal.first);
    EXPECT_DOUBLE_EQ(by_scales.at("0.7 0.7 1.3").first, hi_ms);
    EXPECT_DOUBLE_EQ(by_scales.at("1.3 1.3 0.7").first, lo_ms);
}
