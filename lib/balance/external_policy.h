// external_policy.h: a balancing policy in another process, spoken to over line-delimited JSON (schema v1,
// docs/policies.md "External policies").
//
// prophet starts balance.external's command once per run (no shell; split_command_line), sends `hello` (the
// cluster, the model, the role) and waits for `ready`; then one request per planning call: online, per
// (iteration, layer), the previous iteration's [D][E] counts and the placement in force; offline, once, the
// window's [L][E] weight. Every reply is validated like an input file; a defect is exit 3 naming the field, a
// reply later than balance.external_timeout_s or a process that exits is exit 6. The destructor says `bye`,
// closes the pipe and reaps the process (CoProcess).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "balance/placement.h"
#include "balance/policy_registry.h"

namespace prophet {

class CoProcess;

constexpr int kExternalSchemaVersion = 1;
// Seconds the hello's reply may take at least: the process starts then (an interpreter, its imports).
constexpr double kStartAllowanceS = 60.0;

class ExternalPolicy {
  public:
    // Starts the process and completes the hello; throws as above (a missing command: exit 3).
    ExternalPolicy(const BalanceOptions& options, const CostModel& cost, int num_layers, int num_experts);
    ~ExternalPolicy();
    ExternalPolicy(const ExternalPolicy&) = delete;
    ExternalPolicy& operator=(const ExternalPolicy&) = delete;

    Placement plan_layer(const LayerPlanRequest& request);
    std::vector<Placement> plan_window(const WindowPlanRequest& request);

  private:
    // sends one request line and returns the reply line within timeout_s; `what` names the request in errors
    std::string round_trip(const std::string& request, const std::string& what, double timeout_s);

    std::string command_;  // balance.external as given (for messages)
    double timeout_s_;
    int num_devices_, num_experts_, num_layers_;
    int max_replicas_;  // balance.max_replicas_per_device (0: no cap)
    std::unique_ptr<CoProcess> process_;
};

// The hello line prophet sends (one JSON object, no newline): exposed for tests and the docs' example.
std::string external_hello(const BalanceOptions& options, const CostModel& cost, int num_layers, int num_experts);

// Parses one online reply line ({"type": "placement", "experts": [E lists of devices, the owner first]}),
// validating every field; a defect throws Error(3) "external policy error: <what>: reply field <field> <problem>".
// max_replicas_per_device: replicas one device may hold (balance.max_replicas_per_device; 0: no cap).
Placement parse_placement_reply(const std::string& line, int num_devices, int num_experts, int max_replicas_per_device,
                                const std::string& what);
// The offline reply ({"type": "placements", "layers": [L of the above experts lists]}).
std::vector<Placement> parse_window_reply(const std::string& line, int num_layers, int num_devices, int num_experts,
                                          int max_replicas_per_device, const std::string& what);

}  // namespace prophet
