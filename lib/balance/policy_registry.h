// policy_registry.h: the one table of balancing policies. Every caller (plan, the simulator, sweeps, training,
// serving, --help, `prophet policies`) asks it what a policy is and how to run it, instead of testing names.
//
// A row says what the policy sees (the previous iteration's counts, the current ones, or a profiling window:
// offline), the system it belongs to (schedule and cost equation), its paper's routing rule and token path, and
// holds the function that plans it. Adding a built-in policy = its row in policy_registry.cpp + its own file(s).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"
#include "balance/policies.h"
#include "balance/token_path.h"

namespace prophet {

// Which counts a policy plans from.
enum class PolicyInput {
    kPreviousIteration,  // iteration j from j-1's [D][E] counts (iteration 0: static, not planned, unless the row
                         // plans it from the window: PolicyRow::first_plan_from_window)
    kCurrentIteration,   // iteration j from its own counts (after the gate)
    kProfileWindow,      // offline: once, from the window's [L][E] loads (and transitions), kept for the run
};
const char* policy_input_name(PolicyInput input);  // "previous_iteration" | "current_iteration" | "profile_window"

class ExternalPolicy;  // external_policy.h

// Per-run state of a policy: an external policy's process, started on the first plan and ended with the session.
// Built-in policies keep none (flow's load forecast belongs to whoever feeds it the counts: PolicyRunner,
// evaluate.cpp). `cost`, `num_layers` and `num_experts` describe the run (the external hello).
class PolicySession {
  public:
    PolicySession(const BalanceOptions& options, const CostModel& cost, int num_layers, int num_experts);
    ~PolicySession();
    PolicySession(const PolicySession&) = delete;
    PolicySession& operator=(const PolicySession&) = delete;
    ExternalPolicy& external();  // starts the process on first use
    int num_layers() const { return num_layers_; }

  private:
    BalanceOptions options_;
    CostModel cost_;
    int num_layers_, num_experts_;
    std::unique_ptr<ExternalPolicy> external_;
};

// One layer's planning request (online policies).
struct LayerPlanRequest {
    int64_t iteration = 0;
    int layer = 0;
    const int64_t* counts = nullptr;     // [D*E]: the counts the row's input names
    const Placement* current = nullptr;  // the layer's placement in force (nullptr: static)
    int num_devices = 0, num_experts = 0;
    const CostModel* cost = nullptr;  // the layer's cost model (model_for_layer)
    const BalanceOptions* options = nullptr;
};

// The offline planning request: the profiling window, summed.
struct WindowPlanRequest {
    int window_iterations = 0;
    const std::vector<double>* loads = nullptr;        // [L][E] tokens per expert, summed over devices
    const std::vector<double>* transitions = nullptr;  // [L-1][E][E] or empty
    const std::vector<double>* link_cost = nullptr;    // [D*D] 1 / bandwidth, 0 on the diagonal
    int num_layers = 0, num_devices = 0, num_experts = 0, num_nodes = 1;
    const BalanceOptions* options = nullptr;
};

struct WindowPlanReport {
    std::string note;           // "" or a remark (e.g. ILP 2 solved heuristically)
    std::string solver_status;  // moetuner*: ilp_status(); else ""
    IlpReport ilp;              // moetuner*: the solver's report
};

using LayerPlanFn = Placement (*)(const LayerPlanRequest&, PolicySession&);
using WindowPlanFn = std::vector<Placement> (*)(const WindowPlanRequest&, PolicySession&, WindowPlanReport*);
// The counts the policy's system computes and sends ([D*E], empty: the trace's own; a policy pads every layer or
// none) and the tokens it drops (*dropped; dropped may be nullptr).
using DispatchFn = std::vector<int64_t> (*)(const int64_t* counts, int num_devices, int num_experts,
                                            const BalanceOptions& options, int64_t* dropped);

struct PolicyRow {
    const char* name;
    PolicyInput input;            // external_process: balance.external_role decides (policy_input)
    const char* system_schedule;  // the simulator's schedule of its system: "none" | "blockwise" | "fastermoe"
    int system_cost_eq;           // 8: its system hides Trans/Agg (block-wise scheduler); 6: they block
    bool plans_with_cost_eq;      // its planner minimises BalanceOptions::cost_eq
    RouteRule route_rule;         // its paper's routing rule (balance.route_to = auto)
    TokenPath token_path;         // its paper's token path (balance.token_path = auto)
    bool uses_transitions;        // plans from the layer-to-layer transitions when the trace has them
    bool plan_once_per_layer;     // timed with one call (expensive or stateful), not balance's plan.repeats
    bool external_process;        // plans in a process of its own: its role (input) is balance.external_role, and
                                  // training runs it on rank 0 only and broadcasts the placement
    const char* size_limits;      // "" or the instances it refuses (exit 3; skipped under --policy all)
    const char* description;      // one line
    LayerPlanFn plan_layer;       // online planning (nullptr: offline only)
    WindowPlanFn plan_window;     // offline planning (nullptr: online only)
    DispatchFn dispatch;          // nullptr: computes the trace's counts, drops nothing
    // input kPreviousIteration only: iteration 0 of a trace (no previous iteration) is planned from the mean counts
    // of the profiling window's other iterations (first_plan_counts in evaluate.h) instead of running static
    bool first_plan_from_window = false;
    // input kPreviousIteration only: plans for the forecast of balance.flow_predict (load_forecast.h) of the past
    // iterations' counts, not for the last iteration's counts alone
    bool forecasts_load = false;
};

const std::vector<PolicyRow>& policy_registry();
// The row of `name`, or nullptr.
const PolicyRow* find_policy(const std::string& name);
// The row of `name`; an unknown name is a config error (exit 3) naming `key` and listing the names.
const PolicyRow& policy_row(const std::string& name, const std::string& key = "balance.policy");
// What the policy plans from under these options (the row's input; external: balance.external_role).
PolicyInput policy_input(const PolicyRow& row, const BalanceOptions& options);
// Plans for a load forecast (row.forecasts_load under balance.flow_predict = ewma) rather than the last counts.
bool plans_for_forecast(const PolicyRow& row, const BalanceOptions& options);
// Offline (plans once from a profiling window) under these options.
bool plans_offline(const std::string& name, const BalanceOptions& options);
// Policies `--policy all` runs: every row but the external ones (they need a command).
std::vector<std::string> policies_for_all();

// The registry as JSON (`prophet policies --json`): {"schema_version": 1, "policies": [row objects]}.
std::string policy_registry_json();

// link_cost[a*D + b] = 1 / bandwidth of the link a -> b (s/byte), 0 on the diagonal: MoETuner's B[g1,g2]
std::vector<double> link_costs(const CostModel& cost, int num_devices);

}  // namespace prophet
