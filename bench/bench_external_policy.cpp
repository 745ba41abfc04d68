// bench_external_policy.cpp: the round trip of one external-policy plan request (schema v1, docs/policies.md)
// with the shipped Python example, per layer, at E = 256, D = 64 (Google Benchmark):
//   ./build/bench/bench_external_policy --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// One iteration = the request written (64 x 256 counts and the placement as JSON), the example's plan, its reply
// read and validated: what `prophet plan` reports as the external policy's plan_us. The process starts once.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "balance/external_policy.h"
#include "balance/policy_registry.h"
#include "planner_inputs.h"

namespace {

using namespace prophet;

void BM_external_round_trip(benchmark::State& state) {
    const int E = static_cast<int>(state.range(0)), D = static_cast<int>(state.range(1));
    const std::vector<int64_t> counts = bench::zipf_counts(D, E, 7);
    CostModel cost = bench::cost_for(D);
    BalanceOptions options;
    options.external_command =
        "/usr/bin/python3 " + std::string(PROPHET_SOURCE_DIR) + "/experiments/policies/hottest_to_least_loaded.py";
    PolicySession session(options, cost, /*num_layers=*/1, E);
    LayerPlanRequest request;
    request.iteration = 1;
    request.counts = counts.data();
    request.num_devices = D;
    request.num_experts = E;
    request.cost = &cost;
    request.options = &options;
    session.external();  // the process start and the hello are outside the timed loop
    for (auto _ : state) benchmark::DoNotOptimize(session.external().plan_layer(request));
}

}  // namespace

BENCHMARK(BM_external_round_trip)->Args({256, 64})->ArgNames({"E", "D"})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
