#include "balance/options.h"

#include "core/error.h"

namespace prophet {

namespace {

// flow's keys (policy_flow.h): what it plans for, the serving gate, and the ablation switches
void add_flow_keys(Schema& s) {
    s.add_string("balance.flow_predict", "ewma", {"previous", "ewma"},
                 "flow: plan for the previous batch's counts or for an EWMA mean + flow_z * standard deviation");
    s.add_float("balance.flow_z", 1.0, 0.0, 100.0, "flow, ewma: standard deviations above the mean");
    s.add_float("balance.flow_decay", 0.5, 0.0, 0.999, "flow, ewma: weight kept by the old statistics per batch");
    s.add_int("balance.flow_horizon", 0, 0, 1 << 30,
              "flow: 0 = a placement's transfers recur every iteration (training: they are in its predicted time); "
              "H > 0 = moves are one-off (serving): keep the current placement unless H batches of gain pay for them");
    s.add_bool("balance.flow_transfer_aware", true,
               "flow: score candidates with their Trans/Agg and gate moves by balance.flow_horizon; false (ablation): "
               "score compute + all-to-all only, so every copy looks free and no move is gated");
    s.add_bool("balance.flow_hot_sets", true,
               "flow: also try the hot-set family (the hottest experts held in every node or NVLink domain, "
               "docs/policies.md), on topology-aware cluster files; it pays where the all-to-all crosses nodes, at the "
               "price of many copies (memory: plan's extra-mem column; cap them with balance.max_replicas_per_device) "
               "and slower routing LPs; false: the other families only (ablation)");
    s.add_int("balance.flow_extra_copy_rounds", 8, 0, 1024,
              "flow: rounds of extra copies tried after its candidate families (one more copy of an expert that has "
              "copies, on its heaviest sender or the least loaded device; kept when the plan's predicted time drops); "
              "0 = none (ablation)");
    s.add_bool("balance.flow_topology", true,
               "flow: plan on the run's cost model (topology-aware where the cluster file is) and prefer replicas and "
               "token sources near the owner; false (ablation): plan on the flat model (plan.topology_aware = false) "
               "with no nearness tie-breaks (the routing of the batch itself is unchanged)");
}

}  // namespace

void add_balance_keys(Schema& s, bool allow_all, const std::string& default_policy) {
    std::vector<std::string> choices = policy_names();
    if (allow_all) choices.push_back("all");
    s.add_string("balance.policy", default_policy, choices, "placement policy");
    s.add_float("balance.alpha", 3.0, 0.0, 1e6, "prophet: balanced when max(H)-min(H) < alpha*I/E (Eq 7)", true);
    s.add_int("balance.cost_eq", 0, 0, 8,
              "prophet/fastermoe/exhaustive planner objective: 0 = the run's schedule (train: Eq 6 with schedule.mode "
              "= none or fastermoe, Eq 8 with blockwise; plan: each system model's own equation), 8 (Eq 8) or 6 (Eq 6)");
    s.add_string("balance.prefix_rule", "best", {"best", "improvements"},
                 "prophet: keep the prefix minimising T' (paper) or the number of improvements (authors' code)");
    s.add_int("balance.exclude_devices", -1, -1, 65536,
              "prophet: n devices left out per chosen expert (-1: those routing no tokens to it)");
    s.add_int("balance.max_replicas_per_device", 0, 0, 65536, "replicas one device may hold per layer (0: no cap)");
    s.add_string("balance.route_to", "auto", {"auto", "owner", "least_loaded", "even_split", "flow", "max_flow"},
                 "where tokens for a replicated expert go: auto = each policy's paper (eplb: even_split, flow: flow, "
                 "others: owner), the owner, the least-loaded holder, split evenly over all holders, flow = the "
                 "per-batch split minimising the layer's compute + all-to-all time (an LP on the batch's counts), or "
                 "max_flow = the same aim without the LP (max-flow splits at five compute levels, the best under the "
                 "LP's objective kept: for large layers, where the LP is slow); train's executor runs every rule");
    s.add_string("balance.token_path", "auto", {"auto", "home", "layer_to_layer"},
                 "how a token travels between MoE layers: home = back to its home device after every layer "
                 "(dispatch + combine per layer), layer_to_layer = from layer l's expert device straight to layer "
                 "l+1's (MoETuner's dispatch, the traffic its ILP 2 places for; needs transitions); auto = each "
                 "policy's paper (moetuner: layer_to_layer, others: home; train: home)");
    s.add_float("balance.capacity_factor", 0.0, 0.0, 1e6,
                "capacity cf*k*S_local/E per expert and device (0: none): static reports the tokens it would drop; "
                "deepspeed drops them and pads every expert to it (0: pads to the largest count, dropless)");
    s.add_int("balance.eplb_redundant_slots", -1, -1, 1 << 20,
              "eplb: extra expert slots in total (-1: one per device, at most E * (D - 1), so none on one device)");
    s.add_string("balance.eplb_mode", "global", {"global", "hierarchical"}, "eplb: replicate globally or within nodes");
    s.add_int("balance.eplb_groups", 1, 1, 1 << 20, "eplb hierarchical: groups of consecutive experts");
    s.add_string("balance.ilp_objective", "minmax", {"minmax", "sumdev"}, "moetuner ILP 1 objective");
    s.add_float("balance.ilp_gap", 0.025, 0.0, 1.0, "moetuner: relative MIP gap at which CBC stops");
    s.add_float("balance.ilp_time_limit_s", 10.0, 0.0, 86400.0,
                "moetuner: wall-clock budget of each ILP stage, s (ILP 1: all layers together; ILP 2; the joint ILP)",
                true);
    s.add_int("balance.ilp2_exact_max_devices", 6, 1, 64, "moetuner: solve ILP 2 exactly up to this many devices");
    s.add_bool("balance.ilp2_traffic", true,
               "moetuner: ILP 2 places clusters by the layer-to-layer traffic (the paper); false: by memory balance "
               "alone (Eq 13), the ablation that shows what the traffic term buys under balance.token_path = "
               "layer_to_layer");
    add_flow_keys(s);
    s.add_int("balance.profile_iterations", 0, 0, 1 << 30,
              "eplb/moetuner/offline external: plan from the first N iterations (0: all, in-sample)");
    s.add_string("balance.external", "", {},
                 "external: the policy's command and arguments, split into words without a shell ('...' and "
                 "\"...\" quote, \\ escapes; docs/policies.md), started once per run, spoken to in line-delimited "
                 "JSON");
    s.add_float("balance.external_timeout_s", 10.0, 0.001, 86400.0,
                "external: seconds each reply may take (past it: exit 6, the run failed)");
    s.add_string("balance.external_role", "online", {"online", "offline"},
                 "external: online = asked per iteration and layer with the previous iteration's counts; offline = "
                 "asked once with the profiling window's [layers][experts] weight");
}

BalanceOptions balance_options_from(const Config& c) {
    BalanceOptions o;
    o.alpha = c.get_float("balance.alpha");
    o.cost_eq = static_cast<int>(c.get_int("balance.cost_eq"));
    if (o.cost_eq != 0 && o.cost_eq != 6 && o.cost_eq != 8)
        throw_config_error("balance.cost_eq", std::to_string(o.cost_eq), "must be 0 (auto), 6 or 8",
                           "--set balance.cost_eq=8");
    o.cost_eq_auto = o.cost_eq == 0;
    if (o.cost_eq_auto) o.cost_eq = 8;
    o.prefix_rule = c.get_string("balance.prefix_rule");
    o.exclude_devices = static_cast<int>(c.get_int("balance.exclude_devices"));
    o.max_replicas_per_device = static_cast<int>(c.get_int("balance.max_replicas_per_device"));
    o.route_auto = c.get_string("balance.route_to") == "auto";
    o.route_rule = o.route_auto ? RouteRule::kOwner : parse_route_rule(c.get_string("balance.route_to"));
    o.token_path_auto = c.get_string("balance.token_path") == "auto";
    o.token_path = o.token_path_auto ? TokenPath::kHome : parse_token_path(c.get_string("balance.token_path"));
    o.capacity_factor = c.get_float("balance.capacity_factor");
    o.eplb_redundant_slots = static_cast<int>(c.get_int("balance.eplb_redundant_slots"));
    o.eplb_mode = c.get_string("balance.eplb_mode");
    o.eplb_groups = static_cast<int>(c.get_int("balance.eplb_groups"));
    o.ilp_objective = c.get_string("balance.ilp_objective");
    o.ilp_gap = c.get_float("balance.ilp_gap");
    o.ilp_time_limit_s = c.get_float("balance.ilp_time_limit_s");
    o.ilp2_exact_max_devices = static_cast<int>(c.get_int("balance.ilp2_exact_max_devices"));
    o.ilp2_traffic = c.get_bool("balance.ilp2_traffic");
    o.flow_predict = c.get_string("balance.flow_predict");
    o.flow_z = c.get_float("balance.flow_z");
    o.flow_decay = c.get_float("balance.flow_decay");
    o.flow_horizon = static_cast<int>(c.get_int("balance.flow_horizon"));
    o.flow_transfer_aware = c.get_bool("balance.flow_transfer_aware");
    o.flow_topology = c.get_bool("balance.flow_topology");
    o.flow_hot_sets = c.get_bool("balance.flow_hot_sets");
    o.flow_extra_copy_rounds = static_cast<int>(c.get_int("balance.flow_extra_copy_rounds"));
    o.external_command = c.get_string("balance.external");
    o.external_timeout_s = c.get_float("balance.external_timeout_s");
    o.external_offline = c.get_string("balance.external_role") == "offline";
    return o;
}

void add_cost_model_keys(Schema& s, const std::string& scale_note) {
    s.add_bool("plan.topology_aware", false,
               "use the topology-aware cost model (link classes, ports, NICs; docs/cluster.md); default when not "
               "set: the cluster file's `topology` (on for files that describe their topology)");
    s.add_float("plan.compute_scale", 1.0, 0.0, 1e6,
                "planner's belief about compute throughput x this factor" + scale_note, true);
    s.add_float("plan.bandwidth_scale", 1.0, 0.0, 1e6, "planner's belief about bandwidths x this factor" + scale_note,
                true);
    s.add_int("plan.d_model", 0, 0, 1 << 20, "C for bytes and FLOPs (0: from the trace)");
    s.add_int("plan.d_ffn", 0, 0, 1 << 22, "F, expert hidden size (0: from the trace)");
    s.add_int("plan.seq_len", 0, 0, 1 << 22, "T for the attention FLOPs of FNEC (0: from the trace)");
    s.add_int("plan.bytes_per_elem", 4, 1, 8, "bytes per activation/parameter element (4: fp32, 2: bf16)");
    s.add_string("plan.trans_receivers", "paper", {"paper", "replicas"},
                 "Eqs 4-5 devices per replicated expert: paper = D - n (owner counted, the paper and the authors' "
                 "code), replicas = D - 1 - n (the replica holders, the bytes that move)");
    s.add_string("plan.trans_broadcast", "star", {"star", "chain"},
                 "topology-aware Trans/Agg: star = the home sends to each receiver (the trainer's point-to-point), "
                 "chain = a pipelined chain through the receivers, node by node (NCCL's ring broadcast), each "
                 "device forwarding at most trans_gbit_s (default: the cluster file's trans_broadcast)");
    s.add_string("plan.transfer_credit", "whole_experts", {"whole_experts", "chunks"},
                 "Eq 8's hidden transfer: whole experts first-fit into the non-expert window then beside expert "
                 "compute (the block-wise scheduler), or chunks filling both windows (the paper's max(0, T - window))");
}

void check_trace_devices(const ClusterSpec& cluster, const std::string& cluster_origin, int trace_devices,
                         const std::string& trace_origin) {
    if (cluster.num_devices != trace_devices)
        throw_input_error(trace_origin,
                          "the trace has D = " + std::to_string(trace_devices) + " devices but the cluster " +
                              cluster_origin + " has num_devices = " + std::to_string(cluster.num_devices),
                          "use a cluster file with num_devices = " + std::to_string(trace_devices) +
                              " or a trace recorded on " + std::to_string(cluster.num_devices) + " devices");
}

bool planning_topology_aware(const Config& c, const ClusterSpec& cluster) {
    return c.has("plan.topology_aware") ? c.get_bool("plan.topology_aware") : cluster.topology;
}

bool planning_chain_broadcast(const Config& c, const ClusterSpec& cluster) {
    return c.has("plan.trans_broadcast") ? c.get_string("plan.trans_broadcast") == "chain" : cluster.chain_broadcast;
}

void apply_cluster_pricing(CostModel& cost, const Config* overrides) {
    const ClusterSpec& cl = cost.cluster;
    cost.topology_aware = overrides ? planning_topology_aware(*overrides, cl) : cl.topology;
    const bool chain = overrides ? planning_chain_broadcast(*overrides, cl) : cl.chain_broadcast;
    cost.trans_broadcast = chain ? TransBroadcast::kChain : TransBroadcast::kStar;
}

CostModel cost_model_for_trace(const ClusterSpec& cluster, const std::string& cluster_origin, const TraceShape& t,
                               const std::string& trace_origin, const Config& c, const std::string& dims_fix) {
    check_trace_devices(cluster, cluster_origin, t.num_devices, trace_origin);
    if (t.num_experts % t.num_devices != 0)
        throw_input_error(trace_origin,
                          "E = " + std::to_string(t.num_experts) + " experts is not divisible by D = " +
                              std::to_string(t.num_devices) + " devices (static EP needs E/D per device)",
                          "use E a multiple of D");
    const auto override_or = [&](const char* key, int from_trace) {
        return c.get_int(key) > 0 ? static_cast<int>(c.get_int(key)) : from_trace;
    };
    CostModel cost;
    cost.cluster = cluster;
    cost.model.d_model = override_or("plan.d_model", t.d_model);
    cost.model.d_ffn = override_or("plan.d_ffn", t.d_ffn);
    cost.model.seq_len = override_or("plan.seq_len", t.seq_len);
    cost.model.tokens_per_device = t.tokens_per_iteration / t.num_devices;
    cost.model.bytes_per_elem = static_cast<int>(c.get_int("plan.bytes_per_elem"));
    apply_cluster_pricing(cost, &c);
    cost.compute_scale = c.get_float("plan.compute_scale");
    cost.bandwidth_scale = c.get_float("plan.bandwidth_scale");
    cost.trans_receivers =
        c.get_string("plan.trans_receivers") == "replicas" ? TransReceivers::kReplicaHolders : TransReceivers::kPaper;
    cost.transfer_credit =
        c.get_string("plan.transfer_credit") == "chunks" ? TransferCredit::kChunks : TransferCredit::kWholeExperts;
    if (cost.model.d_model <= 0 || cost.model.d_ffn <= 0)
        throw_config_error("plan.d_model", std::to_string(cost.model.d_model),
                           "the trace carries no model dimensions and none were set", dims_fix);
    return cost;
}

}  // namespace prophet
