// checkpoint.h: training checkpoints as safetensors files plus optimizer and RNG state, written atomically.
//
// Layout of a checkpoint directory `dir` (docs/data-and-checkpoints.md has the full format):
//   dir/latest                       text: the name of the newest complete step directory, e.g. "step-00000100"
//   dir/step-00000100/model.safetensors      parameters (F32), __metadata__ {format, step, config_hash}
//   dir/step-00000100/optimizer.safetensors  optimizer tensors `<param>.m`, `<param>.v`; __metadata__ step = the
//                                            optimizer's step count
//   dir/step-00000100/state.json     step, RNG states (hex), config_hash, data position, prophet version
// A save writes dir/.tmp-step-00000100, fsyncs every file and the directory, renames it into place and then
// replaces `latest` through a temporary file and a rename, so a crash at any point leaves the previous checkpoint
// loadable. One process writes a given directory at a time (lock_checkpoint_dir); prune_checkpoints keeps the
// newest few step directories.
//
// Loading never writes. Every defect of a file is a prophet::Error with exit code 3 naming the file: "truncated"
// (header length or data_offsets beyond the end of the file, data size not matching the shape), "not a
// safetensors file", "corrupted header", "checkpoint from another config (hash X, expected Y)", a missing tensor.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/file_lock.h"
#include "core/rng.h"

namespace prophet {

// A tensor to save; the data is borrowed.
struct TensorView {
    std::string name;             // e.g. "h.0.attn.qkv.w"
    std::vector<int64_t> shape;   // e.g. {C, 3C}
    const float* data = nullptr;  // [prod(shape)]
};

// A loaded tensor.
struct Tensor {
    std::vector<int64_t> shape;
    std::vector<float> data;  // [prod(shape)]
};
using TensorMap = std::map<std::string, Tensor>;

// ---- safetensors --------------------------------------------------------------------------------------------

// One entry of a safetensors header.
struct TensorInfo {
    std::string name;
    std::string dtype;  // "F32" in every file prophet writes
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // data_offsets[0], relative to the first data byte
    uint64_t end = 0;    // data_offsets[1]
};

struct SafetensorsHeader {
    std::vector<TensorInfo> tensors;              // in data order
    std::map<std::string, std::string> metadata;  // "__metadata__"
    uint64_t data_start = 0;                      // 8 + header length: file offset of the first data byte
    uint64_t file_size = 0;
};

// Writes `path` (8-byte little-endian header length, JSON header padded with spaces to a multiple of 8, raw
// little-endian F32 data in the order given) and fsyncs it. Not atomic on its own: save_checkpoint is.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata);
// Reads and checks the header against the file size without reading the data.
SafetensorsHeader read_safetensors_header(const std::string& path);
// Reads every tensor (F32 only); `header` receives the header when not null.
TensorMap read_safetensors(const std::string& path, SafetensorsHeader* header = nullptr);

// ---- RNG state ----------------------------------------------------------------------------------------------

using RngState = std::array<uint64_t, 4>;  // the xoshiro256** state words, in order
RngState rng_state(const Rng& rng);
Rng rng_from_state(const RngState& state);
std::string rng_state_hex(const RngState& state);  // 64 lowercase hex digits, word 0 first, each big-endian

// ---- checkpoints --------------------------------------------------------------------------------------------

struct CheckpointMeta {
    std::string config_hash;  // sha256 of the resolved config (Config::hash())
    std::string prophet_version;
    int64_t optimizer_step = 0;                        // AdamW step count (bias correction)
    std::map<std::string, std::string> data_position;  // e.g. {"source": "file", "next_step": "100"}
    std::map<std::string, std::string> extra;          // anything else worth keeping (planner state, placement)
};

struct Checkpoint {
    std::string dir;  // the step directory that was read
    int64_t step = 0;
    TensorMap tensors;    // model parameters by name
    TensorMap optimizer;  // optimizer tensors by name (`<param>.m`, `<param>.v`)
    std::map<std::string, RngState> rng_states;
    CheckpointMeta meta;
};

// What the resuming run expects; empty fields are not checked.
struct CheckpointExpect {
    std::string config_hash;
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;  // (name, shape) of every parameter
    bool optimizer = true;  // with `tensors`: each parameter p needs `p.m` and `p.v` of its shape
};

// "step-00000042" (8 digits, more when the step needs them)
std::string checkpoint_dir_name(int64_t step);

// Saves step `step` under `dir` (created if needed) and points dir/latest at it; returns the step directory.
// Tensor names must be unique within each list and not "__metadata__". An I/O failure throws prophet::Error:
// exit 4 when the disk or quota is full, 3 when the directory is not writable, 1 otherwise.
std::string save_checkpoint(const std::string& dir, int64_t step, const std::vector<TensorView>& tensors,
                            const std::vector<TensorView>& optimizer_tensors,
                            const std::map<std::string, RngState>& rng_states, const CheckpointMeta& meta);

// Keeps the newest `keep` step directories of checkpoint directory `dir` (by step number) and the one `latest`
// names, and removes the other step-N directories; `keep` = 0 keeps every one. Only real directories named
// step-<digits> are touched (never a symbolic link, a .tmp- directory of a save in progress, or another file).
// Returns the directories removed. Call it after save_checkpoint, from the one process writing `dir`.
std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep);

// The exclusive lock on checkpoint directory `dir` (dir/.lock; the directory is created if needed), held by the
// run that writes it for as long as the FileLock lives. A second run writing the same directory would interleave
// steps and move `latest` backwards: it gets prophet::Error exit 4 (the directory is in use) naming the
// directory and the fix.
FileLock lock_checkpoint_dir(const std::string& dir);

// `path` is a checkpoint directory (uses `latest`; without it, the highest complete step-N) or a step directory.
std::string resolve_checkpoint(const std::string& path);

// Reads and verifies a checkpoint (see the top of this file for the errors). Writes nothing.
Checkpoint load_checkpoint(const std::string& path, const CheckpointExpect& expect = {});

// What `prophet ckpt show` prints: the headers and state without the tensor data.
struct CheckpointInfo {
    std::string dir;
    int64_t step = 0;
    CheckpointMeta meta;
    std::map<std::string, RngState> rng_states;
    SafetensorsHeader model;
    SafetensorsHeader optimizer;
};
CheckpointInfo inspect_checkpoint(const std::string& path);
std::string format_checkpoint_info(const CheckpointInfo& info);

}  // namespace prophet
