// checkpoint.cpp: safetensors reader/writer, atomic checkpoint directories and their verification on load.
#include "model/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/atomic_file.h"
#include "core/error.h"

namespace prophet {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian: add byte swapping");
static_assert(sizeof(float) == 4);
static_assert(std::is_trivially_copyable_v<Rng> && std::is_standard_layout_v<Rng> && sizeof(Rng) == sizeof(RngState),
              "rng_state() copies Rng's four state words");

constexpr uint64_t kMaxHeaderBytes = 100000000;  // the limit of the safetensors reference implementation
constexpr int64_t kFormatVersion = 1;
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kLatestFile = "latest";
constexpr const char* kCorruptFix = "load an older step directory, or start a new run";

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

class FileOut {
  public:
    explicit FileOut(std::string path) : path_(std::move(path)) {
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd_ < 0) io_error(path_, "cannot create", errno);
    }
    ~FileOut() {
        if (fd_ >= 0) ::close(fd_);
    }
    FileOut(const FileOut&) = delete;
    FileOut& operator=(const FileOut&) = delete;

    void write(const void* data, size_t size) {
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
    void sync_and_close() {
        if (::fsync(fd_) != 0) io_error(path_, "fsync failed", errno);
        const int fd = fd_;
        fd_ = -1;
        if (::close(fd) != 0) io_error(path_, "close failed", errno);
    }

  private:
    std::string path_;
    int fd_ = -1;
};

class FileIn {
  public:
    explicit FileIn(std::string path) : path_(std::move(path)) {
        fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) {
            const int err = errno;
            throw_input_error(path_,
                              err == ENOENT ? "file not found" : std::string("cannot open: ") + std::strerror(err),
                              kCorruptFix);
        }
        struct stat info {};
        if (::fstat(fd_, &info) != 0) io_error(path_, "fstat failed", errno);
        if (!S_ISREG(info.st_mode)) throw_input_error(path_, "not a regular file", kCorruptFix);
        size_ = static_cast<uint64_t>(info.st_size);
    }
    ~FileIn() { ::close(fd_); }
    FileIn(const FileIn&) = delete;
    FileIn& operator=(const FileIn&) = delete;

