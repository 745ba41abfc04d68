// cmd_validate.h: `prophet validate`: the simulator against recorded real runs. Each run's steps are replayed on
// their recorded op DAG with their recorded counts and placements (never re-planned), the ops timed by the per-op
// model of a calibrated cluster file (--cluster, its [ops] section), or by their recorded durations
// (--replay recorded: the replay's own exactness). Reports per run and in total; records a validation run.
#pragma once

#include "common.h"

namespace prophet::cli {

struct ValidateArgs {
    std::string db = "results/prophet.db";
    std::vector<std::string> run_ids;
    std::string experiment;
    std::string cluster;
    std::string replay = "model";  // model | recorded
    std::vector<std::string>
        refit_on;  // runs of the store to re-fit [ops] scale and in_step_us on (none: as the file has)
    bool include_oversubscribed = false;
    bool record = true;
    bool json = false;
};

CLI::App* add_validate_command(CLI::App& app, ValidateArgs& args);
int run_validate(const ValidateArgs& args);

}  // namespace prophet::cli
