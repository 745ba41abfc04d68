// atomic_file.h: a file replaced whole or not at all, safe in a directory other users can write to.
//
// The bytes go to a fresh temporary next to the target, "<dir>/.<name>.tmp-<16 random hex>", created with
// O_CREAT | O_EXCL | O_NOFOLLOW (mode 0644 less the umask): a file or symlink planted at any name is never
// opened, followed or truncated (the old fixed "<path>.tmp" opened with create+truncate wrote through a planted
// symlink). commit() fsyncs the temporary, renames it over the target and fsyncs the directory. A writer
// destroyed without commit() (an exception on the way) removes its temporary: the target keeps its old content.
//
// Errors are prophet::Error naming the path and the system's reason: exit 4 for a full disk or quota (ENOSPC,
// EDQUOT, EFBIG), exit 3 for a directory that is missing, read-only or not writable, exit 1 for anything else.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace prophet {

class AtomicFile {
  public:
    explicit AtomicFile(std::string path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, size_t size);
    void write(std::string_view text) { write(text.data(), text.size()); }
    void commit();  // fsync, rename over the target, fsync the directory; once

    const std::string& path() const { return path_; }
    const std::string& temp_path() const { return temp_; }

  private:
    std::string path_, temp_;
    int fd_ = -1;
    bool committed_ = false;
};

// fsync of directory `dir`, so that a rename in it is durable; a file system without it (EINVAL) is accepted.
void sync_directory(const std::string& dir);

// The whole of `text` into `path` through an AtomicFile.
void write_file_atomically(const std::string& path, std::string_view text);

// The error an AtomicFile throws for errno `err` while doing `what` on `path` (exit 4, 3 or 1 as above).
[[noreturn]] void throw_file_error(const std::string& path, const std::string& what, int err);

}  // namespace prophet