    uint64_t size() const { return size_; }
    void read_at(uint64_t offset, void* data, size_t size) const {
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

  private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

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

uint64_t dtype_size(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
    return 0;
}

// The 8-byte little-endian header length and the JSON object after it; sets data_start (the first data byte).
json read_header_json(const FileIn& in, const std::string& path, uint64_t& data_start) {
    if (in.size() < 8)
        throw_input_error(path,
                          "truncated: " + std::to_string(in.size()) +
                              " bytes, shorter than the 8-byte header length of a safetensors file",
                          kCorruptFix);
    unsigned char length_bytes[8];
    in.read_at(0, length_bytes, 8);
    uint64_t header_len = 0;
    for (int b = 7; b >= 0; --b) header_len = (header_len << 8) | length_bytes[b];
    if (header_len > kMaxHeaderBytes)
        throw_input_error(
            path,
            "not a safetensors file: header length " + std::to_string(header_len) + " bytes exceeds the 100 MB limit",
            "pass a model.safetensors written by prophet");
    if (header_len > in.size() - 8)
        throw_input_error(path,
                          "truncated: header length " + std::to_string(header_len) + " bytes but only " +
                              std::to_string(in.size() - 8) + " bytes follow it",
                          kCorruptFix);
    data_start = 8 + header_len;
    std::string text(static_cast<size_t>(header_len), '\0');
    if (header_len > 0) in.read_at(8, text.data(), text.size());
    if (text.empty() || text[0] != '{')
        throw_input_error(path, "not a safetensors file: the header does not start with '{'",
                          "pass a model.safetensors written by prophet");
    json parsed;
    try {
        parsed = json::parse(text);
    } catch (const json::exception& e) {
        throw_input_error(path, std::string("corrupted header: invalid JSON (") + e.what() + ")", kCorruptFix);
    }
    if (!parsed.is_object()) throw_input_error(path, "corrupted header: the JSON header is not an object", kCorruptFix);
    return parsed;
}

// The header's "__metadata__" object: string values only.
void read_header_metadata(const json& entry, const std::string& path, std::map<std::string, std::string>& metadata) {
    if (!entry.is_object()) throw_input_error(path, "corrupted header: __metadata__ is not an object", kCorruptFix);
    for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
            throw_input_error(path, "corrupted header: __metadata__ \"" + key + "\" is not a string", kCorruptFix);
        metadata[key] = value.get<std::string>();
    }
}

[[noreturn]] void throw_corrupt_tensor(const std::string& path, const std::string& name, const std::string& problem) {
    throw_input_error(path, "corrupted header: tensor \"" + name + "\": " + problem, kCorruptFix);
}

// One tensor's entry {dtype, shape, data_offsets}: a known dtype, a shape whose bytes match its offsets, and data
// within the data_len bytes after the header.
TensorInfo parse_tensor_entry(const std::string& name, const json& entry, uint64_t data_len, const std::string& path) {
    auto corrupt = [&](const std::string& problem) { throw_corrupt_tensor(path, name, problem); };
    if (!entry.is_object()) corrupt("entry is not an object");
    TensorInfo info;
    info.name = name;
    const auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) corrupt("no \"dtype\" string");
    info.dtype = dtype->get<std::string>();
    const uint64_t element_size = dtype_size(info.dtype);
    if (element_size == 0) corrupt("unknown dtype \"" + info.dtype + "\"");
    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) corrupt("no \"shape\" list");
    uint64_t bytes = element_size;
    for (const json& dim : *shape) {
        if (!dim.is_number_unsigned() || dim.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
            corrupt("shape " + shape->dump() + " is not a list of non-negative integers");
        const uint64_t extent = dim.get<uint64_t>();
        if (__builtin_mul_overflow(bytes, extent, &bytes)) corrupt("shape " + shape->dump() + " overflows");
        info.shape.push_back(static_cast<int64_t>(extent));
    }
    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
        corrupt("no \"data_offsets\" pair of non-negative integers");
    info.begin = (*offsets)[0].get<uint64_t>();
    info.end = (*offsets)[1].get<uint64_t>();
    if (info.end < info.begin) corrupt("data_offsets " + offsets->dump() + " end before they begin");
    if (info.end > data_len)
        throw_input_error(path,
                          "truncated: tensor \"" + name + "\" ends at data byte " + std::to_string(info.end) +
                              " but the file holds " + std::to_string(data_len) + " data bytes",
                          kCorruptFix);
    if (info.end - info.begin != bytes)
        throw_input_error(path,
                          "truncated or corrupted: tensor \"" + name + "\" has " +
                              std::to_string(info.end - info.begin) + " data bytes but " + info.dtype + " shape " +
                              shape_text(info.shape) + " needs " + std::to_string(bytes),
                          kCorruptFix);
    return info;
}

// Sorts the tensors by their data and checks they tile the data_len data bytes: no overlap, no gap, no tail.
void sort_and_check_tiling(std::vector<TensorInfo>& tensors, uint64_t data_len, const std::string& path) {
    std::stable_sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t expected = 0;
    for (const TensorInfo& info : tensors) {
        if (info.begin != expected)
            throw_corrupt_tensor(path, info.name,
                                 "data begins at byte " + std::to_string(info.begin) + ", expected " +
                                     std::to_string(expected) + " (tensors overlap or leave a gap)");
        expected = info.end;
    }
    if (expected != data_len)
        throw_input_error(path,
                          "corrupted: " + std::to_string(data_len - expected) + " bytes after the last tensor's data",
                          kCorruptFix);
}

SafetensorsHeader parse_header(const FileIn& in, const std::string& path) {
    SafetensorsHeader header;
    header.file_size = in.size();
    const json parsed = read_header_json(in, path, header.data_start);
    const uint64_t data_len = in.size() - header.data_start;
    for (const auto& [name, entry] : parsed.items()) {
        if (name == "__metadata__") {
            read_header_metadata(entry, path, header.metadata);
            continue;
        }
        header.tensors.push_back(parse_tensor_entry(name, entry, data_len, path));
    }
    sort_and_check_tiling(header.tensors, data_len, path);
    return header;
}

