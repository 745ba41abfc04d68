// policies.h: every balancing policy as a plain function over plain arrays (no MPI, no CUDA).
//
// Per-layer policies plan one MoE layer from a D x E count matrix (counts[d*E + e] = tokens device d routes to
// expert e). Which counts they see is the caller's choice: `prophet` plans iteration j+1 from iteration j's
// counts, `prophet-oracle` and `fastermoe` from the current iteration's. Offline policies (`eplb`, `moetuner`)
// plan all layers once from a profiling window and keep the placement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"
#include "balance/token_path.h"

namespace prophet {

struct BalanceOptions {
    // prophet (Algorithm 1)
    double alpha = 3.0;  // balanced when max(H) - min(H) < alpha * I / E (Eq 7); I = assignments/iter
    int cost_eq = 8;     // planner objective: 8 = scheduler-coupled Eq 8 (paper's "full", authors' code); 6 = Eq 6
    // balance.cost_eq = 0 ("auto", the key's default): cost_eq stays 8 here and the caller picks the equation of
    // the schedule it runs (train: 6 with schedule.mode = none, 8 with blockwise; plan: each system model's own)
    bool cost_eq_auto = false;
    std::string prefix_rule = "best";  // "best": prefix that minimised T' (paper); "improvements": count (code)
    int exclude_devices = -1;          // n: devices excluded per chosen expert; -1 = those routing 0 tokens to it
    int max_replicas_per_device = 0;   // memory cap on replicas a device holds per layer (0 = none)
    RouteRule route_rule = RouteRule::kOwner;
    // balance.route_to = "auto" (the key's default): route_rule stays kOwner here and plan/sim use each policy's
    // paper_route_rule (eplb: even split, flow: flow); train resolves it the same way into route_rule
    bool route_auto = false;
    // balance.token_path (token_path.h): how a token travels between MoE layers; "auto" (the key's default): stays
    // kHome here and plan / serving use each policy's paper_token_path (moetuner: layer_to_layer)
    TokenPath token_path = TokenPath::kHome;
    bool token_path_auto = false;
    // static, deepspeed
    double capacity_factor = 0;  // > 0: capacity ceil(cf * k*S_local / E) per expert and device; tokens above
                                 // it are dropped (static: reported only; deepspeed: dropped and padded to it)
    // eplb
    int eplb_redundant_slots = -1;     // -1: min(D, E * (D - 1)) (one extra slot per device; none on D = 1)
    std::string eplb_mode = "global";  // "global" | "hierarchical"
    int eplb_groups = 1;               // expert groups for the hierarchical policy
    // moetuner
    std::string ilp_objective = "minmax";  // ILP 1: "minmax" | "sumdev"
    double ilp_gap = 0.025;                // relative MIP gap
    double ilp_time_limit_s = 10.0;        // per ILP solve
    int ilp2_exact_max_devices = 6;  // ILP 2 exact up to this D (D = 8 spends the whole time limit); above: heuristic
    // ILP 2 places clusters by the layer-to-layer traffic (the paper); false: by Eq 13's memory balance alone, the
    // ablation that shows what the traffic term buys on the layer-to-layer token path (token_path.h)
    bool ilp2_traffic = true;
    // top-n broadcast baseline (Fig 15)
    int broadcast_top = 2;
    // flow (policy_flow.h): what load it plans for, and the transfer gate's horizon (0: transfers every iteration)
    std::string flow_predict = "ewma";  // "ewma" | "previous"
    double flow_z = 1.0;                // ewma: mean + flow_z * standard deviation
    double flow_decay = 0.5;            // ewma: weight of the old statistics per batch
    int flow_horizon = 0;               // > 0: batches a one-off move must pay back within (serving)
    // ablation switches (docs/policies.md "Ablation of flow's components"); true = flow as designed
    bool flow_transfer_aware = true;  // false: candidates scored without Trans/Agg, no transfer gate
    bool flow_topology = true;        // false: planned on the flat cost model, no nearest-device tie-breaks
    bool flow_hot_sets = true;        // also the hot-set family (flow_hotset.h); false: the other families only
    int flow_extra_copy_rounds = 8;   // rounds of single extra copies after the families (0: none)
    // external (external_policy.h): the command (split without a shell), its reply deadline, and its role:
    // online (per iteration and layer, from the previous iteration's counts) or offline (once, from the window)
    std::string external_command;
    double external_timeout_s = 10.0;
    bool external_offline = false;
};

// The routing rule a policy runs under: its paper's (paper_route_rule) when balance.route_to = auto, else the
// rule set.
inline RouteRule effective_route_rule(const std::string& policy, const BalanceOptions& options) {
    return options.route_auto ? paper_route_rule(policy) : options.route_rule;
}

// The token path a policy is scored under: its paper's (paper_token_path) when balance.token_path = auto, else
// the path set.
inline TokenPath effective_token_path(const std::string& policy, const BalanceOptions& options) {
    return options.token_path_auto ? paper_token_path(policy) : options.token_path;
}

// --- per-layer policies -----------------------------------------------------------------------------------
Placement plan_static(int num_devices, int num_experts);
// tokens DeepSpeed's capacity C = ceil(k * S_local / E * cf) would drop, summed over devices and experts;
// tokens_per_device = S_local * k assignments per device
int64_t static_dropped_tokens(const int64_t* counts, int num_devices, int num_experts, double capacity_factor);

// DeepSpeed-MoE's dispatch under static placement (the paper's baseline): every device sends every expert exactly
// `capacity` token slots, padding the shortfall; compute and all-to-all are sized by the padded slots.
//   capacity_factor = 0: dropless, capacity = max over devices and experts of counts (DeepSpeed's drop_tokens =
//                        False: the largest local count, all-reduced with max over the expert-parallel group);
//   capacity_factor > 0: capacity ceil(cf * k*S_local / E) per device (drop_tokens = True); tokens above it are
//                        dropped (*dropped, summed) and never computed.
// Returns the padded counts [D*E] to score with the static placement.
std::vector<int64_t> deepspeed_dispatch_counts(const int64_t* counts, int num_devices, int num_experts,
                                               double capacity_factor, int64_t* dropped);

// FasterMoE dynamic shadowing (its Algorithm 1 on the given counts): experts by descending global load,
// each shadowed to every device, while the modelled latency falls.
Placement plan_fastermoe(const int64_t* counts, int num_devices, int num_experts, const CostModel& cost,
                         const BalanceOptions& options);

// Pro-Prophet's locality-based greedy (Algorithm 1). `tokens_per_iteration_assignments` is I of Eq 7.
struct ProphetTrace {
    int steps = 0;          // greedy iterations taken
    int chosen_prefix = 0;  // experts kept
    double cost_before_s = 0;
    double cost_after_s = 0;  // predicted T' of the kept prefix, on the planning counts
};
Placement plan_prophet(const int64_t* counts, int num_devices, int num_experts, const CostModel& cost,
                       const BalanceOptions& options, ProphetTrace* trace = nullptr);

// Broadcast the n most loaded experts to every device (the paper's Fig 15 "top2"/"top3" baseline).
Placement plan_broadcast_top(const int64_t* counts, int num_devices, int num_experts, int top_n);

// Exact optimum of T' over every replica set (owners fixed to static) by enumeration: the test oracle.
// Refuses instances with more than 2^22 candidates.
Placement plan_exhaustive(const int64_t* counts, int num_devices, int num_experts, const CostModel& cost,
                          const BalanceOptions& options);

// --- offline policies -------------------------------------------------------------------------------------
// DeepSeek EPLB: replicate-then-pack with `redundant` extra slots; loads [L][E] (summed over the profiling
// window); never puts two replicas of one expert on one device. Returns one placement per layer; the
// primary slot of each expert is its owner.
std::vector<Placement> plan_eplb(const std::vector<double>& loads, int num_layers, int num_devices, int num_experts,
                                 int num_nodes, const BalanceOptions& options);

// MoETuner two-stage ILP (CBC). expert_loads [L][E]; transitions [L-1][E][E] (may be empty: ILP 2 then only
// balances memory); link_cost[g1*D + g2] = 1 / bandwidth (0 on the diagonal).
struct IlpReport {
    double ilp1_objective = 0;
    double ilp1_bound = 0;
    int ilp1_layers = 0;          // ILP 1 solves (one per layer)
    int ilp1_layers_optimal = 0;  // of them, proven within options.ilp_gap (the others hit the time limit)
    bool ilp2_optimal = false;    // ILP 2 exact and proven within options.ilp_gap
    double ilp2_objective = 0;
    double ilp2_bound = 0;
    bool ilp2_exact = false;
    double solve_s = 0;
};
std::vector<Placement> plan_moetuner(const std::vector<double>& expert_loads, const std::vector<double>& transitions,
                                     int num_layers, int num_devices, int num_experts,
                                     const std::vector<double>& link_cost, const BalanceOptions& options,
                                     IlpReport* report = nullptr);
// Both stages as one ILP (small instances only), for the two-stage gap.
std::vector<Placement> plan_moetuner_joint(const std::vector<double>& expert_loads,
                                           const std::vector<double>& transitions, int num_layers, int num_devices,
                                           int num_experts, const std::vector<double>& link_cost,
                                           const BalanceOptions& options, IlpReport* report = nullptr);

// Names accepted by balance.policy / --policy, in report order (the registry's rows, policy_registry.h).
const std::vector<std::string>& policy_names();

// The cost equation that describes the system a policy belongs to (its registry row): 8 for prophet and
// prophet-oracle (Pro-Prophet runs its block-wise scheduler, which hides Trans and Agg behind compute), 6 for every
// other (their systems move parameters on the critical path). `prophet plan` reports this as the policy's
// predicted time.
int system_cost_eq(const std::string& policy);

// ==== added by the EPLB / MoETuner implementation (policy_eplb.cpp, policy_moetuner.cpp) ===================
// Extra entry points for tests, reports and the joint-vs-two-stage gap. Nothing above depends on them.

// plan_eplb with a report: which mode ran and why (hierarchical falls back to global when
// eplb_groups % num_nodes != 0), and the physical slot layout.
struct EplbReport {
    std::string mode_used;     // "global" | "hierarchical"
    std::string note;          // "" or why the requested mode was not used
    int physical_slots = 0;    // S = E + redundant
    int slots_per_device = 0;  // S / D (every device holds exactly this many physical experts)
    std::vector<int> copies;   // [L*E] physical copies of each expert (owner + replicas)
    int repairs = 0;           // duplicate-avoiding swaps the packing needed (over all layers)
};
std::vector<Placement> plan_eplb(const std::vector<double>& loads, int num_layers, int num_devices, int num_experts,
                                 int num_nodes, const BalanceOptions& options, EplbReport* report);

// EPLB's even-split load model: every holder of e (owner or replica) gets loads[e] / holders(e).
// layer_loads: [E]; returns [D] per-device load.
std::vector<double> even_split_device_loads(const Placement& placement, const double* layer_loads);

// MoETuner ILP 1 alone, one layer: loads [E] -> cluster[e] in [0, D), every cluster non-empty (E >= D).
// objective/bound in load units: max_c T_c ("minmax") or sum_c |T_c - mean| ("sumdev").
struct Ilp1Result {
    std::vector<int> cluster;  // [E]
    double objective = 0;
    double bound = 0;
    bool optimal = false;  // proven within options.ilp_gap
    double solve_s = 0;
};
Ilp1Result moetuner_ilp1_layer(const double* loads, int num_experts, int num_devices, const BalanceOptions& options);
// tests: ilp_only = no warm start and no fallback, the answer is CBC's own (cluster -1/-2 where it is invalid)
Ilp1Result moetuner_ilp1_layer(const double* loads, int num_experts, int num_devices, const BalanceOptions& options,
                               bool ilp_only);

// MoETuner ILP 2 alone: clusters [L][E] (cluster of each expert, clusters in [0, D)) -> gpu_of_cluster [L][D]
// (a permutation per layer). objective = sum over layer pairs of the busiest ordered GPU pair's
// traffic * link_cost; memory_deviation = max_g |experts held by g over all layers - E*L/D| (Eq 13 asks 0;
// with free cluster sizes the planner enforces the smallest achievable value, see docs/policies-offline.md).
struct Ilp2Result {
    std::vector<int> gpu_of_cluster;  // [L*D]
    double objective = 0;
    double bound = 0;
    double memory_deviation = 0;
    bool exact = false;    // the ILP ran (D <= ilp2_exact_max_devices); false: greedy + local search
    bool optimal = false;  // exact and proven within options.ilp_gap
    double solve_s = 0;
};
Ilp2Result moetuner_ilp2(const std::vector<int>& clusters, const std::vector<double>& transitions, int num_layers,
                         int num_devices, int num_experts, const std::vector<double>& link_cost,
                         const BalanceOptions& options);

// Test and benchmark switches for moetuner_ilp2 (the plain overload uses the defaults).
struct Ilp2Switches {
    bool chain_dp = true;   // D <= 6: the exact DP over layer permutations without Eq 13 (bound / answer)
    int formulation = 0;    // exact ILP 2 model: 0 = default (compact), 1 = z-RLT, 2 = compact
    bool ilp_only = false;  // tests: no heuristic, no DP; warm start = identity if feasible; answer = CBC's
};
Ilp2Result moetuner_ilp2(const std::vector<int>& clusters, const std::vector<double>& transitions, int num_layers,
                         int num_devices, int num_experts, const std::vector<double>& link_cost,
                         const BalanceOptions& options, const Ilp2Switches& switches);

// ILP 2's objective for any owner-only placements [L]: sum_{l < L-1} max_{g1 != g2} link_cost[g1,g2] *
// sum_{e1 on g1 at l, e2 on g2 at l+1} transitions[l][e1][e2].
double moetuner_traffic_objective(const std::vector<Placement>& placements, const std::vector<double>& transitions,
                                  const std::vector<double>& link_cost);

// The joint objective J (dimensionless) that plan_moetuner_joint minimises, for any owner-only placements:
//   load_term    = sum_l  LoadObj_l / mean_l,   LoadObj_l = max_g T[g,l] (minmax) or sum_g |T[g,l] - mean_l|
//                  (sumdev), mean_l = sum_e loads[l][e] / D (layers with no load contribute 0)
//   traffic_term = sum_{l<L-1} u_l / U_l,       u_l as in moetuner_traffic_objective, U_l = (sum of
//                  transitions[l]) * max_{g1 != g2} link_cost (all of layer l's traffic on the dearest link)
//   objective    = load_term + traffic_term
// plan_moetuner_joint's IlpReport: ilp1_objective = load_term, ilp2_objective = traffic_term,
// ilp1_bound = ilp2_bound = CBC's lower bound on J, ilp2_exact = J proven within options.ilp_gap.
struct JointObjective {
    double load_term = 0;
    double traffic_term = 0;
    double objective = 0;
};
JointObjective moetuner_joint_objective(const std::vector<Placement>& placements,
                                        const std::vector<double>& expert_loads, const std::vector<double>& transitions,
                                        const std::vector<double>& link_cost, const BalanceOptions& options);
// Size limits of plan_moetuner_joint (above them it throws a config error, exit code 3).
constexpr int kJointMaxDevices = 4;
constexpr int kJointMaxExperts = 8;
constexpr int kJointMaxLayers = 4;
// ==== end of EPLB / MoETuner additions ===================================================================

}  // namespace prophet
