// options.h: the `balance.*` config keys shared by `prophet plan`, `train` and `sweep`.
#pragma once

#include <string>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/policies.h"
#include "core/config.h"

namespace prophet {

// Adds balance.policy (choices: policy_names(), plus "all" when allow_all) and every BalanceOptions key.
void add_balance_keys(Schema& schema, bool allow_all, const std::string& default_policy);
BalanceOptions balance_options_from(const Config& config);

// The plan.* keys that turn a trace and a cluster into a cost model (shared by `prophet plan` and `prophet
// sweep`): topology_aware, compute_scale, bandwidth_scale, d_model, d_ffn, seq_len, bytes_per_elem.
// scale_note is appended to the help of the two scale keys.
void add_cost_model_keys(Schema& schema, const std::string& scale_note);

// What the cost model needs to know of a trace (lib/balance does not depend on lib/trace).
struct TraceShape {
    int num_devices = 0;               // D
    int num_experts = 0;               // E
    int64_t tokens_per_iteration = 0;  // global, before top-k
    int d_model = 0, d_ffn = 0, seq_len = 0;  // 0 = unknown
};

// The trace's device count against the cluster's; an input error (exit 3) naming both files when they differ.
void check_trace_devices(const ClusterSpec& cluster, const std::string& cluster_origin, int trace_devices,
                         const std::string& trace_origin);
// plan.topology_aware and plan.trans_broadcast = "chain" as a run prices them: the config's value where it sets
// the key, else the cluster file's (its topology, its trans_broadcast).
bool planning_topology_aware(const Config& config, const ClusterSpec& cluster);
bool planning_chain_broadcast(const Config& config, const ClusterSpec& cluster);
// Sets cost.topology_aware and cost.trans_broadcast by those two rules on cost.cluster, so that one cluster file is
// priced alike by plan, the sim sweeps and the serving replay; overrides: a config that may set the plan.* keys
// (nullptr: the file's own choices).
void apply_cluster_pricing(CostModel& cost, const Config* overrides);

// Checks the trace against the cluster (same D; E divisible by D) with errors (exit 3) naming trace_origin and
// cluster_origin, then builds the cost model from the cluster, the trace's dimensions and the plan.* overrides
// of `config` (the keys of add_cost_model_keys). dims_fix says how to set plan.d_model where the caller is.
CostModel cost_model_for_trace(const ClusterSpec& cluster, const std::string& cluster_origin, const TraceShape& trace,
                               const std::string& trace_origin, const Config& config, const std::string& dims_fix);

}  // namespace prophet
