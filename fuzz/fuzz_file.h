// fuzz_file.h: writes a fuzz input to a file the library can open by path (a memfd seen through
// /proc/self/fd, falling back to a file in $TMPDIR), for the targets whose API takes a path.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fuzz {

class InputFile {
  public:
    InputFile() {
        fd_ = memfd_create("prophet-fuzz", 0);
        if (fd_ >= 0) {
            path_ = "/proc/self/fd/" + std::to_string(fd_);
        } else {
            const char* tmp = std::getenv("TMPDIR");
            path_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/prophet-fuzz-" + std::to_string(getpid());
            fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
            unlink_ = true;
        }
        if (fd_ < 0) {
            std::perror("fuzz: cannot create the input file");
            std::abort();
        }
    }
    ~InputFile() {
        close(fd_);
        if (unlink_) unlink(path_.c_str());
    }
    // replaces the content with `data`; returns the path to open
    const std::string& write(const uint8_t* data, size_t size) {
        if (ftruncate(fd_, 0) != 0 || lseek(fd_, 0, SEEK_SET) != 0) std::abort();
        size_t done = 0;
        while (done < size) {
            const ssize_t n = ::write(fd_, data + done, size - done);
            if (n <= 0) std::abort();
            done += static_cast<size_t>(n);
        }
        return path_;
    }

  private:
    int fd_ = -1;
    std::string path_;
    bool unlink_ = false;
};

}  // namespace fuzz
