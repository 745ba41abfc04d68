#include "balance/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "balance/device_load.h"
#include "balance/flow_routing.h"
#include "balance/load_forecast.h"
#include "balance/moves.h"
#include "balance/policy_registry.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/timer.h"

namespace prophet {
namespace {

// times fn() `repeats` times, returns the median in microseconds and the last result
template <typename Fn>
auto timed(int repeats, Fn fn, double* median_us) {
    std::vector<double> us;
    auto result = repeats > 1 ? fn() : decltype(fn()){};  // warm-up call when the median is over several
    for (int r = 0; r < repeats; ++r) {
        const int64_t t0 = now_ns();
        result = fn();
        us.push_back((now_ns() - t0) * 1e-3);
    }
    *median_us = median(us);
    return result;
}

void score_layer(LayerScore& s, const int64_t* counts, int D, int E, const CostModel& cost, const BalanceOptions& o) {
    FlowRouteReport routed;  // the routing LP's (kFlow): a reused optimum still counts its solve (routing_seconds)
    const int64_t routed_from = now_ns();
    const LayerFlow flow = compute_flow(counts, D, E, s.placement, o.route_rule, &cost, &routed);
    s.route_us = routing_seconds(static_cast<double>(now_ns() - routed_from) * 1e-9, routed) * 1e6;
    s.cost = predict_layer(cost, flow, s.placement);
    const DeviceLoad load = device_load(flow.computed.data(), D);
    s.balance_std = load.std;
    s.max_mean_load = load.max_mean_load;
    s.balancedness = load.balancedness;
    s.replicas = s.placement.num_replicas();
    const std::vector<int> per_device = s.placement.replicas_per_device();
    s.max_device_replicas = per_device.empty() ? 0 : *std::max_element(per_device.begin(), per_device.end());
    s.experts_moved = cost.expert_bytes() > 0 ? std::llround(s.cost.trans_bytes / cost.expert_bytes()) : 0;
    const Placement fixed = Placement::make_static(D, E);
    const LayerFlow static_flow = compute_flow(counts, D, E, fixed, RouteRule::kOwner);
    const double static_std = device_load(static_flow.computed.data(), D).std;
    s.rb_vs_static = s.balance_std > 0 ? static_std / s.balance_std : (static_std > 0 ? INFINITY : 1.0);
}

// The replica memory of iteration `it`'s layers (the last L of out.layers) on its fullest device: replicas x 2
// expert_bytes (weights and the gradient Agg returns), summed over layers.
double replica_memory_bytes(const PolicyScore& out, int L, int D, const CostModel& cost) {
    std::vector<int64_t> slots(static_cast<size_t>(D), 0);
    for (size_t k = out.layers.size() - L; k < out.layers.size(); ++k) {
        const std::vector<int> per_device = out.layers[k].placement.replicas_per_device();
        for (int d = 0; d < D; ++d) slots[d] += per_device[d];
    }
    return static_cast<double>(*std::max_element(slots.begin(), slots.end())) * 2.0 * cost.expert_bytes();
}

// Rescores iteration `it`'s layers (the last L of out.layers) on the layer-to-layer token path (token_path.h).
// From the trace's counts: deepspeed's padded slots (its own path is the home one) are not re-routed.
void apply_layer_to_layer(PolicyScore& out, int it, const TraceView& trace, const CostModel& cost, RouteRule rule) {
    const int L = trace.num_layers, E = trace.num_experts;
    std::vector<Placement> placements;
    for (size_t k = out.layers.size() - L; k < out.layers.size(); ++k) placements.push_back(out.layers[k].placement);
    const int64_t* transitions = trace.transitions + static_cast<size_t>(it) * (L - 1) * E * E;
    const TokenPathFlow flow = layer_to_layer_flow(trace.layer(it, 0), transitions, placements, rule);
    const std::vector<TokenPathLayer> layers = token_path_layers(cost, flow);
    for (int l = 0; l < L; ++l) apply_token_path(out.layers[out.layers.size() - L + l].cost, layers[l]);
}

std::string gap_text(double objective, double bound) {
    const double gap = objective > 0 ? std::max(0.0, (objective - bound) / objective) : 0.0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "time limit, gap %.2f%%", 100.0 * gap);
    return buf;
}

}  // namespace

