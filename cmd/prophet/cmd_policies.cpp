// cmd_policies.cpp: `prophet policies`: prints the policy registry.
#include "cmd_policies.h"

#include <cstdio>
#include <string>

#include "balance/policy_registry.h"
#include "core/error.h"

namespace prophet::cli {

CLI::App* add_policies_command(CLI::App& app, PoliciesArgs& args) {
    CLI::App* cmd = app.add_subcommand(
        "policies",
        "list the balancing policies (the registry): what each plans from, its system's schedule and "
        "cost equation, routing rule, token path and size limits");
    cmd->add_flag("--json", args.json, "print the registry as JSON (schema_version 1; report/common.py reads it)");
    return cmd;
}

int run_policies(const PoliciesArgs& args) {
    if (args.json) {
        std::printf("%s\n", policy_registry_json().c_str());
        return kExitOk;
    }
    std::printf("# %-15s %-22s %-9s %-3s %-10s %-14s %-30s %s\n", "policy", "plans from", "schedule", "eq", "route",
                "path", "limits", "description");
    for (const PolicyRow& r : policy_registry()) {
        const std::string input = r.external_process ? "balance.external_role" : policy_input_name(r.input);
        std::printf("  %-15s %-22s %-9s %-3d %-10s %-14s %-30s %s\n", r.name, input.c_str(), r.system_schedule,
                    r.system_cost_eq, route_rule_name(r.route_rule), token_path_name(r.token_path),
                    r.size_limits[0] ? r.size_limits : "-", r.description);
    }
    std::printf(
        "# plans from: the counts the policy sees (profile_window: offline, once); schedule and eq: the "
        "simulator's schedule and the cost equation of the policy's system; route and path: its paper's "
        "routing rule and token path (balance.route_to / balance.token_path = auto); docs/policies.md\n");
    return kExitOk;
}

}  // namespace prophet::cli
