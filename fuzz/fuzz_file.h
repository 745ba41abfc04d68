// fuzz_file.h: puts a fuzz input where the library reads it by path, for the targets whose API takes paths:
// InputFile (one file: a memfd seen through /proc/self/fd, else an exclusively created file in $TMPDIR) and
// ScratchDir (a directory of this process, made by mkdtemp) with split_files / put for inputs that are several
// files joined at kFileSeparator.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace fuzz {

// $TMPDIR, else /tmp
inline std::string temp_root() {
    const char* tmp = std::getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

class InputFile {
  public:
    InputFile() {
        fd_ = memfd_create("prophet-fuzz", 0);
        if (fd_ >= 0) {
            path_ = "/proc/self/fd/" + std::to_string(fd_);
        } else {
            std::string templ = temp_root() + "/prophet-fuzz-XXXXXX";
            fd_ = mkstemp(templ.data());  // created exclusively, mode 0600
            path_ = templ;
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
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;
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

// A directory of this process under $TMPDIR (mkdtemp: a fresh name, never one an earlier run left), removed with
// everything in it when the object goes.
class ScratchDir {
  public:
    explicit ScratchDir(const std::string& prefix) {
        std::string templ = temp_root() + "/" + prefix + "-XXXXXX";
        if (!mkdtemp(templ.data())) {
            std::perror("fuzz: cannot create a scratch directory");
            std::abort();
        }
        path_ = templ;
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    // removes what the last input wrote
    void clear() const {
        for (const auto& entry : std::filesystem::directory_iterator(path_)) std::filesystem::remove_all(entry.path());
    }

  private:
    std::filesystem::path path_;
};

// between the files of one input
constexpr std::string_view kFileSeparator = "\n--prophet-fuzz-file--\n";

// the files of one input: split at kFileSeparator into at most `most` parts (the last keeps any further separators)
inline std::vector<std::string_view> split_files(std::string_view body, size_t most) {
    std::vector<std::string_view> parts;
    for (size_t at = body.find(kFileSeparator); at != std::string_view::npos && parts.size() + 1 < most;
         at = body.find(kFileSeparator)) {
        parts.push_back(body.substr(0, at));
        body.remove_prefix(at + kFileSeparator.size());
    }
    parts.push_back(body);
    return parts;
}

// writes bytes to path (replacing it); aborts where it cannot, since a missing file would fuzz nothing
inline void put(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) std::abort();
}

}  // namespace fuzz
