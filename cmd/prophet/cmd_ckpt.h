// cmd_ckpt.h: `prophet ckpt show DIR`: what a checkpoint directory holds (steps, config hash, tensors with shapes
// and sizes, data position, RNG and balancing-policy state) without reading the tensor data.
#pragma once

#include "common.h"

namespace prophet::cli {

struct CkptArgs {
    std::string path;  // a checkpoint directory or one step-N directory in it
    bool json = false;
};

// Adds `ckpt` with its subcommand `show`; returns `show`.
CLI::App* add_ckpt_command(CLI::App& app, CkptArgs& args);
int run_ckpt_show(const CkptArgs& args);

}  // namespace prophet::cli
