// bench_planner.cpp: planning time of one MoE layer per policy over E x D (Google Benchmark).
//   ./build/bench/bench_planner --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Target (a benchmark, not a test): `prophet` plans E = D = 32 in <= 100 us and E = 256, D = 64 in <= 5 ms on one
// core, so that the plan hides inside one all-to-all. Counts: Zipf(1.2) over experts, 1024 tokens per device, k = 2.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "balance/bounds.h"
#include "balance/cluster.h"
#include "balance/flow_routing.h"
#include "balance/options.h"
#include "balance/policies.h"
#include "balance/policy_flow.h"
#include "balance/route_max_flow.h"
#include "core/config.h"
#include "planner_inputs.h"

namespace {

using namespace prophet;
using prophet::bench::cost_for;
using prophet::bench::next_batch;
using prophet::bench::zipf_counts;

void BM_plan_prophet(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const auto counts = zipf_counts(D, E, 7);
    const CostModel cost = cost_for(D);
    BalanceOptions options;
    for (auto _ : state) benchmark::DoNotOptimize(plan_prophet(counts.data(), D, E, cost, options));
}

// the same with alpha = 0.01: Eq 7 almost never stops the search, so the greedy walks every candidate (worst case)
void BM_plan_prophet_full_search(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const auto counts = zipf_counts(D, E, 7);
    const CostModel cost = cost_for(D);
    BalanceOptions options;
    options.alpha = 0.01;
    for (auto _ : state) benchmark::DoNotOptimize(plan_prophet(counts.data(), D, E, cost, options));
}

void BM_plan_fastermoe(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const auto counts = zipf_counts(D, E, 7);
    const CostModel cost = cost_for(D);
    BalanceOptions options;
    for (auto _ : state) benchmark::DoNotOptimize(plan_fastermoe(counts.data(), D, E, cost, options));
}

void BM_plan_eplb(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const auto counts = zipf_counts(D, E, 7);
    std::vector<double> loads(E, 0.0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) loads[e] += static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
    BalanceOptions options;
    for (auto _ : state) benchmark::DoNotOptimize(plan_eplb(loads, 1, D, E, 1, options));
}

// the layer lower bound (balance/bounds.h), top-8 of 4096 tokens per device; issue 22's target: at most flow's
// planning time again (1 ms at E = 256, D = 64; 50 us at E = 32, D = 16)
void BM_layer_bound(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const auto counts = zipf_counts(D, E, 7, 8 * 4096);
    const CostModel cost = model_for_layer(cost_for(D), 1);
    for (auto _ : state) benchmark::DoNotOptimize(layer_bound(cost, counts.data(), D, E, BoundBudget{}, 1, 4));
}

// The timed loop of the flow rows below but BM_plan_flow: plans of `counts` from `current`, the split's buffers kept
// across plans (as the policy registry keeps one per planning thread); counters from the last plan's report, which
// it returns for a row's own counters.
FlowPlanReport time_flow_plans(benchmark::State& state, const std::vector<int64_t>& counts, int D, int E,
                               const CostModel& cost, const BalanceOptions& options, const Placement& current) {
    FlowPlanReport report;
    FlowScratch scratch;
    for (auto _ : state)
        benchmark::DoNotOptimize(
            plan_flow(counts.data(), D, E, cost, options, current, &report, FlowScoring::kFastSplit, &scratch));
    state.counters["candidates"] = report.candidates;
    state.counters["replicas"] = report.replicas;
    return report;
}

// flow: one plan (candidate placements, each scored with the combinatorial split of flow_split.h) from the
// static placement. Target:
// E = 32, D = 16 in <= 50 us and E = 256, D = 64 in <= 1 ms median (issue 22).
void BM_plan_flow(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const auto counts = zipf_counts(D, E, 7);
    const CostModel cost = cost_for(D);
    BalanceOptions options;
    options.route_rule = RouteRule::kFlow;
    const Placement current = Placement::make_static(D, E);
    FlowPlanReport report;
    for (auto _ : state) benchmark::DoNotOptimize(plan_flow(counts.data(), D, E, cost, options, current, &report));
    state.counters["candidates"] = report.candidates;
    state.counters["replicas"] = report.replicas;
}

// the same on the counts BM_layer_bound uses (top-8 of 4096 tokens per device: issue 22's DeepSeek-V3-scale
// workload has 32,768 expert assignments per device, 16x BM_plan_flow's), so that the 1 ms target is read on the
// workload it names; the third argument is balance.flow_extra_copy_rounds (8: flow's default, 0: the candidate
// families alone), so one run shows what the extra-copy pass costs
void BM_plan_flow_top8(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const auto counts = zipf_counts(D, E, 7, 8 * 4096);
    const CostModel cost = cost_for(D);
    BalanceOptions options;
    options.route_rule = RouteRule::kFlow;
    options.flow_extra_copy_rounds = static_cast<int>(state.range(2));
    time_flow_plans(state, counts, D, E, cost, options, Placement::make_static(D, E));
}

// The cost model of a middle layer on the 64-GPU H100 cluster file the DeepSeek-V3-scale case runs on
// (experiments/clusters/h100-64.toml: eight NVLink nodes, a rail NIC per GPU, star broadcast) with DeepSeek-V3's
// expert (d_model 7168, d_ffn 2048; 4-byte elements, `prophet plan`'s default) and 4096 tokens per device.
CostModel h100_64_cost() {
    constexpr int E = 256, D = 64;
    const std::string file = std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/h100-64.toml";
    Schema schema;
    add_cost_model_keys(schema, "");
    const TraceShape shape{D, E, int64_t{4096} * D, 7168, 2048, 4096};  // `prophet plan`'s model, default keys
    return model_for_layer(cost_model_for_trace(load_cluster_file(file), file, shape, "bench", Config(schema), ""), 1);
}

// The same plan on h100_64_cost(). That model is topology-aware, so the hot-set family (flow_hotset.h) and its
// compute levels run, which BM_plan_flow_top8's flat model leaves out: this is the workload of `prophet plan`'s plan
// column at DeepSeek-V3 scale (other counts).
void BM_plan_flow_h100_64(benchmark::State& state) {
    constexpr int E = 256, D = 64;
    const auto counts = zipf_counts(D, E, 7, 8 * 4096);
    const CostModel cost = h100_64_cost();
    BalanceOptions options;
    options.route_rule = RouteRule::kFlow;
    const FlowPlanReport report = time_flow_plans(state, counts, D, E, cost, options, Placement::make_static(D, E));
    state.counters["hot_experts"] = report.hot_experts;
}

// The steady state of a run: the plan of the next batch of the same distribution (another draw, seed 11) from
// the placement flow planned for the batch before (from static), as every plan after a run's first is made. The
// rows above plan from the static placement, as a run's first plan is; these read the other plans' cost.
void plan_flow_steady(benchmark::State& state, int D, int E, const CostModel& cost) {
    const auto before = zipf_counts(D, E, 7, 8 * 4096);
    const auto counts = zipf_counts(D, E, 7, 8 * 4096, 11);
    BalanceOptions options;
    options.route_rule = RouteRule::kFlow;
    const Placement current = plan_flow(before.data(), D, E, cost, options, Placement::make_static(D, E));
    time_flow_plans(state, counts, D, E, cost, options, current);
    state.counters["replicas_before"] = current.num_replicas();
}

void BM_plan_flow_top8_steady(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    plan_flow_steady(state, D, E, cost_for(D));
}

void BM_plan_flow_h100_64_steady(benchmark::State& state) { plan_flow_steady(state, 64, 256, h100_64_cost()); }

// A placement with one replica of each of the D hottest experts of `counts`, on the next device after its owner
// and onwards (the per-batch routers' benchmark case).
Placement hottest_copied_once(const std::vector<int64_t>& counts, int D, int E) {
    std::vector<double> load(E, 0.0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) load[e] += static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
    std::vector<int> order(E);
    for (int e = 0; e < E; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
    Placement p = Placement::make_static(D, E);
    for (int i = 0; i < D; ++i) p.add_replica(order[i % E], (p.owner[order[i % E]] + 1 + i) % D);
    return p;
}

// The per-batch routers' case at E experts, D devices: hottest_copied_once, and two batches of one distribution
// (next_batch: the same LP structure, other counts) that a benchmark alternates.
struct RouteCase {
    int E, D;
    std::vector<int64_t> counts, next;
    CostModel cost;
    Placement placement;
    const int64_t* batch(int64_t call) const { return call % 2 == 0 ? counts.data() : next.data(); }
};
RouteCase route_case(const benchmark::State& state) {
    RouteCase c{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), {}, {}, {}, {}};
    c.counts = zipf_counts(c.D, c.E, 7);
    c.next = next_batch(c.counts, c.D, c.E, 7, 2048, 8);
    c.cost = cost_for(c.D);
    c.placement = hottest_copied_once(c.counts, c.D, c.E);
    return c;
}

// flow's per-batch routing alone on route_case: the LP of each batch warm-started from the basis of the batch
// before. Routing one batch again would reuse its stored optimum and time no solve (lp::solve_lp_cached), which the
// counter `reused` (the share of such calls: 0) rules out.
void BM_route_flow(benchmark::State& state) {
    const RouteCase c = route_case(state);
    forget_routing_lps();  // then the second batch, untimed, so that the first timed call warm-starts from it
    flow_route_layer(c.batch(1), c.D, c.E, c.placement, &c.cost);
    FlowRouteReport report;
    int64_t calls = 0, reused = 0, warm = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(flow_route_layer(c.batch(calls), c.D, c.E, c.placement, &c.cost, &report));
        ++calls, reused += report.reused, warm += report.warm_started;
    }
    state.counters["reused"] = calls ? static_cast<double>(reused) / calls : 0.0;
    state.counters["warm"] = calls ? static_cast<double>(warm) / calls : 0.0;
}

