// bench_simulator.cpp: the simulator's speed (Google Benchmark; a benchmark, never a test).
//   ./build/bench/bench_simulator --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// Target (issue 12): one 16-GPU iteration of MoE-GPT-M (12 blocks, E = D = 16, top-1, 16384 tokens, the paper
// sweeps' zipf trace experiments/sweeps/paper-e16-k1-m.toml) simulates in well under a millisecond per layer, so
// a 342-point sweep of 20 iterations stays around a minute on 2 cores. Cases: the paper's hpwnv-16 and the
// modern h100-16, topology-aware pricing (the files' default) and the flat Eqs 1/4/5; static placement and
// prophet's planned one (planned once, outside the timed loop); blockwise schedule, no timeline (as sweeps run).
// `per_layer` is the time per simulated layer (the iteration's time / 12).
// Also: prophet's planner on one such layer with and without topology pricing (it prices inside its loop).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "balance/cluster.h"
#include "balance/evaluate.h"
#include "balance/policies.h"
#include "sim/simulator.h"
#include "trace/trace.h"

namespace {

using namespace prophet;

const char* const kClusters[] = {"hpwnv-16.toml", "h100-16.toml"};

const Trace& moe_gpt_m_trace() {
    static const Trace trace =
        generate_trace_from_toml(std::string(PROPHET_SOURCE_DIR) + "/experiments/sweeps/paper-e16-k1-m.toml");
    return trace;
}

TraceView first_iteration(const Trace& t) {
    TraceView v;
    v.counts = t.counts.data();
    v.num_iterations = 1;
    v.num_layers = t.meta.num_layers;
    v.num_devices = t.meta.num_devices;
    v.num_experts = t.meta.num_experts;
    return v;
}

CostModel cost_on(int cluster, bool topology) {
    const Trace& t = moe_gpt_m_trace();
    CostModel m;
    m.cluster = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + kClusters[cluster]);
    m.topology_aware = topology;
    m.model = {t.meta.d_model, t.meta.d_ffn, t.meta.seq_len, 4, t.meta.tokens_per_iteration / t.meta.num_devices};
    return m;
}

// args: cluster index, topology (0/1), policy (0 static, 1 prophet)
void BM_simulate_iteration(benchmark::State& state) {
    const CostModel cost = cost_on(static_cast<int>(state.range(0)), state.range(1) != 0);
    const TraceView view = first_iteration(moe_gpt_m_trace());
    EvalSettings settings;
    settings.plan_repeats = 1;
    const PolicyScore plan =
        evaluate_policy(state.range(2) ? "prophet" : "static", view, cost, settings, /*allow_skip=*/false);
    std::vector<std::vector<Placement>> placements(1);
    for (const LayerScore& ls : plan.layers) placements[0].push_back(ls.placement);
    sim::SimOptions o;
    o.schedule = sim::ScheduleKind::kBlockwise;
    o.record_timeline = false;
    for (auto _ : state) benchmark::DoNotOptimize(sim::simulate(view, placements, cost, o).total_s);
    state.SetLabel(std::string(kClusters[state.range(0)]) + (state.range(1) ? " topology" : " flat") +
                   (state.range(2) ? " prophet" : " static"));
    state.counters["per_layer"] =
        benchmark::Counter(view.num_layers, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// prophet's planner on block 0 of the trace, pricing with or without topology (args: cluster, topology)
void BM_plan_prophet_priced(benchmark::State& state) {
    const CostModel cost = cost_on(static_cast<int>(state.range(0)), state.range(1) != 0);
    const TraceView view = first_iteration(moe_gpt_m_trace());
    BalanceOptions options;
    for (auto _ : state)
        benchmark::DoNotOptimize(plan_prophet(view.counts, view.num_devices, view.num_experts, cost, options));
    state.SetLabel(std::string(kClusters[state.range(0)]) + (state.range(1) ? " topology" : " flat"));
}

}  // namespace

BENCHMARK(BM_simulate_iteration)->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_prophet_priced)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
