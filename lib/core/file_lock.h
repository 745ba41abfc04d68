// file_lock.h: an exclusive advisory lock on a file (flock), held for as long as the FileLock lives.
//
// The kernel drops the lock when the holding process ends, however it ends (SIGKILL included), and every process
// that opens the same file sees it, whatever PID namespace (container) it runs in: "someone holds it" is the
// liveness signal that a pid check cannot give across namespaces. Users: the lock of a running run
// (lib/store/run_lock.h) and of a checkpoint directory (lib/model/checkpoint.h).
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace prophet {

class FileLock {
  public:
    // Creates `path` (mode 0644; never through a symbolic link) if absent and locks it exclusively without
    // waiting. nullopt when another open file holds the lock; throws prophet::Error with `exit_code` naming the
    // path and the cause when the file cannot be opened or locked for another reason.
    static std::optional<FileLock> try_acquire(const std::string& path, int exit_code);

    FileLock(FileLock&& other) noexcept;
    FileLock& operator=(FileLock&& other) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    ~FileLock();  // releases (closes); the file stays

    // Removes the file, then releases the lock: a prober that opened it before the removal sees a free lock on
    // a file nobody will lock again, which is what the end of its holder means.
    void release_and_remove();
    const std::string& path() const { return path_; }

  private:
    FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    int fd_ = -1;
    std::string path_;
};

enum class LockState {
    kAbsent,  // no such file
    kHeld,    // a live process holds it
    kFree,    // the file exists and nobody holds it: its holder ended without removing it
};
const char* lock_state_name(LockState state);  // "absent" | "held" | "free"

// Whether someone holds the lock on `path`, without waiting and without creating the file. An error other than a
// missing file (a directory, no permission) is reported as kAbsent: no evidence either way.
LockState probe_lock(const std::string& path);

}  // namespace prophet
