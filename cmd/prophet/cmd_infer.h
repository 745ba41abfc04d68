// cmd_infer.h: `prophet profile --inference`: forward-only expert-parallel inference with tail latencies
// (lib/serve, docs/serving.md). It is a mode of `profile` because it is what MoETuner's pipeline calls profiling:
// route batches of a task through the model and measure, without training; it shares profile's keys (the model,
// data, policy, store) and adds serve.*.
#pragma once

#include <CLI/CLI.hpp>

#include "common.h"

namespace prophet::cli {

// Adds --inference to the profile subcommand (called from add_profile_command).
void add_inference_flag(CLI::App* profile);
// Whether --inference was given.
bool inference_requested();
// The inference run; world_size/world_rank as the launcher announces them (before MPI starts).
int run_inference(const CommonArgs& args, int world_size, int world_rank, int* argc, char*** argv);

}  // namespace prophet::cli
