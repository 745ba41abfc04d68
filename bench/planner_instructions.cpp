// planner_instructions.cpp: a fixed number of plans of one policy on the planner benchmarks' inputs, for counting
// instructions under callgrind (ci/bench-regress.sh), where a timing loop would not be repeatable:
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=prophet_counted_plans
//   ./build/bench/planner_instructions prophet 32 16 10    (one command line)
// flow-top8 is BM_plan_flow_top8's workload (top-8 of 4096 tokens per device, flow's scratch kept across plans).
// Only prophet_counted_plans is counted: input generation, one warm-up plan (first-touch allocations) and the
// process around them are not. Prints the plans' replica count so the compiler cannot drop them.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "balance/policies.h"
#include "balance/policy_flow.h"
#include "planner_inputs.h"

namespace {

using namespace prophet;

struct Input {
    std::string policy;
    int E = 0, D = 0;
    std::vector<int64_t> counts;     // [D*E]
    std::vector<double> loads;       // [E], eplb's input
    CostModel cost;
    BalanceOptions options;
    FlowScratch* scratch = nullptr;  // flow-top8: kept across plans, as BM_plan_flow_top8 keeps it
};

int64_t replicas(const Placement& p) {
    int64_t n = 0;
    for (uint8_t r : p.replica) n += r;
    return n;
}

int64_t plan_once(const Input& in) {
    if (in.policy == "prophet") return replicas(plan_prophet(in.counts.data(), in.D, in.E, in.cost, in.options));
    if (in.policy == "fastermoe") return replicas(plan_fastermoe(in.counts.data(), in.D, in.E, in.cost, in.options));
    if (in.policy == "flow")
        return replicas(
            plan_flow(in.counts.data(), in.D, in.E, in.cost, in.options, Placement::make_static(in.D, in.E)));
    if (in.policy == "flow-top8")
        return replicas(plan_flow(in.counts.data(), in.D, in.E, in.cost, in.options, Placement::make_static(in.D, in.E),
                                  nullptr, FlowScoring::kFastSplit, in.scratch));
    return replicas(plan_eplb(in.loads, 1, in.D, in.E, 1, in.options).front());
}

}  // namespace

// the counted region (callgrind --toggle-collect); extern "C" and noinline so that its name is stable
extern "C" __attribute__((noinline)) int64_t prophet_counted_plans(const Input* in, int plans) {
    int64_t total = 0;
    for (int i = 0; i < plans; ++i) total += plan_once(*in);
    return total;
}

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s prophet|fastermoe|eplb|flow|flow-top8 E D PLANS\n", argv[0]);
        return 2;
    }
    Input in;
    in.policy = argv[1];
    in.E = std::atoi(argv[2]);
    in.D = std::atoi(argv[3]);
    const int plans = std::atoi(argv[4]);
    const bool top8 = in.policy == "flow-top8";
    if (in.policy != "prophet" && in.policy != "fastermoe" && in.policy != "eplb" && in.policy != "flow" && !top8) {
        std::fprintf(stderr,
                     "planner_instructions: policy '%s' is not one of prophet, fastermoe, eplb, flow, flow-top8\n",
                     argv[1]);
        return 2;
    }
    if (in.E < 1 || in.D < 1 || in.E % in.D != 0 || plans < 1) {
        std::fprintf(stderr, "planner_instructions: need E, D >= 1 with E %% D == 0 and PLANS >= 1 (got %s %s %s)\n",
                     argv[2], argv[3], argv[4]);
        return 2;
    }
    in.counts = top8 ? bench::zipf_counts(in.D, in.E, 7, 8 * 4096) : bench::zipf_counts(in.D, in.E, 7);
    in.cost = bench::cost_for(in.D);
    if (in.policy == "flow" || top8) in.options.route_rule = RouteRule::kFlow;  // BM_plan_flow's setting
    FlowScratch scratch;
    in.scratch = &scratch;
    in.loads.assign(in.E, 0.0);
    for (int d = 0; d < in.D; ++d)
        for (int e = 0; e < in.E; ++e) in.loads[e] += static_cast<double>(in.counts[static_cast<size_t>(d) * in.E + e]);
    const int64_t warm = plan_once(in);
    const int64_t total = prophet_counted_plans(&in, plans);
    std::printf("%s E=%d D=%d: %d plans, %lld replicas in all (warm-up plan: %lld)\n", in.policy.c_str(), in.E, in.D,
                plans, static_cast<long long>(total), static_cast<long long>(warm));
    return 0;
}
