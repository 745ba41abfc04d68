// cmd_sweep.h: `prophet sweep FILE.toml`: a resumable grid of simulator or cost-model runs (docs/sweep.md).
#pragma once

#include "common.h"

namespace prophet::cli {

struct SweepArgs {
    CommonArgs common;
    std::string file;     // the sweep .toml
    int max_points = -1;  // stop after this many points have run (testing / partial runs)
    bool no_report = false;  // skip report/build_report.py at the end
};

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args);
int run_sweep_command(const SweepArgs& args);

}  // namespace prophet::cli
