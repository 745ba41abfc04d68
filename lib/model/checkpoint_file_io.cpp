// checkpoint_file_io.cpp: raw file reads and writes of checkpoints, system-call failures mapped to exit codes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "model/checkpoint_internal.h"

namespace prophet::checkpoint_detail {

[[noreturn]] void io_error(const std::string& path, const std::string& what, int err) {
    const std::string text = path + ": " + what + ": " + std::strerror(err);
    if (err == ENOSPC || err == EDQUOT || err == EFBIG)
        throw Error(kExitResource,
                    "resource error: " + text + "; fix: free disk space or choose another checkpoint directory");
    if (err == EACCES || err == EPERM || err == EROFS || err == ENOTDIR)
        throw Error(kExitConfig, "input error: " + text + "; fix: choose a writable checkpoint directory");
    throw Error(kExitRunFailed, "run failed: " + text);
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
    return text + "]";
}

FileOut::FileOut(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) io_error(path_, "cannot create", errno);
}

FileOut::~FileOut() {
    if (fd_ >= 0) ::close(fd_);
}

void FileOut::write(const void* data, size_t size) {
    const char* bytes = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd_, bytes, std::min(size, size_t{1} << 30));
        if (n < 0) {
            if (errno == EINTR) continue;
            io_error(path_, "write failed", errno);
        }
        bytes += n;
        size -= static_cast<size_t>(n);
    }
}

void FileOut::sync_and_close() {
    if (::fsync(fd_) != 0) io_error(path_, "fsync failed", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) io_error(path_, "close failed", errno);
}

FileIn::FileIn(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
        const int err = errno;
        throw_input_error(path_, err == ENOENT ? "file not found" : std::string("cannot open: ") + std::strerror(err),
                          kCorruptFix);
    }
    struct stat info {};
    if (::fstat(fd_, &info) != 0) io_error(path_, "fstat failed", errno);
    if (!S_ISREG(info.st_mode)) throw_input_error(path_, "not a regular file", kCorruptFix);
    size_ = static_cast<uint64_t>(info.st_size);
}

FileIn::~FileIn() { ::close(fd_); }

void FileIn::read_at(uint64_t offset, void* data, size_t size) const {
    char* bytes = static_cast<char*>(data);
    while (size > 0) {
        const ssize_t n = ::pread(fd_, bytes, std::min(size, size_t{1} << 30), static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            io_error(path_, "read failed", errno);
        }
        if (n == 0) throw_input_error(path_, "truncated: the file ended while being read", kCorruptFix);
        bytes += n;
        size -= static_cast<size_t>(n);
        offset += static_cast<uint64_t>(n);
    }
}

void write_text_file(const std::string& path, const std::string& text) {
    FileOut out(path);
    out.write(text.data(), text.size());
    out.sync_and_close();
}

std::string read_text_file(const std::string& path) {
    FileIn in(path);
    std::string text(static_cast<size_t>(in.size()), '\0');
    if (!text.empty()) in.read_at(0, text.data(), text.size());
    return text;
}

}  // namespace prophet::checkpoint_detail
