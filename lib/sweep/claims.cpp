// claims.cpp: per-point claims as byte-range locks on `<store>.claims` (see claims.h).
#include "sweep/claims.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/sha256.h"

namespace prophet::sweep {

namespace {

// F_SETLK-style request on one byte; F_OFD_SETLK: the lock belongs to this open file description, not to the
// process, so closing another descriptor of the file (or a child's) cannot drop it; O_CLOEXEC keeps it from
// children. Returns 0, or errno.
int lock_byte(int fd, int64_t offset, short type) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(offset);
    fl.l_len = 1;
    fl.l_pid = 0;  // required 0 for OFD locks
    while (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
        if (errno != EINTR) return errno;
    }
    return 0;
}

}  // namespace

int64_t claim_offset(const std::string& experiment, const std::string& point_hash) {
    const std::string digest = sha256_hex(experiment + "\n" + point_hash);
    return static_cast<int64_t>(std::stoull(digest.substr(0, 15), nullptr, 16));  // 60 bits
}

PointClaims::PointClaims(const std::string& store_path) : path_(store_path + ".claims") {
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
        throw Error(kExitDatabase, "store error: cannot open the sweep claims file " + path_ + ": " +
                                       std::strerror(errno) + "; fix: make the store's directory writable");
}

PointClaims::~PointClaims() {
    if (fd_ >= 0) close(fd_);  // releases every claim still held
}

bool PointClaims::try_claim(const std::string& experiment, const std::string& point_hash) {
    const int rc = lock_byte(fd_, claim_offset(experiment, point_hash), F_WRLCK);
    if (rc == 0) return true;
    if (rc == EAGAIN || rc == EACCES) return false;
    throw Error(kExitDatabase, "store error: cannot lock a point in " + path_ + ": " + std::strerror(rc) +
                                   "; fix: keep the store on a file system with POSIX locks (local, or NFSv4)");
}

void PointClaims::release(const std::string& experiment, const std::string& point_hash) {
    lock_byte(fd_, claim_offset(experiment, point_hash), F_UNLCK);
}

}  // namespace prophet::sweep
