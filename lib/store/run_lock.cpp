// run_lock.cpp: where a run's lock file lives, taking it, probing it.
#include "store/run_lock.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace prophet {

std::string run_lock_path(const std::string& store_path, const std::string& run_id) {
    return store_path + ".runlocks/" + run_id + ".lock";
}

FileLock lock_run(const std::string& store_path, const std::string& run_id) {
    const std::string dir = store_path + ".runlocks";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        throw Error(kExitDatabase, "database error: " + dir + ": cannot create the run lock directory (" +
                                       ec.message() + "); fix: make the store's directory writable");
    std::optional<FileLock> lock = FileLock::try_acquire(run_lock_path(store_path, run_id), kExitDatabase);
    if (!lock)
        throw Error(kExitDatabase, "database error: " + run_lock_path(store_path, run_id) +
                                       ": held by another process (run id " + run_id + " in use)");
    return std::move(*lock);
}

LockState probe_run_lock(const std::string& store_path, const std::string& run_id) {
    return probe_lock(run_lock_path(store_path, run_id));
}

}  // namespace prophet
