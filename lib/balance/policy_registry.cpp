// policy_registry.cpp: the table of policies (policy_registry.h) and the lookups every caller uses.
#include "balance/policy_registry.h"

#include <nlohmann/json.hpp>

#include "balance/evaluate.h"
#include "balance/external_policy.h"
#include "balance/policy_flow.h"
#include "core/enum_table.h"
#include "core/error.h"

namespace prophet {
namespace {

std::vector<Placement> plan_eplb_window(const WindowPlanRequest& r, PolicySession&, WindowPlanReport*) {
    return plan_eplb(*r.loads, r.num_layers, r.num_devices, r.num_experts, r.num_nodes, *r.options);
}

std::vector<Placement> plan_moetuner_window(const WindowPlanRequest& r, PolicySession&, WindowPlanReport* report) {
    IlpReport ilp;
    std::vector<Placement> out = plan_moetuner(*r.loads, *r.transitions, r.num_layers, r.num_devices, r.num_experts,
                                               *r.link_cost, *r.options, &ilp);
    if (report && !ilp.ilp2_exact)
        report->note = "ILP 2 solved by greedy + local search (D > balance.ilp2_exact_max_devices)";
    if (report) report->solver_status = ilp_status(ilp, false);
    if (report) report->ilp = ilp;
    return out;
}

std::vector<Placement> plan_joint_window(const WindowPlanRequest& r, PolicySession&, WindowPlanReport* report) {
    IlpReport ilp;
    std::vector<Placement> out = plan_moetuner_joint(*r.loads, *r.transitions, r.num_layers, r.num_devices,
                                                     r.num_experts, *r.link_cost, *r.options, &ilp);
    if (report) report->solver_status = ilp_status(ilp, true);
    if (report) report->ilp = ilp;
    return out;
}

std::vector<int64_t> static_dispatch(const int64_t* counts, int D, int E, const BalanceOptions& o, int64_t* dropped) {
    if (dropped) *dropped = static_dropped_tokens(counts, D, E, o.capacity_factor);
    return {};
}

std::vector<int64_t> deepspeed_dispatch(const int64_t* counts, int D, int E, const BalanceOptions& o,
                                        int64_t* dropped) {
    return deepspeed_dispatch_counts(counts, D, E, o.capacity_factor, dropped);
}

Placement static_layer(const LayerPlanRequest& r, PolicySession&) { return plan_static(r.num_devices, r.num_experts); }

Placement prophet_layer(const LayerPlanRequest& r, PolicySession&) {
    return plan_prophet(r.counts, r.num_devices, r.num_experts, *r.cost, *r.options);
}

Placement fastermoe_layer(const LayerPlanRequest& r, PolicySession&) {
    return plan_fastermoe(r.counts, r.num_devices, r.num_experts, *r.cost, *r.options);
}

Placement top2_layer(const LayerPlanRequest& r, PolicySession&) {
    return plan_broadcast_top(r.counts, r.num_devices, r.num_experts, 2);
}

Placement top3_layer(const LayerPlanRequest& r, PolicySession&) {
    return plan_broadcast_top(r.counts, r.num_devices, r.num_experts, 3);
}

Placement exhaustive_layer(const LayerPlanRequest& r, PolicySession&) {
    return plan_exhaustive(r.counts, r.num_devices, r.num_experts, *r.cost, *r.options);
}

// flow: plans statelessly from the counts it is given (the previous iteration's, or their forecast, see
// plans_for_forecast), relabelled against the placement in force
Placement flow_layer(const LayerPlanRequest& r, PolicySession&) {
    const Placement current = r.current ? *r.current : Placement::make_static(r.num_devices, r.num_experts);
    // buffers per thread, not per session: the trainer's planner thread and its main thread may plan at once
    // (PolicyRunner::plan_next is const and runs on both)
    thread_local FlowScratch scratch;
    return plan_flow(r.counts, r.num_devices, r.num_experts, *r.cost, *r.options, current, nullptr,
                     FlowScoring::kFastSplit, &scratch);
}

Placement external_layer(const LayerPlanRequest& r, PolicySession& session) { return session.external().plan_layer(r); }

std::vector<Placement> external_window(const WindowPlanRequest& r, PolicySession& session, WindowPlanReport*) {
    return session.external().plan_window(r);
}

constexpr PolicyInput kPrev = PolicyInput::kPreviousIteration;
constexpr PolicyInput kCur = PolicyInput::kCurrentIteration;
constexpr PolicyInput kWindow = PolicyInput::kProfileWindow;
constexpr RouteRule kOwner = RouteRule::kOwner;
constexpr TokenPath kHome = TokenPath::kHome;
constexpr TokenPath kL2L = TokenPath::kLayerToLayer;

// In report order. Columns: name, input, schedule, cost eq, plans with cost eq, route rule, token path,
// uses transitions, plan once per layer, external process, size limits, description, layer plan, window plan, dispatch,
// and (flow only) first plan from the window.
const std::vector<PolicyRow> kRows = {
    {"static", kCur, "none", 6, false, kOwner, kHome, false, false, false, "",
     "expert e on device e/(E/D), no replicas (dropless static expert parallelism)", static_layer, nullptr,
     static_dispatch},
    {"deepspeed", kCur, "none", 6, false, kOwner, kHome, false, false, false, "",
     "DeepSpeed-MoE: static placement, every expert padded to one capacity per device", static_layer, nullptr,
     deepspeed_dispatch},
    {"fastermoe", kCur, "fastermoe", 6, true, kOwner, kHome, false, false, false, "",
     "FasterMoE: shadow the heaviest experts to every device while the predicted time falls", fastermoe_layer, nullptr,
     nullptr},
    {"prophet", kPrev, "blockwise", 8, true, kOwner, kHome, false, false, false, "",
     "Pro-Prophet's locality greedy (Algorithm 1) on the previous iteration's counts", prophet_layer, nullptr, nullptr},
    {"prophet-oracle", kCur, "blockwise", 8, true, kOwner, kHome, false, false, false, "",
     "Pro-Prophet's greedy on the iteration's own counts (an oracle)", prophet_layer, nullptr, nullptr},
    {"eplb", kWindow, "none", 6, false, RouteRule::kEvenSplit, kHome, false, false, false, "",
     "DeepSeek EPLB: replicate then pack, once from the profiling window", nullptr, plan_eplb_window, nullptr},
    {"moetuner", kWindow, "none", 6, false, kOwner, kL2L, true, false, false, "",
     "MoETuner: ILP 1 clusters experts by load, ILP 2 places clusters by layer-to-layer traffic", nullptr,
     plan_moetuner_window, nullptr},
    {"top2", kCur, "none", 6, false, kOwner, kHome, false, false, false, "",
     "broadcast the 2 heaviest experts to every device (Fig 15 baseline)", top2_layer, nullptr, nullptr},
    {"top3", kCur, "none", 6, false, kOwner, kHome, false, false, false, "",
     "broadcast the 3 heaviest experts to every device (Fig 15 baseline)", top3_layer, nullptr, nullptr},
    {"exhaustive", kCur, "none", 6, true, kOwner, kHome, false, true, false, "2^((D-1)*E) candidates <= 2^22",
     "every replica set with owners fixed: the exact optimum of the planner's equation (test oracle)", exhaustive_layer,
     nullptr, nullptr},
    {"moetuner-joint", kWindow, "none", 6, false, kOwner, kL2L, true, false, false, "D <= 4, E <= 8, L <= 4",
     "MoETuner's two stages as one ILP (small instances: the two-stage gap)", nullptr, plan_joint_window, nullptr},
    {"flow", kPrev, "blockwise", 8, true, RouteRule::kFlow, kHome, false, true, false, "",
     "placement by EPLB-style copies (anchored or repacked), per-batch routing LP, kept only when it pays", flow_layer,
     nullptr, nullptr, true, true},
    {"external", kPrev, "none", 6, false, kOwner, kHome, false, true, true, "",
     "a policy in any language: balance.external's command over the line-delimited JSON protocol "
     "(docs/policies.md)",
     external_layer, external_window, nullptr},
};

constexpr EnumName<PolicyInput> kPolicyInputNames[] = {{PolicyInput::kPreviousIteration, "previous_iteration"},
                                                       {PolicyInput::kCurrentIteration, "current_iteration"},
                                                       {PolicyInput::kProfileWindow, "profile_window"}};

}  // namespace

const char* policy_input_name(PolicyInput input) { return enum_name(kPolicyInputNames, input); }

const std::vector<PolicyRow>& policy_registry() { return kRows; }

const PolicyRow* find_policy(const std::string& name) {
    for (const PolicyRow& row : kRows)
        if (name == row.name) return &row;
    return nullptr;
}

const PolicyRow& policy_row(const std::string& name, const std::string& key) {
    if (const PolicyRow* row = find_policy(name)) return *row;
    std::string list;
    for (const PolicyRow& row : kRows) {  // appended piece by piece: GCC 12 misreads "|" + string&& (-Wrestrict)
        if (!list.empty()) list += '|';
        list += row.name;
    }
    throw_config_error(key, name, "unknown policy", "pick one of " + list + " (prophet policies lists them)");
}

PolicyInput policy_input(const PolicyRow& row, const BalanceOptions& options) {
    if (row.external_process) return options.external_offline ? PolicyInput::kProfileWindow : row.input;
    return row.input;
}

bool plans_offline(const std::string& name, const BalanceOptions& options) {
    const PolicyRow* row = find_policy(name);
    return row && policy_input(*row, options) == PolicyInput::kProfileWindow;
}

bool plans_for_forecast(const PolicyRow& row, const BalanceOptions& options) {
    return row.forecasts_load && policy_input(row, options) == PolicyInput::kPreviousIteration &&
           options.flow_predict == "ewma";
}

std::vector<std::string> policies_for_all() {
    std::vector<std::string> names;
    for (const PolicyRow& row : kRows)
        if (!row.external_process) names.push_back(row.name);
    return names;
}

const std::vector<std::string>& policy_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> all;
        for (const PolicyRow& row : kRows) all.push_back(row.name);
        return all;
    }();
    return names;
}