std::string ilp_status(const IlpReport& r, bool joint) {
    if (joint) return std::string("joint ILP ") + (r.ilp2_optimal ? "optimal" : gap_text(r.ilp1_objective + r.ilp2_objective, r.ilp1_bound));
    std::string s = "ILP 1 ";
    s += r.ilp1_layers_optimal == r.ilp1_layers
             ? "optimal"
             : gap_text(r.ilp1_objective, r.ilp1_bound) + " (" + std::to_string(r.ilp1_layers - r.ilp1_layers_optimal) +
                   " of " + std::to_string(r.ilp1_layers) + " layers)";
    s += "; ILP 2 ";
    if (!r.ilp2_exact)
        s += "heuristic (greedy + local search)";
    else
        s += r.ilp2_optimal ? "optimal" : gap_text(r.ilp2_objective, r.ilp2_bound);
    return s;
}

namespace {

// The profiling window summed for an offline policy: loads [L][E] and, when the trace has them, transitions
// [L-1][E][E], over the first settings.profile_iterations iterations (all when 0).
struct Window {
    int iterations = 0;
    std::vector<double> loads, transitions;
};

Window profile_window(const TraceView& trace, int profile_iterations) {
    const int I = trace.num_iterations, L = trace.num_layers, D = trace.num_devices, E = trace.num_experts;
    Window w;
    w.iterations = profile_iterations > 0 ? std::min(profile_iterations, I) : I;
    w.loads.assign(static_cast<size_t>(L) * E, 0.0);
    for (int it = 0; it < w.iterations; ++it)
        for (int l = 0; l < L; ++l) {
            const int64_t* c = trace.layer(it, l);
            for (int d = 0; d < D; ++d)
                for (int e = 0; e < E; ++e)
                    w.loads[static_cast<size_t>(l) * E + e] += c[static_cast<size_t>(d) * E + e];
        }
    if (trace.transitions && L > 1) {
        w.transitions.assign(static_cast<size_t>(L - 1) * E * E, 0.0);
        for (int it = 0; it < w.iterations; ++it)
            for (size_t i = 0; i < w.transitions.size(); ++i)
                w.transitions[i] += trace.transitions[static_cast<size_t>(it) * (L - 1) * E * E + i];
    }
    return w;
}

// An offline policy's placements [L], planned once from the window; its note and solver status go to out.
std::vector<Placement> plan_offline(const PolicyRow& row, const TraceView& trace, const CostModel& cost,
                                    const EvalSettings& settings, const BalanceOptions& o, PolicySession& session,
                                    PolicyScore& out, double* us_per_layer) {
    const int L = trace.num_layers, D = trace.num_devices;
    const Window w = profile_window(trace, settings.profile_iterations);
    const std::vector<double> link_cost = link_costs(cost, D);
    WindowPlanRequest request;
    request.window_iterations = w.iterations;
    request.loads = &w.loads;
    request.transitions = &w.transitions;
    request.link_cost = &link_cost;
    request.num_layers = L;
    request.num_devices = D;
    request.num_experts = trace.num_experts;
    request.num_nodes = settings.num_nodes;
    request.options = &o;
    WindowPlanReport report;
    const int64_t t0 = now_ns();
    std::vector<Placement> placements = row.plan_window(request, session, &report);
    *us_per_layer = (now_ns() - t0) * 1e-3 / L;
    out.note = report.note;
    out.solver_status = report.solver_status;
    if (settings.profile_iterations == 0 || settings.profile_iterations >= trace.num_iterations)
        out.note += std::string(out.note.empty() ? "" : "; ") + "in-sample: planned on the iterations it is scored on";
    return placements;
}

// Plans layer s.layer of iteration s.iteration into s.placement and s.plan_us. done: the scores so far
// (iteration-major; the previous iteration's placement is the one in force); profile_iterations: the window a row
// with first_plan_from_window plans iteration 0 from (first_plan_counts). Returns false when it ran unplanned:
// static on iteration 0 of a policy that plans from the previous iteration (there is none) and not from the window.
// forecast: the layer's load forecast (plans_for_forecast; nullptr: none), fed each planning source once, in order.
bool plan_layer_score(LayerScore& s, const PolicyRow& row, PolicyInput input, const TraceView& trace,
                      const std::vector<LayerScore>& done, const std::vector<Placement>& offline, double offline_us,
                      int profile_iterations, const CostModel& lcost, const BalanceOptions& o, int repeats,
                      PolicySession& session, LoadForecast* forecast) {
    const int L = trace.num_layers, D = trace.num_devices, E = trace.num_experts, it = s.iteration, l = s.layer;
    if (input == PolicyInput::kProfileWindow) {
        s.placement = offline[l];
        s.plan_us = offline_us;
        return true;
    }
    const bool previous = input == PolicyInput::kPreviousIteration;
    std::vector<int64_t> first;  // [D*E] iteration 0's planning counts, when the row plans it from the window
    if (previous && it == 0 && row.first_plan_from_window) first = first_plan_counts(trace, l, profile_iterations);
    if (previous && it == 0 && first.empty()) {
        s.placement = plan_static(D, E);
        return false;
    }
    const int64_t* source = !previous ? trace.layer(it, l) : it == 0 ? first.data() : trace.layer(it - 1, l);
    std::vector<int64_t> planning;  // [D*E] the forecast of the sources so far
    // iteration 0's window plan seeds no forecast: its mean holds the later iterations' counts, which the forecast
    // would carry into the plans of the very iterations they are scored on
    const bool window_plan = previous && it == 0;
    if (forecast && !window_plan) forecast->observe(source), planning = forecast->forecast(), source = planning.data();
    LayerPlanRequest request;
    request.iteration = it;
    request.layer = l;
    request.counts = source;
    request.current = it > 0 ? &done[done.size() - L].placement : nullptr;
    request.num_devices = D;
    request.num_experts = E;
    request.cost = &lcost;
    request.options = &o;
    s.placement = timed(
        repeats, [&] { return row.plan_layer(request, session); }, &s.plan_us);
    return true;
}

// [L] load forecasts of `cells` counts each when the row plans for one (plans_for_forecast), else none
std::vector<LoadForecast> layer_forecasts(const PolicyRow& row, const BalanceOptions& o, int L, int cells) {
    if (!plans_for_forecast(row, o)) return {};
    return std::vector<LoadForecast>(L, LoadForecast(static_cast<size_t>(cells), o));
}

// PolicyScore's means over its scored layers (system_eq: the equation of the policy's own system)
void average_over_layers(PolicyScore& out, int system_eq) {
    const double n = static_cast<double>(out.layers.size());
    for (const LayerScore& s : out.layers) {
        out.mean_system_ms += layer_cost(s.cost, system_eq) * 1e3 / n;
        out.mean_eq6_ms += s.cost.eq6_s * 1e3 / n;
        out.mean_eq8_ms += s.cost.eq8_s * 1e3 / n;
        out.mean_max_mean_load += s.max_mean_load / n;
        out.mean_balance_std += s.balance_std / n;
        out.mean_rb += (std::isfinite(s.rb_vs_static) ? s.rb_vs_static : 0.0) / n;
        out.mean_a2a_bytes += s.cost.a2a_bytes / n;
        out.mean_a2a_ms += s.cost.a2a_s * 1e3 / n;
        out.mean_trans_bytes += s.cost.trans_bytes / n;
        out.mean_agg_bytes += s.cost.agg_bytes / n;
        out.mean_replicas += s.replicas / n;
        out.mean_balancedness += s.balancedness / n;
        out.mean_experts_moved += static_cast<double>(s.experts_moved) / n;
        out.mean_dropped_tokens += static_cast<double>(s.dropped_tokens) / n;
        out.mean_fastermoe_ms += s.cost.fastermoe_s * 1e3 / n;
        out.mean_owner_move_ms += s.cost.owner_move_s * 1e3 / n;
        out.mean_exposed_trans_ms += s.cost.exposed_trans_s * 1e3 / n;
        out.mean_exposed_agg_ms += s.cost.exposed_agg_s * 1e3 / n;
        out.mean_exposed_trans_chunked_ms += s.cost.exposed_trans_chunked_s * 1e3 / n;
        out.mean_exposed_agg_chunked_ms += s.cost.exposed_agg_chunked_s * 1e3 / n;
    }
}

// whether the policy's token path is layer to layer (on a trace of more than one layer); exit 3 when it is and the
// trace has no transitions, unless the path was chosen automatically
bool wants_layer_to_layer(const std::string& name, const TraceView& trace, const BalanceOptions& options) {
    const bool layer_to_layer = effective_token_path(name, options) == TokenPath::kLayerToLayer && trace.num_layers > 1;
    if (layer_to_layer && !trace.transitions && !options.token_path_auto)
        throw_config_error("balance.token_path", "layer_to_layer",
                           "needs the trace's layer-to-layer transitions, and this trace has none",
                           "record the trace with transitions (trace.record_transitions = true) or --set "
                           "balance.token_path=home");
    return layer_to_layer;
}

// scores the planned layer s on the layer's counts [D*E] (or on the counts the policy dispatches: deepspeed's
// padded counts; static's dispatch reports the tokens a capacity would drop); asserts the placement is valid
void check_and_score_layer(LayerScore& s, const PolicyRow& row, const std::string& name, const int64_t* counts, int D,
                           int E, const CostModel& lcost, const BalanceOptions& o) {
    std::vector<int64_t> dispatched;
    if (row.dispatch) dispatched = row.dispatch(counts, D, E, o, &s.dropped_tokens);
    const std::string problem = check_placement(s.placement, o.max_replicas_per_device);
    PROPHET_ASSERT_MSG(problem.empty(), "policy " + name + " returned an invalid placement: " + problem);
    score_layer(s, dispatched.empty() ? counts : dispatched.data(), D, E, lcost, o);
}

// the options a policy plans and is scored with: its route rule and, with the auto objective, the equation of its
// own system (8 for prophet's scheduler, 6 for the others), so a sweep or simulation that runs each system's
// schedule plans for it; prophet plan asks per model instead
BalanceOptions options_for_policy(const std::string& name, const BalanceOptions& options) {
    BalanceOptions o = options;
    o.route_rule = effective_route_rule(name, options);
    if (o.cost_eq_auto) o.cost_eq = system_cost_eq(name);
    return o;
}

// the means over layers, the median planning and routing times (plan_us_all: one per planned layer, us) and, when
// the policy's layer-to-layer path fell back to home for want of transitions, a note saying so
void finish_score(PolicyScore& out, int system_eq, const std::vector<double>& plan_us_all, bool fell_back_home) {
    average_over_layers(out, system_eq);
    out.median_plan_us = median(plan_us_all);
    std::vector<double> route_us;
    for (const LayerScore& s : out.layers) route_us.push_back(s.route_us);
    out.median_route_us = median(route_us);
    if (fell_back_home)
        out.note +=
            std::string(out.note.empty() ? "" : "; ") + "no transitions in the trace: scored on the home token path";
}

}  // namespace

