// atomic_file.cpp: exclusive temporary + fsync + rename (atomic_file.h).
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace prophet {

namespace {

constexpr int kCreateAttempts = 16;  // a clash of 64 random bits means something else is wrong

std::string random_hex() {
    uint64_t bits = 0;
    if (::getrandom(&bits, sizeof(bits), 0) != static_cast<ssize_t>(sizeof(bits)))
        throw_file_error("/dev/urandom", "cannot read random bytes for a temporary file name", errno);
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(bits));
    return text;
}

}  // namespace

void sync_directory(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw_file_error(dir, "cannot open the directory to fsync it", errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0 && err != EINVAL) throw_file_error(dir, "fsync of the directory failed", err);  // EINVAL: unsupported
}

void throw_file_error(const std::string& path, const std::string& what, int err) {
    const std::string text = path + ": " + what + ": " + std::strerror(err);
    if (err == ENOSPC || err == EDQUOT || err == EFBIG)
        throw Error(kExitResource, "resource error: " + text + "; fix: free disk space or write elsewhere");
    if (err == EACCES || err == EPERM || err == EROFS || err == ENOTDIR || err == ENOENT || err == EISDIR ||
        err == ELOOP)
        throw Error(kExitConfig, "input error: " + text + "; fix: write into an existing directory you may write to");
    throw Error(kExitRunFailed, "run failed: " + text);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    const std::filesystem::path target(path_);
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
    for (int attempt = 0; attempt < kCreateAttempts && fd_ < 0; ++attempt) {
        std::string name = ".";  // appended apart: GCC 12 warns (-Wrestrict, falsely) on "." + std::string&&
        name += target.filename().string();
        name += ".tmp-";
        name += random_hex();
        temp_ = (dir / name).string();
        fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd_ < 0 && errno != EEXIST) throw_file_error(path_, "cannot create the temporary file " + temp_, errno);
    }
    if (fd_ < 0) throw_file_error(path_, "cannot create a temporary file next to it", EEXIST);
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
    const char* bytes = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd_, bytes, std::min(size, size_t{1} << 30));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_file_error(path_, "write to " + temp_ + " failed", errno);
        }
        bytes += n;
        size -= static_cast<size_t>(n);
    }
}

void AtomicFile::commit() {
    if (committed_) return;
    if (::fsync(fd_) != 0) throw_file_error(path_, "fsync of " + temp_ + " failed", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_file_error(path_, "close of " + temp_ + " failed", errno);
    if (::rename(temp_.c_str(), path_.c_str()) != 0)
        throw_file_error(path_, "cannot rename " + temp_ + " to it", errno);
    committed_ = true;
    const std::filesystem::path target(path_);
    sync_directory(target.has_parent_path() ? target.parent_path().string() : ".");
}

void write_file_atomically(const std::string& path, std::string_view text) {
    AtomicFile file(path);
    file.write(text);
    file.commit();
}

}  // namespace prophet
