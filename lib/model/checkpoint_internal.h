// checkpoint_internal.h: what the checkpoint files share (checkpoint_file_io.cpp, safetensors.cpp,
// checkpoint_state.cpp, checkpoint_dir.cpp, checkpoint.cpp): file names, raw file I/O with errors mapped to exit
// codes, the safetensors header parser; not part of lib/model's interface (checkpoint.h is).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/checkpoint.h"

namespace prophet::checkpoint_detail {

constexpr int64_t kFormatVersion = 1;  // state.json format_version
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kLatestFile = "latest";
constexpr const char* kCorruptFix = "load an older step directory, or start a new run";

// ---- raw files (checkpoint_file_io.cpp) ------------------------------------------------------------------

// Throws prophet::Error for a failed system call on `path`: exit 4 for a full disk or quota, 3 for a directory
// that is not writable, 1 otherwise; `err` is the errno.
[[noreturn]] void io_error(const std::string& path, const std::string& what, int err);

// "[2, 3]"
std::string shape_text(const std::vector<int64_t>& shape);

// A file created (or truncated) for writing; sync_and_close fsyncs it.
class FileOut {
  public:
    explicit FileOut(std::string path);
    ~FileOut();
    FileOut(const FileOut&) = delete;
    FileOut& operator=(const FileOut&) = delete;

    void write(const void* data, size_t size);
    void sync_and_close();

  private:
    std::string path_;
    int fd_ = -1;
};

// A regular file opened for reading; a missing or short file is an input error (exit 3) naming it.
class FileIn {
  public:
    explicit FileIn(std::string path);
    ~FileIn();
    FileIn(const FileIn&) = delete;
    FileIn& operator=(const FileIn&) = delete;

    uint64_t size() const { return size_; }
    void read_at(uint64_t offset, void* data, size_t size) const;

  private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

void write_text_file(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);

// ---- safetensors (safetensors.cpp) -------------------------------------------------------------------------

// Bytes per element of a safetensors dtype ("F32" -> 4), 0 for an unknown one.
uint64_t dtype_size(const std::string& dtype);
// The header of the open file `in`, checked against its size.
SafetensorsHeader parse_header(const FileIn& in, const std::string& path);
// Every tensor of `header` (F32 only) read from `in`.
TensorMap read_tensors(const FileIn& in, const std::string& path, const SafetensorsHeader& header);

// ---- state.json (checkpoint_state.cpp) ---------------------------------------------------------------------

// The text of state.json for step `step`.
std::string state_json_text(int64_t step, const std::map<std::string, RngState>& rng_states,
                            const CheckpointMeta& meta);
// Reads `state_path` into info.step, info.meta and info.rng_states, checking every field's type and the format.
void read_state_json(const std::string& state_path, CheckpointInfo& info);

}  // namespace prophet::checkpoint_detail