TensorMap read_tensors(const FileIn& in, const std::string& path, const SafetensorsHeader& header) {
    TensorMap tensors;
    for (const TensorInfo& info : header.tensors) {
        if (info.dtype != "F32")
            throw_input_error(path, "tensor \"" + info.name + "\" has dtype " + info.dtype + "; prophet reads F32",
                              "convert the file to F32");
        Tensor tensor;
        tensor.shape = info.shape;
        try {
            tensor.data.resize(static_cast<size_t>((info.end - info.begin) / sizeof(float)));
        } catch (const std::bad_alloc&) {
            throw Error(kExitResource, "resource error: " + path + ": tensor \"" + info.name + "\" of " +
                                           std::to_string(info.end - info.begin) +
                                           " bytes does not fit in memory; fix: load on a machine with more memory");
        }
        if (!tensor.data.empty())
            in.read_at(header.data_start + info.begin, tensor.data.data(), tensor.data.size() * sizeof(float));
        tensors.emplace(info.name, std::move(tensor));
    }
    return tensors;
}

RngState rng_state_from_hex(const std::string& path, const std::string& name, const std::string& hex) {
    if (hex.size() != 64) throw_input_error(path, "corrupted: rng \"" + name + "\" is not 64 hex digits", kCorruptFix);
    RngState state{};
    for (size_t w = 0; w < 4; ++w) {
        uint64_t word = 0;
        for (size_t c = 0; c < 16; ++c) {
            const char ch = hex[w * 16 + c];
            int digit = -1;
            if (ch >= '0' && ch <= '9')
                digit = ch - '0';
            else if (ch >= 'a' && ch <= 'f')
                digit = ch - 'a' + 10;
            else if (ch >= 'A' && ch <= 'F')
                digit = ch - 'A' + 10;
            if (digit < 0) throw_input_error(path, "corrupted: rng \"" + name + "\" is not 64 hex digits", kCorruptFix);
            word = (word << 4) | static_cast<uint64_t>(digit);
        }
        state[w] = word;
    }
    return state;
}

// the step encoded in a directory name "step-<digits>", or -1
int64_t step_of_name(const std::string& name) {
    if (name.size() <= 5 || name.compare(0, 5, "step-") != 0 || name.size() > 5 + 18) return -1;
    int64_t step = 0;
    for (size_t c = 5; c < name.size(); ++c) {
        if (name[c] < '0' || name[c] > '9') return -1;
        step = step * 10 + (name[c] - '0');
    }
    return step;
}

std::map<std::string, std::string> string_map(const json& object, const std::string& path, const std::string& field) {
    std::map<std::string, std::string> result;
    if (!object.is_object()) throw_input_error(path, "corrupted: \"" + field + "\" is not an object", kCorruptFix);
    for (const auto& [key, value] : object.items()) {
        if (!value.is_string())
            throw_input_error(path, "corrupted: \"" + field + "." + key + "\" is not a string", kCorruptFix);
        result[key] = value.get<std::string>();
    }
    return result;
}

