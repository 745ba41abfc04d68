// engine_serving.cpp: a sim or model sweep point under balance.regime = serving (docs/sweep.md, "Serving
// points"): the policy with periodic rebalancing (balance/rebalance.h) against static on the same trace, timed by
// the cost model's forward (2 all-to-alls + expert compute per layer, no Trans/Agg), the one-off moves apart.
#include "balance/rebalance.h"
#include "core/error.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep::detail {

namespace {

// the per-rebalance rows (step = the rebalance's first served iteration) and their means (step 0)
void add_rebalance_metrics(std::vector<Metric>& m, const ServingScore& s) {
    double predicted = 0, realised = 0, copies = 0, bytes = 0;
    for (const RebalanceRecord& r : s.rebalances) {
        m.push_back({"rebalance.predicted_balancedness", r.at_iteration, r.predicted_balancedness});
        m.push_back({"rebalance.realised_balancedness", r.at_iteration, r.realised_balancedness});
        m.push_back({"rebalance.copies_moved", r.at_iteration, static_cast<double>(r.copies_moved)});
        m.push_back({"rebalance.bytes_moved", r.at_iteration, r.bytes_moved});
        m.push_back({"rebalance.stall_ms", r.at_iteration, r.stall_s * 1e3});
        predicted += r.predicted_balancedness;
        realised += r.realised_balancedness;
        copies += r.copies_moved;
        bytes += r.bytes_moved;
    }
    const double n = static_cast<double>(s.rebalances.size());
    m.push_back({"serving.rebalances", 0, n});
    m.push_back({"serving.predicted_balancedness", 0, n > 0 ? predicted / n : 0.0});
    m.push_back({"serving.realised_balancedness", 0, n > 0 ? realised / n : 0.0});
    m.push_back({"serving.copies_moved", 0, copies});
    m.push_back({"serving.bytes_moved", 0, bytes});
}

}  // namespace

std::vector<Metric> serving_point_metrics(const ServingPointInput& in, const std::string& policy, double* headline_ms) {
    const ServingScore s = evaluate_serving(policy, in.view, in.cost, in.settings, in.rebalance);
    const double static_ms =
        policy == "static" ? s.mean_layer_ms
                           : evaluate_serving("static", in.view, in.cost, in.settings, in.rebalance).mean_layer_ms;
    std::vector<Metric> m;
    const double iteration_ms = s.mean_layer_ms * in.view.num_layers;  // the forward's MoE part
    m.push_back({"mean_iteration_ms", 0, iteration_ms});
    m.push_back({"serving.layer_ms", 0, s.mean_layer_ms});
    m.push_back({"serving.static_layer_ms", 0, static_ms});
    // the forward against static's, the one-off moves apart (serving.stall_ms, serving.amortised_ms)
    m.push_back({"speedup_vs_static", 0, s.mean_layer_ms > 0 ? static_ms / s.mean_layer_ms : 0.0});
    m.push_back({"serving.stall_ms", 0, s.stall_ms});
    m.push_back({"serving.amortised_ms", 0, s.amortised_ms});
    m.push_back({"serving.balancedness", 0, s.mean_balancedness});
    add_rebalance_metrics(m, s);
    *headline_ms = iteration_ms;
    return m;
}

}  // namespace prophet::sweep::detail
