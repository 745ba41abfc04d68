// fault_inject.h: test-only fault injection for `prophet train` / `prophet profile` (the debug.* keys).
//
// A failure-path test needs a rank that dies or hangs at a known step; these keys make one do so. They are not
// part of a run's numbers (checkpoint_config_hash ignores them) and are documented as test-only in
// docs/reliability.md. Modes:
//   kill  raise(SIGKILL): a crash nothing can catch (the OOM killer, a segfault without a handler)
//   exit  _exit(1) without MPI_Finalize: a rank that quits abnormally
//   hang  sleep forever: the peers' next collective blocks until comm.timeout_s (exit 6)
//   error throw prophet::Error (exit 1) on this rank only: a failure its peers learn of from MPI_Abort
//   bad_alloc  throw std::bad_alloc on this rank only: an allocation that failed, or any exception that is not a
//              prophet::Error; the command must still record it (exit 4) and end the job
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace prophet {

struct FaultPlan {
    int rank = -1;  // -1: no fault
    int64_t step = 0;
    std::string mode = "kill";
};

// Reads debug.fail_rank / fail_step / fail_mode; throws prophet::Error (exit 3) when debug.fail_rank names a
// rank outside [0, world_size), which would silently never fire.
FaultPlan fault_plan_from(const Config& config, int world_size);

// Called at the start of every step on every rank: does nothing unless the plan names this rank and step.
void maybe_inject_fault(const FaultPlan& plan, int rank, int64_t step);

}  // namespace prophet
