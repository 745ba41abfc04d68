// safetensors.cpp: the safetensors format: header parsing and checking against the file, tensor read and write.
#include <algorithm>
#include <bit>
#include <new>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/checkpoint.h"
#include "model/checkpoint_internal.h"

namespace prophet {

using json = nlohmann::json;

namespace checkpoint_detail {

namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian: add byte swapping");
static_assert(sizeof(float) == 4);

constexpr uint64_t kMaxHeaderBytes = 100000000;  // the limit of the safetensors reference implementation

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

}  // namespace

uint64_t dtype_size(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
    return 0;
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

}  // namespace checkpoint_detail

using namespace checkpoint_detail;

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

}  // namespace prophet
