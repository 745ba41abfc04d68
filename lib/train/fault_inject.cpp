#include "train/fault_inject.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <new>
#include <string>

#include "core/error.h"

namespace prophet {

FaultPlan fault_plan_from(const Config& config, int world_size) {
    FaultPlan plan;
    plan.rank = static_cast<int>(config.get_int("debug.fail_rank"));
    plan.step = config.get_int("debug.fail_step");
    plan.mode = config.get_string("debug.fail_mode");
    if (plan.rank >= world_size)
        throw_config_error("debug.fail_rank", std::to_string(plan.rank),
                           "must name a rank of this run, [0, " + std::to_string(world_size) + ") (or -1: none)",
                           "--set debug.fail_rank=" + std::to_string(world_size - 1));
    return plan;
}

void maybe_inject_fault(const FaultPlan& plan, int rank, int64_t step) {
    if (plan.rank != rank || plan.step != step) return;
    std::fprintf(stderr, "prophet: rank %d: debug.fail_mode=%s injected at step %lld (test-only key)\n", rank,
                 plan.mode.c_str(), static_cast<long long>(step));
    std::fflush(stderr);
    if (plan.mode == "kill") raise(SIGKILL);
    if (plan.mode == "exit") _exit(kExitRunFailed);
    if (plan.mode == "error")
        throw Error(kExitRunFailed, "rank " + std::to_string(rank) + ": debug.fail_mode=error injected at step " +
                                        std::to_string(step) + " (test-only key)");
    if (plan.mode == "bad_alloc") throw std::bad_alloc();  // an exception that is not a prophet::Error
    for (;;) sleep(3600);  // "hang": until the launcher or a signal ends the process
}

}  // namespace prophet
