#include "balance/rebalance.h"

#include <algorithm>

#include "balance/device_load.h"
#include "balance/moves.h"
#include "core/error.h"

namespace prophet {
namespace {

// iterations [begin, end) of `trace`
TraceView sub_view(const TraceView& trace, int begin, int end) {
    TraceView v = trace;
    const size_t L = static_cast<size_t>(trace.num_layers), E = static_cast<size_t>(trace.num_experts);
    v.counts = trace.counts + static_cast<size_t>(begin) * L * trace.num_devices * E;
    if (trace.transitions) v.transitions = trace.transitions + static_cast<size_t>(begin) * (L - 1) * E * E;
    v.num_iterations = end - begin;
    return v;
}

// The policy's placement of every layer after planning on `window` (its last iteration's).
std::vector<Placement> plan_on(const std::string& policy, const TraceView& window, const CostModel& cost,
                               const EvalSettings& settings) {
    EvalSettings s = settings;
    s.profile_iterations = 0;  // offline policies plan on the whole window
    s.plan_repeats = 1;
    const PolicyScore score = evaluate_policy(policy, window, cost, s, false);
    const size_t L = static_cast<size_t>(window.num_layers);
    std::vector<Placement> placements;
    for (size_t l = 0; l < L; ++l) placements.push_back(score.layers[score.layers.size() - L + l].placement);
    return placements;
}

// Balancedness of each layer's loads summed over iterations [begin, end), averaged over layers.
double window_balancedness(const TraceView& trace, int begin, int end, const std::vector<Placement>& placements,
                           RouteRule rule) {
    const int L = trace.num_layers, D = trace.num_devices, E = trace.num_experts;
    std::vector<int64_t> summed(static_cast<size_t>(D) * E);
    double total = 0;
    for (int l = 0; l < L; ++l) {
        std::fill(summed.begin(), summed.end(), 0);
        for (int it = begin; it < end; ++it) {
            const int64_t* c = trace.layer(it, l);
            for (size_t k = 0; k < summed.size(); ++k) summed[k] += c[k];
        }
        const LayerFlow flow = compute_flow(summed.data(), D, E, placements[static_cast<size_t>(l)], rule);
        total += balancedness(flow.computed.data(), D);
    }
    return total / L;
}

}  // namespace

ServingScore evaluate_serving(const std::string& policy, const TraceView& trace, const CostModel& cost,
                              const EvalSettings& settings, const RebalanceSettings& rebalance) {
    if (rebalance.rebalance_every < 1)
        throw_config_error("balance.rebalance_every", std::to_string(rebalance.rebalance_every), "must be >= 1",
                           "give the iterations between rebalances (vLLM's default: 3000)");
    if (rebalance.window < 1)
        throw_config_error("balance.window", std::to_string(rebalance.window), "must be >= 1",
                           "give the iterations a rebalance plans on (vLLM's default: 1000)");
    const int I = trace.num_iterations, L = trace.num_layers, D = trace.num_devices, E = trace.num_experts;
    const RouteRule rule = effective_route_rule(policy, settings.options);
    ServingScore out;
    out.name = policy;
    std::vector<Placement> current(static_cast<size_t>(L), Placement::make_static(D, E));
    for (int start = 0; start < I; start += rebalance.rebalance_every) {
        const int end = std::min(I, start + rebalance.rebalance_every);
        if (start > 0) {
            RebalanceRecord r;
            r.at_iteration = start;
            r.window_begin = std::max(0, start - rebalance.window);
            r.window_end = start;
            r.served_end = end;
            std::vector<Placement> next = plan_on(policy, sub_view(trace, r.window_begin, start), cost, settings);
            r.predicted_balancedness = window_balancedness(trace, r.window_begin, start, next, rule);
            r.realised_balancedness = window_balancedness(trace, start, end, next, rule);
            const MoveCost moved = price_new_copies(cost, current, next);
            r.copies_moved = moved.experts;
            r.bytes_moved = moved.bytes;
            r.stall_s = moved.seconds;
            out.stall_ms += moved.seconds * 1e3;
            out.rebalances.push_back(r);
            current = std::move(next);
        }
        for (int it = start; it < end; ++it)
            for (int l = 0; l < L; ++l) {
                const Placement& p = current[static_cast<size_t>(l)];
                const LayerFlow flow = compute_flow(trace.layer(it, l), D, E, p, rule);
                const CostBreakdown c = predict_layer(cost, flow, p);
                out.mean_layer_ms += (2.0 * c.a2a_s + c.fec_s) * 1e3;
                out.mean_balancedness += balancedness(flow.computed.data(), D);
            }
    }
    const double n = static_cast<double>(I) * L;
    out.mean_layer_ms /= n;
    out.mean_balancedness /= n;
    out.amortised_ms = out.stall_ms / n;
    return out;
}

}  // namespace prophet
