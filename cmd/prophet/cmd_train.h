// cmd_train.h: `prophet train` (a real MoE-GPT run on CPU ranks under a balancing policy) and `prophet profile`
// (the same run, recording its routing trace; --calibrate measures this machine for the cost model).
#pragma once

#include <optional>

#include "common.h"

namespace prophet::cli {

struct TrainArgs {
    CommonArgs common;
    bool save = false;        // write a checkpoint at the end (and every train.save_every steps)
    std::string resume;       // checkpoint directory or step directory to continue from
    bool timeline = false;    // record every op of every rank (events of kind "timeline", docs/scheduler.md)
};

struct ProfileArgs {
    CommonArgs common;
    std::string trace_out;    // trace file to write (default results/traces/<run_id>.ptrace)
    bool calibrate = false;   // also measure the machine and write a cluster file
    std::string cluster_out;  // calibrated cluster file (default results/clusters/<host>-<D>rank.toml)
    std::vector<std::string> ops_shapes;  // --ops-shape: further model shapes the [ops] attention rates cover
    std::optional<int> grid_passes;       // --grid-passes: passes over the GEMM grid (not given: the default)
};

CLI::App* add_train_command(CLI::App& app, TrainArgs& args);
CLI::App* add_profile_command(CLI::App& app, ProfileArgs& args);
int run_train(const TrainArgs& args, int* argc, char*** argv);
int run_profile(const ProfileArgs& args, int* argc, char*** argv);

}  // namespace prophet::cli
