// cmd_sweep.h: `prophet sweep FILE.toml`: a resumable grid of simulator or cost-model runs (docs/sweep.md).
#pragma once

#include "common.h"

namespace prophet::cli {

struct SweepArgs {
    CommonArgs common;
    std::string file;     // the sweep .toml
    int max_points = -1;  // stop after this many points have run (testing / partial runs)
    bool no_report = false;  // skip report/build_report.py at the end
    std::string launcher = "local";  // local | slurm (cmd_sweep_slurm.cpp)
    bool status = false;             // print the points' state from the store, the shards and squeue
    bool wait = false;               // slurm: wait for the job array, then merge the shards into the store
    std::string points;              // "3,5": only these 1-based points (a Slurm array task's share)
};

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args);
int run_sweep_command(const SweepArgs& args);

}  // namespace prophet::cli
