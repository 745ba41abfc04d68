// run_lock.h: the lock a running run holds while it lives (docs/reliability.md "A run whose rank 0 dies").
//
// Store::begin_run locks `<store>.runlocks/<run_id>.lock` before the run's row exists and finish_run removes it;
// the kernel releases it when the process ends, however it ends. A reaper in any PID namespace of the same
// kernel (a container with host networking shares the host name but not the pids) probes the lock: held means
// the run lives, free means its writer is gone.
#pragma once

#include <string>

#include "core/file_lock.h"

namespace prophet {

// "<store_path>.runlocks/<run_id>.lock"
std::string run_lock_path(const std::string& store_path, const std::string& run_id);

// Creates the lock directory if needed and locks the run's file; throws prophet::Error (exit 5) naming the file
// when it cannot, or when the lock is already held (a run id in use).
FileLock lock_run(const std::string& store_path, const std::string& run_id);

// The state of a run's lock, as any process sees it.
LockState probe_run_lock(const std::string& store_path, const std::string& run_id);

}  // namespace prophet
