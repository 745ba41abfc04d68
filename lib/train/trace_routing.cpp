// trace_routing.cpp: a trace's counts as a rank's routing (see trace_routing.h).
#include "train/trace_routing.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace prophet {

std::vector<int64_t> trace_rank_counts(const Trace& trace, int iteration, int layer, int rank, int ranks, int N, int K) {
    const int Dt = trace.meta.num_devices, E = trace.meta.num_experts;
    const int64_t* m = trace.layer_counts(iteration, layer);  // [Dt][E]
    std::vector<int64_t> c(E, 0);
    for (int d = 0; d < Dt; d++)
        if (Dt >= ranks ? d % ranks == rank : d == rank % Dt)
            for (int e = 0; e < E; e++) c[e] += m[(size_t)d * E + e];
    const int64_t total = (int64_t)N * K;
    int64_t S = std::accumulate(c.begin(), c.end(), int64_t{0});
    if (S == 0) {
        std::fill(c.begin(), c.end(), 1);
        S = E;
    }
    // floor of the share, then the rest by largest remainder
    std::vector<int64_t> q(E);
    std::vector<std::pair<int64_t, int>> rest(E);  // (remainder numerator, e)
    int64_t given = 0;
    for (int e = 0; e < E; e++) {
        const __int128 scaled = (__int128)c[e] * total;
        q[e] = (int64_t)(scaled / S);
        rest[e] = {(int64_t)(scaled % S), e};
        given += q[e];
    }
    std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int i = 0; given < total; i++, given++) q[rest[i].second]++;
    // a token takes an expert at most once: cap at N, the excess to the experts with room, most traffic first
    int64_t excess = 0;
    for (int64_t& v : q)
        if (v > N) {
            excess += v - N;
            v = N;
        }
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return c[a] > c[b]; });
    while (excess > 0)
        for (int e : order) {
            if (excess == 0) break;
            const int64_t room = std::min<int64_t>(N - q[e], excess);
            q[e] += room;
            excess -= room;
        }
    return q;
}

void assign_from_counts(const std::vector<int64_t>& counts, int N, int K, int* expert_idx) {
    // the multiset of experts in expert order; entry i goes to token i mod N, choice i / N: an expert's run of
    // counts[e] <= N consecutive entries lands on counts[e] different tokens
    int64_t i = 0;
    for (int e = 0; e < (int)counts.size(); e++) {
        PROPHET_ASSERT(counts[e] >= 0 && counts[e] <= N);
        for (int64_t j = 0; j < counts[e]; j++, i++) expert_idx[(size_t)(i % N) * K + (size_t)(i / N)] = e;
    }
    PROPHET_ASSERT_MSG(i == (int64_t)N * K, "assignment counts must sum to N * K");
}

TraceRouter::TraceRouter(Trace trace, int num_layers, int num_experts, int rank, int ranks)
    : trace_(std::move(trace)), rank_(rank), ranks_(ranks) {
    if (trace_.meta.num_experts != num_experts)
        throw_config_error("routing.trace", "\"" + trace_.meta.source + "\"",
                           "has E = " + std::to_string(trace_.meta.num_experts) + " experts, the model has model.E = " +
                               std::to_string(num_experts),
                           "record or generate a trace of the model's E, or set model.E to the trace's");
    if (trace_.meta.num_layers != num_layers)
        throw_config_error("routing.trace", "\"" + trace_.meta.source + "\"",
                           "has L = " + std::to_string(trace_.meta.num_layers) + " layers, the model has model.L = " +
                               std::to_string(num_layers),
                           "record or generate a trace of the model's L, or set model.L to the trace's");
}

void TraceRouter::route(int64_t step, int layer, int N, int K, int* expert_idx) const {
    const int iteration = (int)(step % trace_.meta.num_iterations);
    assign_from_counts(trace_rank_counts(trace_, iteration, layer, rank_, ranks_, N, K), N, K, expert_idx);
}

}  // namespace prophet