void rename_into_place(const std::string& tmp, const std::string& final_dir) {
    if (::rename(tmp.c_str(), final_dir.c_str()) == 0) return;
    if (errno != ENOTEMPTY && errno != EEXIST) io_error(final_dir, "cannot rename " + tmp + " to it", errno);
    // the same step was saved before: swap atomically, then drop the old copy (now at tmp)
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
        if (errno != EINVAL && errno != ENOSYS) io_error(final_dir, "cannot exchange it with " + tmp, errno);
        const std::string old = final_dir + ".old";  // file system without RENAME_EXCHANGE
        std::error_code ec;
        fs::remove_all(old, ec);
        if (::rename(final_dir.c_str(), old.c_str()) != 0) io_error(final_dir, "cannot move aside", errno);
        if (::rename(tmp.c_str(), final_dir.c_str()) != 0) io_error(final_dir, "cannot rename " + tmp, errno);
        fs::remove_all(old, ec);
        return;
    }
    std::error_code ec;
    fs::remove_all(tmp, ec);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// safetensors

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const TensorView& tensor : tensors) {
        PROPHET_ASSERT_MSG(!tensor.name.empty() && tensor.name != "__metadata__" && !header.contains(tensor.name),
                           "tensor name \"" + tensor.name + "\" is empty, reserved or given twice (" + path + ")");
        uint64_t count = 1;
        for (int64_t extent : tensor.shape) {
            PROPHET_ASSERT_MSG(extent >= 0, "negative extent in " + tensor.name);
            count *= static_cast<uint64_t>(extent);
        }
        const uint64_t bytes = count * sizeof(float);
        PROPHET_ASSERT_MSG(bytes == 0 || tensor.data != nullptr, "tensor " + tensor.name + " has no data");
        header[tensor.name] = {{"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    unsigned char length_bytes[8];
    for (int b = 0; b < 8; ++b) length_bytes[b] = static_cast<unsigned char>(text.size() >> (8 * b));
    FileOut out(path);
    out.write(length_bytes, 8);
    out.write(text.data(), text.size());
    for (const TensorView& tensor : tensors) {
        uint64_t count = 1;
        for (int64_t extent : tensor.shape) count *= static_cast<uint64_t>(extent);
        if (count > 0) out.write(tensor.data, static_cast<size_t>(count * sizeof(float)));
    }
    out.sync_and_close();
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
    FileIn in(path);
    return parse_header(in, path);
}

TensorMap read_safetensors(const std::string& path, SafetensorsHeader* header) {
    FileIn in(path);
    SafetensorsHeader parsed = parse_header(in, path);
    TensorMap tensors = read_tensors(in, path, parsed);
    if (header != nullptr) *header = std::move(parsed);
    return tensors;
}

// ---------------------------------------------------------------------------------------------------------
// RNG state

RngState rng_state(const Rng& rng) {
    RngState state;
    std::memcpy(state.data(), &rng, sizeof(state));
    return state;
}

Rng rng_from_state(const RngState& state) {
    Rng rng(0);
    std::memcpy(static_cast<void*>(&rng), state.data(), sizeof(state));
    return rng;
}

std::string rng_state_hex(const RngState& state) {
    char text[65];
    std::snprintf(text, sizeof(text), "%016llx%016llx%016llx%016llx", static_cast<unsigned long long>(state[0]),
                  static_cast<unsigned long long>(state[1]), static_cast<unsigned long long>(state[2]),
                  static_cast<unsigned long long>(state[3]));
    return text;
}

// ---------------------------------------------------------------------------------------------------------
// checkpoints

std::string checkpoint_dir_name(int64_t step) {
    char text[32];
    std::snprintf(text, sizeof(text), "step-%08lld", static_cast<long long>(step));
    return text;
}

std::string save_checkpoint(const std::string& dir, int64_t step, const std::vector<TensorView>& tensors,
                            const std::vector<TensorView>& optimizer_tensors,
                            const std::map<std::string, RngState>& rng_states, const CheckpointMeta& meta) {
    PROPHET_ASSERT(step >= 0);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) io_error(dir, "cannot create the checkpoint directory", ec.value());
    const std::string name = checkpoint_dir_name(step);
    const std::string tmp = (fs::path(dir) / (".tmp-" + name)).string();
    const std::string final_dir = (fs::path(dir) / name).string();
    fs::remove_all(tmp, ec);  // left by a save that crashed
    if (ec) io_error(tmp, "cannot remove a stale temporary directory", ec.value());
    if (::mkdir(tmp.c_str(), 0755) != 0) io_error(tmp, "cannot create", errno);

    write_safetensors((fs::path(tmp) / kModelFile).string(), tensors,
                      {{"format", "prophet"}, {"step", std::to_string(step)}, {"config_hash", meta.config_hash}});
    write_safetensors((fs::path(tmp) / kOptimizerFile).string(), optimizer_tensors,
                      {{"format", "prophet-optimizer"},
                       {"step", std::to_string(meta.optimizer_step)},
                       {"checkpoint_step", std::to_string(step)},
                       {"config_hash", meta.config_hash}});
    json rng = json::object();
    for (const auto& [rng_name, state] : rng_states) rng[rng_name] = rng_state_hex(state);
    const json state = {{"format", "prophet-checkpoint"},
                        {"format_version", kFormatVersion},
                        {"step", step},
                        {"optimizer_step", meta.optimizer_step},
                        {"config_hash", meta.config_hash},
                        {"prophet_version", meta.prophet_version},
                        {"rng", rng},
                        {"data_position", meta.data_position},
                        {"extra", meta.extra},
                        {"files", {kModelFile, kOptimizerFile}}};
    write_text_file((fs::path(tmp) / kStateFile).string(), state.dump(2) + "\n");
    sync_directory(tmp);

    rename_into_place(tmp, final_dir);
    sync_directory(dir);
    // a unique temporary created exclusively, renamed over `latest`, directory synced (core/atomic_file.h)
    write_file_atomically((fs::path(dir) / kLatestFile).string(), name + "\n");
    return final_dir;
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep) {
    std::vector<std::string> removed;
    if (keep <= 0) return removed;
    std::error_code ec;
    std::string latest =
        fs::exists(fs::path(dir) / kLatestFile, ec) ? read_text_file((fs::path(dir) / kLatestFile).string()) : "";
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r' || latest.back() == ' '))
        latest.pop_back();
    std::vector<std::pair<int64_t, std::string>> steps;  // (step, name) of every real step directory
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        const int64_t step = step_of_name(name);
        if (step >= 0 && entry.symlink_status(ec).type() == fs::file_type::directory) steps.emplace_back(step, name);
    }
    std::sort(steps.begin(), steps.end(), std::greater<>());  // newest first
    for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i) {
        if (steps[i].second == latest) continue;
        const std::string path = (fs::path(dir) / steps[i].second).string();
        fs::remove_all(path, ec);
        if (ec) io_error(path, "cannot remove an old checkpoint (train.keep_checkpoints)", ec.value());
        removed.push_back(path);
    }
    return removed;
}

