// plan_bound.h: `prophet plan`'s lower-bound row, every policy's gap to it, and the practitioners' metrics
// (balance/bounds.h; docs/bounds.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "balance/bounds.h"
#include "store/store.h"

namespace prophet::cli {

// One policy's means per model (ms) and the metrics beside them, as `prophet plan` computed them.
struct PolicyTimes {
    std::string name;
    bool layer_to_layer = false;  // scored on the layer_to_layer token path: compared with that path's bound
    double eq6_ms = 0, eq8_ms = 0, fastermoe_ms = 0, sim_ms = 0;
    const PolicyScore* score = nullptr;  // the policy's own system's planning (Eq 8 for prophet's, else Eq 6)
};

struct ModelBounds {
    double eq6_ms = 0, eq8_ms = 0, fastermoe_ms = 0, sim_ms = 0;
};
// The bound a policy is compared with under each model (its token path's).
ModelBounds bounds_for(const TraceBounds& bounds, bool layer_to_layer);

// prints the bound row and, per policy, its gap per model and the practitioners' metrics
void print_bound_tables(const TraceBounds& bounds, const std::vector<PolicyTimes>& policies, double static_eq6_ms,
                        int num_experts, int max_replicas_per_device);
nlohmann::json bound_json(const TraceBounds& bounds, int max_replicas_per_device);
// gap_to_bound per model and the metrics, merged into the policy's JSON object (score_json's layout)
void add_policy_bound_json(nlohmann::json& policy, const PolicyTimes& times, const TraceBounds& bounds,
                           int num_experts);
// metrics plan.bound.* (means: step 0, layer -1; per layer: step = iteration, layer = l; the layer_to_layer path's
// as *_l2l_ms when a policy takes it) and plan.<policy>.gap_* and .layer_to_layer (1: gaps against that path)
void put_bound_metrics(Store& store, const std::string& run_id, const TraceBounds& bounds,
                       const std::vector<PolicyTimes>& policies, int num_layers, int num_experts);

}  // namespace prophet::cli