std::vector<int64_t> first_plan_counts(const TraceView& trace, int layer, int profile_iterations) {
    const int w = profile_iterations > 0 ? std::min(profile_iterations, trace.num_iterations) : trace.num_iterations;
    if (w < 2) return {};
    const size_t cells = static_cast<size_t>(trace.num_devices) * trace.num_experts;
    std::vector<int64_t> mean(cells, 0);
    for (int it = 1; it < w; ++it) {
        const int64_t* c = trace.layer(it, layer);
        for (size_t k = 0; k < cells; ++k) mean[k] += c[k];
    }
    const int64_t n = w - 1;
    for (int64_t& v : mean) v = (v + n / 2) / n;  // counts are >= 0: round half up
    return mean;
}

namespace {

// After iteration it's layers are scored: the layer_to_layer token path, training's owner moves (an expert whose
// owner changed since the last iteration moves its weights and AdamW state now), the replica memory high-water mark.
void finish_iteration(PolicyScore& out, int it, const TraceView& trace, const CostModel& cost, RouteRule route_rule,
                      bool layer_to_layer) {
    const int L = trace.num_layers;
    if (layer_to_layer && trace.transitions) apply_layer_to_layer(out, it, trace, cost, route_rule);
    charge_owner_moves(out.layers, out.layers.size() - L, L, cost, kTrainingStateCopies);
    out.extra_memory_bytes_per_device =
        std::max(out.extra_memory_bytes_per_device, replica_memory_bytes(out, L, trace.num_devices, cost));
}

}  // namespace

