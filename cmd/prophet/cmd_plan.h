// cmd_plan.h: `prophet plan`: every placement policy on a routing trace and a cluster, predicted and scored.
#pragma once

#include "common.h"

namespace prophet::cli {

struct PlanArgs {
    CommonArgs common;
    std::string trace;    // generator .toml, binary trace file, or run:<id> / trace:<id> in the store
    std::string cluster;  // cluster .toml
    std::string policy;   // overrides balance.policy when given
    int jobs = -1;        // -j: overrides plan.jobs when >= 0
};

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
int run_plan(const PlanArgs& args);
const Schema& plan_schema();

}  // namespace prophet::cli