FileLock lock_checkpoint_dir(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) io_error(dir, "cannot create the checkpoint directory", ec.value());
    const std::string path = (fs::path(dir) / ".lock").string();
    std::optional<FileLock> lock = FileLock::try_acquire(path, kExitResource);
    if (!lock)
        throw Error(kExitResource, "resource error: checkpoint directory " + dir +
                                       " is in use: another run writes it "
                                       "(it holds " +
                                       path +
                                       "); fix: set train.checkpoint_dir to another directory, or "
                                       "wait for that run to end");
    return std::move(*lock);
}

std::string resolve_checkpoint(const std::string& path) {
    const std::string fix = "pass a checkpoint directory written by prophet, or one of its step-N directories";
    std::error_code ec;
    if (!fs::is_directory(path, ec)) throw_input_error(path, "no such checkpoint directory", fix);
    if (fs::is_regular_file(fs::path(path) / kStateFile, ec)) return path;
    const fs::path latest = fs::path(path) / kLatestFile;
    if (fs::exists(latest, ec)) {
        std::string name = read_text_file(latest.string());
        while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
            throw_input_error(latest.string(), "corrupted: does not name a step directory",
                              "write the name of a complete step directory into it, e.g. step-00000100");
        const fs::path target = fs::path(path) / name;
        if (!fs::is_regular_file(target / kStateFile, ec))
            throw_input_error(latest.string(), "names " + name + " but " + target.string() + " holds no " + kStateFile,
                              "pass a complete step directory instead (ls " + path + ")");
        return target.string();
    }
    int64_t best = -1;
    std::string best_dir;
    for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
        const int64_t step = step_of_name(entry.path().filename().string());
        if (step > best && fs::is_regular_file(entry.path() / kStateFile, ec)) {
            best = step;
            best_dir = entry.path().string();
        }
    }
    if (best < 0) throw_input_error(path, "not a checkpoint: no latest, state.json or step-N directory", fix);
    return best_dir;
}