PolicyScore evaluate_policy(const std::string& name, const TraceView& trace, const CostModel& cost,
                            const EvalSettings& settings, bool allow_skip) {
    const PolicyRow& row = policy_row(name);
    const int I = trace.num_iterations, L = trace.num_layers, D = trace.num_devices, E = trace.num_experts;
    const BalanceOptions o = options_for_policy(name, settings.options);
    PolicyScore out;
    out.name = name;
    out.route_rule = route_rule_name(o.route_rule);
    const bool layer_to_layer = wants_layer_to_layer(name, trace, settings.options);
    out.token_path = token_path_name(layer_to_layer && trace.transitions ? TokenPath::kLayerToLayer : TokenPath::kHome);
    out.planned_cost_eq = row.plans_with_cost_eq ? o.cost_eq : 0;

    auto skip_or_throw = [&](const prophet::Error& e) {
        if (!allow_skip) throw;
        out.skipped = true;
        out.note = e.what();
    };
    PolicySession session(o, cost, L, E);  // an external policy's process lives for this run
    const PolicyInput input = policy_input(row, o);
    std::vector<Placement> offline;  // offline policies: planned once from the profiling window
    double offline_us_per_layer = 0;
    if (input == PolicyInput::kProfileWindow) {
        try {
            offline = plan_offline(row, trace, cost, settings, o, session, out, &offline_us_per_layer);
        } catch (const prophet::Error& e) {
            skip_or_throw(e);
            return out;
        }
    }

    std::vector<double> plan_us_all;
    // layer 0 has no window for its transfers (CostModel::first_block): planned and scored so
    const CostModel first_layer = model_for_layer(cost, 0), later_layer = model_for_layer(cost, 1);
    const int repeats = row.plan_once_per_layer ? 1 : settings.plan_repeats;
    std::vector<LoadForecast> forecasts = layer_forecasts(row, o, L, D * E);
    for (int it = 0; it < I; ++it) {
        for (int l = 0; l < L; ++l) {
            const CostModel& lcost = l == 0 ? first_layer : later_layer;
            LayerScore s;
            s.iteration = it;
            s.layer = l;
            bool planned = true;
            try {
                planned = plan_layer_score(s, row, input, trace, out.layers, offline, offline_us_per_layer,
                                           settings.profile_iterations, lcost, o, repeats, session,
                                           forecasts.empty() ? nullptr : &forecasts[l]);
            } catch (const prophet::Error& e) {
                skip_or_throw(e);
                return out;
            }
            check_and_score_layer(s, row, name, trace.layer(it, l), D, E, lcost, o);
            if (planned) plan_us_all.push_back(s.plan_us);
            out.layers.push_back(std::move(s));
        }
        finish_iteration(out, it, trace, cost, o.route_rule, layer_to_layer);
    }

    finish_score(out, system_cost_eq(name), plan_us_all, layer_to_layer && !trace.transitions);
    return out;
}

}  // namespace prophet