// balance.route_to = max_flow on route_case. Counter `over_lp`: the kept split's objective over the routing LP's
// optimum, the worse of the two batches (1: the LP's; computed before timing).
void BM_route_max_flow(benchmark::State& state) {
    const RouteCase c = route_case(state);
    double over_lp = 0;
    for (int64_t call : {0, 1}) {
        FlowRouteReport lp;
        MaxFlowRouteReport kept;
        flow_route_layer(c.batch(call), c.D, c.E, c.placement, &c.cost, &lp);
        max_flow_route_layer(c.batch(call), c.D, c.E, c.placement, &c.cost, &kept);
        over_lp = std::max(over_lp, kept.objective / lp.lp_objective);
    }
    int64_t calls = 0;
    for (auto _ : state)
        benchmark::DoNotOptimize(max_flow_route_layer(c.batch(calls++), c.D, c.E, c.placement, &c.cost));
    state.counters["over_lp"] = over_lp;
}

void flow_sizes(benchmark::internal::Benchmark* b) {
    b->Args({32, 16});
    b->Args({256, 64});
    b->ArgNames({"E", "D"});
}

void flow_sizes_extra_rounds(benchmark::internal::Benchmark* b) {
    for (int rounds : {8, 0}) {
        b->Args({32, 16, rounds});
        b->Args({256, 64, rounds});
    }
    b->ArgNames({"E", "D", "extra_rounds"});
}

// E x D with E a multiple of D (static EP needs E/D experts per device)
void grid(benchmark::internal::Benchmark* b) {
    for (int E : {8, 32, 64, 256})
        for (int D : {8, 16, 32, 64})
            if (E % D == 0) b->Args({E, D});
    b->ArgNames({"E", "D"});
}

BENCHMARK(BM_plan_prophet)->Apply(grid)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_prophet_full_search)->Apply(grid)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_fastermoe)->Apply(grid)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_eplb)->Apply(grid)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_layer_bound)->Args({32, 16})->Args({256, 64})->ArgNames({"E", "D"})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_flow)->Apply(flow_sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_flow_top8)->Apply(flow_sizes_extra_rounds)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_flow_h100_64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_flow_top8_steady)->Apply(flow_sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_flow_h100_64_steady)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_route_flow)->Apply(flow_sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_route_max_flow)->Apply(flow_sizes)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
