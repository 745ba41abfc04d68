// cmd_sweep_slurm.h: the Slurm side of `prophet sweep`: --launcher slurm (submit the missing points as a job
// array, optionally --wait and merge the shards) and --status (shards + squeue). lib/sweep/launch_slurm.h.
#pragma once

#include <string>

#include "cmd_sweep.h"
#include "sweep/sweep.h"

namespace prophet::cli {

int run_sweep_slurm(const SweepArgs& args, const sweep::SweepSpec& spec, const std::string& store_path);
int run_sweep_status(const SweepArgs& args, const sweep::SweepSpec& spec, const std::string& store_path);

}  // namespace prophet::cli