CheckpointInfo inspect_checkpoint(const std::string& path) {
    CheckpointInfo info;
    info.dir = resolve_checkpoint(path);
    const std::string state_path = (fs::path(info.dir) / kStateFile).string();
    json state;
    try {
        state = json::parse(read_text_file(state_path));
    } catch (const json::exception& e) {
        throw_input_error(state_path, std::string("corrupted: invalid JSON (") + e.what() + ")", kCorruptFix);
    }
    auto field = [&](const char* key, bool (json::*is_type)() const noexcept, const char* type) -> const json& {
        if (!state.is_object() || !state.contains(key) || !(state[key].*is_type)())
            throw_input_error(state_path, std::string("corrupted: \"") + key + "\" missing or not " + type,
                              kCorruptFix);
        return state[key];
    };
    if (field("format", &json::is_string, "a string").get<std::string>() != "prophet-checkpoint")
        throw_input_error(state_path, "not a prophet checkpoint (format is not \"prophet-checkpoint\")",
                          "pass a directory written by prophet");
    const int64_t version = field("format_version", &json::is_number_integer, "an integer").get<int64_t>();
    if (version > kFormatVersion)
        throw_input_error(state_path,
                          "written by a newer prophet (format_version " + std::to_string(version) + " > " +
                              std::to_string(kFormatVersion) + ")",
                          "load it with the prophet version that wrote it (state.json prophet_version)");
    info.step = field("step", &json::is_number_integer, "an integer").get<int64_t>();
    info.meta.optimizer_step = field("optimizer_step", &json::is_number_integer, "an integer").get<int64_t>();
    info.meta.config_hash = field("config_hash", &json::is_string, "a string").get<std::string>();
    info.meta.prophet_version = field("prophet_version", &json::is_string, "a string").get<std::string>();
    info.meta.data_position =
        string_map(field("data_position", &json::is_object, "an object"), state_path, "data_position");
    info.meta.extra = string_map(field("extra", &json::is_object, "an object"), state_path, "extra");
    for (const auto& [name, hex] : string_map(field("rng", &json::is_object, "an object"), state_path, "rng"))
        info.rng_states[name] = rng_state_from_hex(state_path, name, hex);

    const std::string model_path = (fs::path(info.dir) / kModelFile).string();
    const std::string optimizer_path = (fs::path(info.dir) / kOptimizerFile).string();
    info.model = read_safetensors_header(model_path);
    info.optimizer = read_safetensors_header(optimizer_path);
    auto check_meta = [&](const SafetensorsHeader& header, const std::string& file, const std::string& key,
                          const std::string& expected) {
        const auto found = header.metadata.find(key);
        if (found == header.metadata.end() || found->second != expected)
            throw_input_error(file,
                              "inconsistent checkpoint: __metadata__ " + key + " = \"" +
                                  (found == header.metadata.end() ? std::string("(missing)") : found->second) +
                                  "\" but state.json says \"" + expected + "\"",
                              kCorruptFix);
    };
    check_meta(info.model, model_path, "step", std::to_string(info.step));
    check_meta(info.model, model_path, "config_hash", info.meta.config_hash);
    check_meta(info.optimizer, optimizer_path, "step", std::to_string(info.meta.optimizer_step));
    check_meta(info.optimizer, optimizer_path, "config_hash", info.meta.config_hash);
    return info;
}

