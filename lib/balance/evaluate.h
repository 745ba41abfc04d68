// evaluate.h: runs one policy over a whole routing trace (plain arrays) and scores every (iteration, layer).
//
// Who sees what is the policy's registry row (policy_registry.h): `prophet` plans iteration j from iteration j-1's
// counts (iteration 0 uses the static placement); `flow` likewise, but plans iteration 0 from the profiling window's
// other iterations (first_plan_counts); `prophet-oracle`, `fastermoe`, `top2`, `top3` and `exhaustive`
// plan on the current counts; `eplb` and `moetuner` plan once from the profiling window (the first
// `profile_iterations` iterations, all when 0: in-sample) and keep that placement; `external` as
// balance.external_role says, its process started once per call. Every placement is then scored on the
// iteration's actual counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/policies.h"

namespace prophet {

struct TraceView {
    const int64_t* counts = nullptr;       // [I][L][D][E]
    const int64_t* transitions = nullptr;  // [I][L-1][E][E] or nullptr
    int num_iterations = 0;
    int num_layers = 0;
    int num_devices = 0;
    int num_experts = 0;
    const int64_t* layer(int iteration, int l) const {
        return counts + (static_cast<size_t>(iteration) * num_layers + l) * static_cast<size_t>(num_devices) * num_experts;
    }
};

struct EvalSettings {
    BalanceOptions options;
    int plan_repeats = 5;         // timing repeats per planning call (median reported)
    int profile_iterations = 0;   // offline policies' profiling window (0: every iteration)
    int num_nodes = 1;            // for eplb's hierarchical mode
};

struct LayerScore {
    int iteration = 0;
    int layer = 0;
    CostBreakdown cost;
    double max_mean_load = 0;  // max_i H_i / mean_i H_i
    double balancedness = 0;   // mean_i H_i / max_i H_i (vLLM / SGLang; device_load.h)
    double balance_std = 0;    // population std of H_i (tokens)
    double rb_vs_static = 0;   // balance_std(static) / balance_std(policy); 0 when the policy's std is 0 and static's too
    int replicas = 0;
    int max_device_replicas = 0;  // replicas on the device holding the most (its extra expert slots)
    int64_t experts_moved = 0;    // expert copies Trans sends (receivers, as trans_bytes counts them)
    double plan_us = 0;        // median planning time of this layer (offline policies: their solve time / L)
    double route_us = 0;       // the batch's routing under the policy's rule (compute_flow: the LP for flow), once
    int64_t dropped_tokens = 0;
    Placement placement;
};

struct PolicyScore {
    std::string name;
    bool skipped = false;
    std::string note;  // why skipped, or a remark (e.g. ILP 2 solved heuristically)
    std::vector<LayerScore> layers;  // [I*L] iteration-major
    // means over every (iteration, layer)
    double mean_system_ms = 0;  // Eq 6 or Eq 8 by system_cost_eq(name): the time of the system the policy belongs to
    double mean_eq6_ms = 0, mean_eq8_ms = 0, mean_max_mean_load = 0, mean_balance_std = 0, mean_rb = 0;
    double mean_a2a_ms = 0;           // one all-to-all (CostBreakdown::a2a_s; layer_to_layer: the mean of in and out)
    double mean_a2a_bytes = 0, mean_trans_bytes = 0, mean_agg_bytes = 0, mean_replicas = 0;
    double median_plan_us = 0;
    double median_route_us = 0;     // median of LayerScore::route_us: what routing one batch of a layer costs
    double mean_balancedness = 0;   // vLLM / SGLang balancedness, mean over layers
    double mean_experts_moved = 0;  // expert copies moved per layer (Trans; Agg moves as many gradients back)
    // the most replica memory one device holds in one iteration: sum over layers of its replicas x 2 expert_bytes
    // (weights by Trans + their gradient for Agg), max over devices and iterations
    double extra_memory_bytes_per_device = 0;
    double mean_dropped_tokens = 0;
    double mean_fastermoe_ms = 0;     // FasterMoE's system model (CostBreakdown::fastermoe_s)
    double mean_owner_move_ms = 0;    // owner moves charged per layer (CostBreakdown::owner_move_s, in every column)
    double mean_exposed_trans_ms = 0, mean_exposed_agg_ms = 0;                  // Eq 8's, transfer_credit's split
    double mean_exposed_trans_chunked_ms = 0, mean_exposed_agg_chunked_ms = 0;  // with ideal chunks
    int planned_cost_eq = 0;          // the equation the policy's planner optimised (0: it has no cost objective)
    std::string route_rule;           // the routing rule it was scored under
    std::string token_path;           // the token path it was scored under (token_path.h): home | layer_to_layer
    std::string solver_status;        // moetuner*: "ILP 1 optimal; ILP 2 time limit, gap 3.1%" etc.; else ""
};

// Does the policy's planner optimise a cost equation (BalanceOptions::cost_eq)? Its registry row says.
bool plans_with_cost_eq(const std::string& policy);

// "optimal" or "time limit, gap x%" per ILP stage (joint: the one ILP of moetuner-joint)
std::string ilp_status(const IlpReport& report, bool joint);

// The counts a policy whose row plans iteration 0 from the window (PolicyRow::first_plan_from_window) plans that
// iteration from: the rounded mean [D*E] counts of layer `layer` over the profiling window's iterations other than
// iteration 0, [1, w) with w = profile_iterations (0: every iteration). The window an offline policy plans from, less
// the counts iteration 0 is scored on. Empty when the window holds iteration 0 only (the policy then runs static).
std::vector<int64_t> first_plan_counts(const TraceView& trace, int layer, int profile_iterations);

// With settings.options.cost_eq_auto the planners optimise their own system's equation (system_cost_eq).
// Throws prophet::Error for an unknown policy name. Instances too large for `exhaustive` / `moetuner-joint`
// come back skipped with a note when allow_skip is true (used by --policy all), else throw.
PolicyScore evaluate_policy(const std::string& name, const TraceView& trace, const CostModel& cost,
                            const EvalSettings& settings, bool allow_skip);

}  // namespace prophet