int system_cost_eq(const std::string& policy) {
    const PolicyRow* row = find_policy(policy);
    return row ? row->system_cost_eq : 6;
}

bool plans_with_cost_eq(const std::string& policy) {
    const PolicyRow* row = find_policy(policy);
    return row && row->plans_with_cost_eq;
}

RouteRule paper_route_rule(const std::string& policy) {
    const PolicyRow* row = find_policy(policy);
    return row ? row->route_rule : RouteRule::kOwner;
}

TokenPath paper_token_path(const std::string& policy) {
    const PolicyRow* row = find_policy(policy);
    return row ? row->token_path : TokenPath::kHome;
}

std::string policy_registry_json() {
    nlohmann::json rows = nlohmann::json::array();
    for (const PolicyRow& r : kRows) {
        rows.push_back({{"name", r.name},
                        {"input", r.external_process ? "balance.external_role" : policy_input_name(r.input)},
                        {"offline", r.input == PolicyInput::kProfileWindow},
                        {"system_schedule", r.system_schedule},
                        {"system_cost_eq", r.system_cost_eq},
                        {"plans_with_cost_eq", r.plans_with_cost_eq},
                        {"route_rule", route_rule_name(r.route_rule)},
                        {"token_path", token_path_name(r.token_path)},
                        {"uses_transitions", r.uses_transitions},
                        {"external_process", r.external_process},
                        {"size_limits", r.size_limits},
                        {"description", r.description}});
    }
    return nlohmann::json{{"schema_version", 1}, {"policies", rows}}.dump(2);
}

std::vector<double> link_costs(const CostModel& cost, int num_devices) {
    const int D = num_devices;
    std::vector<double> c(static_cast<size_t>(D) * D, 0.0);
    for (int a = 0; a < D; ++a)
        for (int b = 0; b < D; ++b)
            if (a != b) c[static_cast<size_t>(a) * D + b] = 1.0 / cost.cluster.link_bytes_per_s(a, b);
    return c;
}

PolicySession::PolicySession(const BalanceOptions& options, const CostModel& cost, int num_layers, int num_experts)
    : options_(options), cost_(cost), num_layers_(num_layers), num_experts_(num_experts) {}

PolicySession::~PolicySession() = default;

ExternalPolicy& PolicySession::external() {
    if (!external_) external_ = std::make_unique<ExternalPolicy>(options_, cost_, num_layers_, num_experts_);
    return *external_;
}

}  // namespace prophet
