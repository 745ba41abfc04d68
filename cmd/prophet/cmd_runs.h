// cmd_runs.h: `prophet runs`: list the runs of a store (filtered by experiment, policy, status), show one run, or
// compare several side by side.
#pragma once

#include "common.h"

namespace prophet::cli {

struct RunsArgs {
    std::string db = "results/prophet.db";
    std::string experiment, policy, status;
    int limit = 50;
    bool json = false;
    std::vector<std::string> run_ids;  // show: one; compare: two or more
};

struct RunsCommands {
    CLI::App* list = nullptr;  // `prophet runs` itself
    CLI::App* show = nullptr;
    CLI::App* compare = nullptr;
};

RunsCommands add_runs_command(CLI::App& app, RunsArgs& args);
int run_runs(const RunsCommands& commands, const RunsArgs& args);

}  // namespace prophet::cli
