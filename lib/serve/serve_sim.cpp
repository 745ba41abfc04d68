#include "serve/serve_sim.h"

#include <algorithm>
#include <cmath>

#include "balance/cluster.h"
#include "balance/options.h"
#include "core/error.h"
#include "serve/serving_planner.h"
#include "sim/inference.h"

namespace prophet::serve {

namespace {

std::vector<int64_t> scaled(const std::vector<int64_t>& v, double s) {
    std::vector<int64_t> out(v.size());
    for (size_t k = 0; k < v.size(); ++k) out[k] = static_cast<int64_t>(std::llround(static_cast<double>(v[k]) * s));
    return out;
}

}  // namespace

CostModel simulated_cost_model(const std::string& cluster_path, int num_devices, int d_model, int d_ffn,
                               int bytes_per_elem, int64_t tokens_per_device) {
    CostModel cost;
    cost.cluster = load_cluster_file(cluster_path);
    if (cost.cluster.num_devices != num_devices)
        throw_config_error("serve.sim_clusters", "\"" + cluster_path + "\"",
                           "has num_devices = " + std::to_string(cost.cluster.num_devices) +
                               ", the run has " + std::to_string(num_devices) + " ranks (the routing is per rank)",
                           "simulate a cluster file of " + std::to_string(num_devices) + " devices");
    // as `prophet plan` prices the same file (no plan.* overrides): the busiest link decides an all-to-all where the
    // file describes its topology, else Eq 1 over a2a_gbit_s
    apply_cluster_pricing(cost, nullptr);
    cost.model.d_model = d_model;
    cost.model.d_ffn = d_ffn;
    cost.model.bytes_per_elem = bytes_per_elem;
    cost.model.tokens_per_device = tokens_per_device;
    return cost;
}

ServeRun simulate_serving(const ServeRun& real, const std::string& policy, const CostModel& cost,
                          const BalanceOptions& options, int num_nodes, double token_scale) {
    ServeRun run;
    run.profile = real.profile;
    run.profile.counts = scaled(real.profile.counts, token_scale);
    run.profile.transitions = scaled(real.profile.transitions, token_scale);
    run.profile.last_counts = scaled(real.profile.last_counts, token_scale);
    ServingPlanner planner(policy, run.profile, cost, options, num_nodes);
    run.offline_plan_s = planner.offline_plan_s();
    run.ilp = planner.ilp_report();
    run.offline = planner.offline();
    const int L = run.profile.L, D = run.profile.D;
    TokenPath path = effective_token_path(policy, options);
    if (path == TokenPath::kLayerToLayer && L > 1)
        for (const BatchResult& r : real.measured)
            if (r.transitions.empty()) {
                if (!options.token_path_auto)
                    throw_config_error("balance.token_path", "layer_to_layer",
                                       "the measured batches recorded no layer-to-layer transitions",
                                       "rerun the inference with balance.token_path = layer_to_layer set");
                path = TokenPath::kHome;
            }
    run.token_path = token_path_name(path);
    for (const BatchResult& r : real.measured) {
        BatchResult b;
        b.step = r.step;
        b.loss = r.loss;
        b.counts = scaled(r.counts, token_scale);
        b.transitions = scaled(r.transitions, token_scale);
        for (int l = 0; l < L; ++l)
            b.placements.push_back(planner.plan(l, b.counts.data() + static_cast<size_t>(l) * D * run.profile.E));
        planner.end_iteration(b.counts);
        // Trans is charged against the placement the previous batch ran under; before the first batch a serving
        // system has deployed the offline placement (its replicas are resident), an online one starts static
        const std::vector<Placement>& before = !run.measured.empty() ? run.measured.back().placements : run.offline;
        const std::vector<sim::InferenceLayerTime> t =
            sim::simulate_inference(cost, b.counts, {b.placements}, options.route_rule, 1.0, before, path,
                                    b.transitions);
        b.expert_ms.resize(static_cast<size_t>(L) * D);
        b.a2a_ms.resize(b.expert_ms.size());
        b.layer_ms.resize(b.expert_ms.size());
        b.rows_computed.resize(b.expert_ms.size());
        for (int l = 0; l < L; ++l) {
            double slowest = 0;
            for (int d = 0; d < D; ++d) {
                const size_t at = static_cast<size_t>(l) * D + d;
                b.expert_ms[at] = t[l].expert_s[d] * 1e3;
                b.a2a_ms[at] = t[l].a2a_s[d] * 1e3;
                b.layer_ms[at] = b.expert_ms[at] + b.a2a_ms[at] + t[l].trans_s[d] * 1e3;
                b.rows_computed[at] = t[l].computed[d];
                slowest = std::max(slowest, b.layer_ms[at]);
            }
            b.forward_ms += slowest;
        }
        run.measured.push_back(std::move(b));
    }
    return run;
}

}  // namespace prophet::serve
