// cmd_policies.h: `prophet policies [--json]`: the policy registry (lib/balance/policy_registry.h), one row per
// policy, as a table or as JSON (what report/common.py reads for its policy order and colours).
#pragma once

#include <CLI/CLI.hpp>

namespace prophet::cli {

struct PoliciesArgs {
    bool json = false;
};

CLI::App* add_policies_command(CLI::App& app, PoliciesArgs& args);
int run_policies(const PoliciesArgs& args);

}  // namespace prophet::cli