namespace {

using ShapeMap = std::map<std::string, std::vector<int64_t>>;  // tensor name -> shape

ShapeMap shapes_of(const SafetensorsHeader& header) {
    ShapeMap shapes;
    for (const TensorInfo& tensor : header.tensors) shapes[tensor.name] = tensor.shape;
    return shapes;
}

// The paths and the fix that every mismatch with the expected model names.
struct ExpectContext {
    const CheckpointExpect& expect;
    const ShapeMap& model_shapes;
    const ShapeMap& optimizer_shapes;
    std::string model_path;
    std::string optimizer_path;
    std::string config_fix;
};

// A checkpoint saved under another config hash: the error names the first expected tensor that differs.
void check_config_hash(const CheckpointInfo& info, const ExpectContext& c) {
    if (c.expect.config_hash.empty() || c.expect.config_hash == info.meta.config_hash) return;
    std::string difference;
    for (const auto& [name, shape] : c.expect.tensors) {
        const auto found = c.model_shapes.find(name);
        if (found == c.model_shapes.end()) {
            difference = "; first difference: tensor " + name + " " + shape_text(shape) + " is not in the checkpoint";
            break;
        }
        if (found->second != shape) {
            difference = "; first difference: tensor " + name + " is " + shape_text(found->second) +
                         " in the checkpoint, " + shape_text(shape) + " expected";
            break;
        }
    }
    throw_input_error(info.dir,
                      "checkpoint from another config (hash " + info.meta.config_hash + ", expected " +
                          c.expect.config_hash + ")" + difference,
                      c.config_fix);
}

// Parameter `name` of `shape` is in the model file, and (with the optimizer) its moments `name.m`, `name.v` too.
void check_expected_tensor(const std::string& name, const std::vector<int64_t>& shape, const ExpectContext& c) {
    const auto found = c.model_shapes.find(name);
    if (found == c.model_shapes.end())
        throw_input_error(c.model_path, "tensor " + name + " " + shape_text(shape) + " is missing", c.config_fix);
    if (found->second != shape)
        throw_input_error(
            c.model_path,
            "tensor " + name + " is " + shape_text(found->second) + ", the model expects " + shape_text(shape),
            c.config_fix);
    if (!c.expect.optimizer) return;
    for (const char* suffix : {".m", ".v"}) {
        const std::string state_name = name + suffix;
        const auto state = c.optimizer_shapes.find(state_name);
        if (state == c.optimizer_shapes.end())
            throw_input_error(c.optimizer_path, "optimizer tensor " + state_name + " is missing", c.config_fix);
        if (state->second != shape)
            throw_input_error(c.optimizer_path,
                              "optimizer tensor " + state_name + " is " + shape_text(state->second) + ", expected " +
                                  shape_text(shape),
                              c.config_fix);
    }
}

// The files hold exactly the expected parameters (and their moments): none missing, none of another shape, none
// extra.
void check_expected_tensors(const ExpectContext& c) {
    if (c.expect.tensors.empty()) return;
    std::set<std::string> expected_names;
    for (const auto& [name, shape] : c.expect.tensors) {
        expected_names.insert(name);
        check_expected_tensor(name, shape, c);
    }
    for (const auto& [name, shape] : c.model_shapes)
        if (!expected_names.count(name))
            throw_input_error(c.model_path,
                              "tensor " + name + " " + shape_text(shape) + " is not a parameter of this model",
                              c.config_fix);
    if (!c.expect.optimizer) return;
    for (const auto& [name, shape] : c.optimizer_shapes) {
        const bool moment = name.size() > 2 && (name.ends_with(".m") || name.ends_with(".v"));
        if (!moment || !expected_names.count(name.substr(0, name.size() - 2)))
            throw_input_error(
                c.optimizer_path,
                "optimizer tensor " + name + " " + shape_text(shape) + " is not the state of a parameter of this model",
                c.config_fix);
    }
}

// The tensors of the file whose header was read before: still the same size, then read and verified.
TensorMap read_tensors_again(const std::string& path, const SafetensorsHeader& header) {
    FileIn in(path);
    if (in.size() != header.file_size) throw_input_error(path, "truncated or replaced while being read", kCorruptFix);
    return read_tensors(in, path, header);
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path, const CheckpointExpect& expect) {
    CheckpointInfo info = inspect_checkpoint(path);
    const ShapeMap model_shapes = shapes_of(info.model);
    const ShapeMap optimizer_shapes = shapes_of(info.optimizer);
    const ExpectContext context{expect,
                                model_shapes,
                                optimizer_shapes,
                                (fs::path(info.dir) / kModelFile).string(),
                                (fs::path(info.dir) / kOptimizerFile).string(),
                                "resume with the config this checkpoint was saved with (prophet ckpt show " + info.dir +
                                    "), or give the new run another checkpoint directory"};
    check_config_hash(info, context);
    check_expected_tensors(context);

    Checkpoint checkpoint;
    checkpoint.dir = info.dir;
    checkpoint.step = info.step;
    checkpoint.tensors = read_tensors_again(context.model_path, info.model);
    checkpoint.optimizer = read_tensors_again(context.optimizer_path, info.optimizer);
    checkpoint.rng_states = std::move(info.rng_states);
    checkpoint.meta = std::move(info.meta);
    return checkpoint;
}

std::string format_checkpoint_info(const CheckpointInfo& info) {
    std::ostringstream out;
    out << "checkpoint " << info.dir << "\n";
    out << "  step " << info.step << ", optimizer step " << info.meta.optimizer_step << ", prophet "
        << (info.meta.prophet_version.empty() ? "?" : info.meta.prophet_version) << "\n";
    out << "  config_hash " << info.meta.config_hash << "\n";
    for (const auto& [name, state] : info.rng_states) out << "  rng " << name << " " << rng_state_hex(state) << "\n";
    for (const auto& [key, value] : info.meta.data_position) out << "  data." << key << " = " << value << "\n";
    for (const auto& [key, value] : info.meta.extra) out << "  extra." << key << " = " << value << "\n";
    auto table = [&](const char* file, const SafetensorsHeader& header) {
        uint64_t elements = 0;
        size_t width = 4;
        for (const TensorInfo& tensor : header.tensors) {
            elements += (tensor.end - tensor.begin) / std::max<uint64_t>(1, dtype_size(tensor.dtype));
            width = std::max(width, tensor.name.size());
        }
        out << "  " << file << ": " << header.tensors.size() << " tensors, " << elements << " elements, "
            << header.file_size << " bytes\n";
        std::vector<const TensorInfo*> sorted;
        for (const TensorInfo& tensor : header.tensors) sorted.push_back(&tensor);
        std::sort(sorted.begin(), sorted.end(),
                  [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
        for (const TensorInfo* tensor : sorted)
            out << "    " << tensor->name << std::string(width - tensor->name.size() + 2, ' ') << tensor->dtype << " "
                << shape_text(tensor->shape) << "\n";
    };
    table(kModelFile, info.model);
    table(kOptimizerFile, info.optimizer);
    return out.str();
}

}  // namespace prophet
