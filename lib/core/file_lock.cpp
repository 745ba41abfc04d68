// file_lock.cpp: flock(2) on a file opened close-on-exec (a child of the holder never inherits the lock).
#include "core/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/enum_table.h"
#include "core/error.h"

namespace prophet {

std::optional<FileLock> FileLock::try_acquire(const std::string& path, int exit_code) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        throw Error(exit_code, path + ": cannot open the lock file: " + std::strerror(errno) +
                                   " (fix: make its directory writable, or remove what is in the way)");
    int rc = 0;
    do {
        rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) return FileLock(fd, path);
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return std::nullopt;
    throw Error(exit_code, path + ": cannot lock: " + std::strerror(err));
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
        path_ = std::move(other.path_);
    }
    return *this;
}

FileLock::~FileLock() {
    if (fd_ >= 0) ::close(fd_);
}

void FileLock::release_and_remove() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());
    ::close(fd_);
    fd_ = -1;
}

namespace {
constexpr EnumName<LockState> kLockStateNames[] = {
    {LockState::kAbsent, "absent"}, {LockState::kHeld, "held"}, {LockState::kFree, "free"}};
}  // namespace

const char* lock_state_name(LockState state) { return enum_name(kLockStateNames, state); }

LockState probe_lock(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return LockState::kAbsent;
    int rc = 0;
    do {
        rc = ::flock(fd, LOCK_SH | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    const int err = errno;
    ::close(fd);  // releases the shared lock taken when it was free
    if (rc == 0) return LockState::kFree;
    return err == EWOULDBLOCK ? LockState::kHeld : LockState::kAbsent;
}

}  // namespace prophet
