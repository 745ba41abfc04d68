// cmd_ablate.h: `prophet ablate`: Pro-Prophet's ablation (its Fig 14) on real runs: the five variants below over N
// seeds, each a `prophet train` child (under mpirun for D > 1 ranks), recorded in the store; prints mean ± sd of
// the step time, the speedup over "none" and the exposed Trans/Agg time per variant.
#pragma once

#include <string>
#include <vector>

#include "common.h"

namespace prophet::cli {

struct AblateArgs {
    CommonArgs common;                 // --config/--set of the runs (train keys)
    int seeds = 5;                     // seeds first_seed .. first_seed + seeds - 1
    int64_t first_seed = 1;
    int ranks = 4;                     // D: ranks per run (mpirun -np D when > 1)
    std::vector<std::string> variants; // empty: all five
    int warmup = 2;                    // steps left out of each run's mean
    bool timeline = false;             // pass --timeline to every run
};

CLI::App* add_ablate_command(CLI::App& app, AblateArgs& args);
int run_ablate(const AblateArgs& args);

}  // namespace prophet::cli
