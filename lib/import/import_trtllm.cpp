// import_trtllm.cpp: TensorRT-LLM's expert statistics (EXPERT_STATISTIC_ITER_RANGE, EXPERT_STATISTIC_PATH).
//
// The directory holds meta_info.json {"num_experts": E, "num_experts_per_token": K, ...} and one
// rank{r}.safetensors per rank whose tensors are named "{iter}_{layer}": a 1-D [E] bincount of the experts the
// rank's own tokens selected in that iteration and layer. So row r of a layer is what device r routes to each
// expert: the per-device split the trace holds, recorded (with attention data parallelism every rank routes its
// own tokens). rank{r}_raw.safetensors and cooccurrence files in the same directory are not read.
// The safetensors header is parsed by lib/model/safetensors.cpp's reader (bounds and offsets checked there).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "load_series.h"
#include "model/checkpoint.h"

namespace prophet::import_detail {
namespace {

using nlohmann::json;

int rank_of_safetensors_file(const std::string& path) {
    const std::string name = std::filesystem::path(path).filename().string();
    const std::string suffix = ".safetensors";
    const bool shaped = name.size() > 4 + suffix.size() && name.starts_with("rank") && name.ends_with(suffix);
    const std::string digits = shaped ? name.substr(4, name.size() - 4 - suffix.size()) : "";
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
        throw_input_error(path, "the file name is not rank<r>.safetensors",
                          "pass TensorRT-LLM's EXPERT_STATISTIC_PATH directory (or its meta_info.json and rank files)");
    return std::stoi(digits);
}

int meta_int(const json& meta, const std::string& path, const char* key, int64_t max) {
    const auto it = meta.is_object() ? meta.find(key) : meta.end();
    if (!meta.is_object() || it == meta.end() || !it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > max)
        throw_input_error(path,
                          std::string("field \"") + key + "\" is " +
                              (!meta.is_object() || it == meta.end()
                                   ? std::string("missing")
                                   : "out of range: " + it->dump() + " (must be in [1, " + std::to_string(max) + "])"),
                          "pass the meta_info.json TensorRT-LLM wrote");
    return static_cast<int>(it->get<int64_t>());
}

// "{iter}_{layer}" as two non-negative integers; false when the name has another shape.
bool parse_key(const std::string& name, int64_t& iter, int64_t& layer) {
    const size_t sep = name.find('_');
    if (sep == 0 || sep == std::string::npos || sep + 1 == name.size() || sep > 12 || name.size() - sep - 1 > 12)
        return false;
    const std::string a = name.substr(0, sep), b = name.substr(sep + 1);
    const auto digits = [](const std::string& t) { return t.find_first_not_of("0123456789") == std::string::npos; };
    if (!digits(a) || !digits(b)) return false;
    iter = std::stoll(a);
    layer = std::stoll(b);
    return true;
}

struct RankCounts {
    std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> rows;  // (iter, layer) -> [E]
};

RankCounts read_rank(const std::string& path, int experts, int64_t cells_so_far) {
    const SafetensorsHeader header = read_safetensors_header(path);
    check_cells(path, static_cast<int64_t>(header.tensors.size()) + cells_so_far / experts + 1, 1, 1, experts);
    std::ifstream in(path, std::ios::binary);
    RankCounts counts;
    for (const TensorInfo& info : header.tensors) {
        int64_t iter = 0, layer = 0;
        const std::string field = "tensor \"" + info.name + "\"";
        if (!parse_key(info.name, iter, layer))
            throw_input_error(path, field + ": the name is not \"{iter}_{layer}\"",
                              "pass rank<r>.safetensors, not the _raw file");
        if (info.dtype != "I64" && info.dtype != "I32")
            throw_input_error(path, field + ": dtype " + info.dtype + ", expected I64 or I32 (a bincount)",
                              "pass the bincount file rank<r>.safetensors");
        if (info.shape.size() != 1 || info.shape[0] != experts)
            throw_input_error(path, field + ": shape must be [" + std::to_string(experts) + "] (num_experts)",
                              "pass files of the run that wrote meta_info.json");
        const size_t width = info.dtype == "I64" ? 8 : 4;
        std::vector<unsigned char> bytes(width * static_cast<size_t>(experts));
        in.seekg(static_cast<std::streamoff>(header.data_start + info.begin));
        if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
            throw_input_error(path, field + ": truncated data", "pass the complete file");
        std::vector<int64_t> row(static_cast<size_t>(experts));
        for (int e = 0; e < experts; ++e) {
            int64_t value = 0;  // little-endian, sign-extended
            for (size_t b = width; b-- > 0;) value = (value << 8) | bytes[e * width + b];
            if (width == 4) value = static_cast<int32_t>(static_cast<uint32_t>(value));
            if (value < 0 || value > kMaxImportCount)
                throw_input_error(
                    path,
                    field + "[" + std::to_string(e) + "] = " + std::to_string(value) + " is not a count in [0, 2^40]",
                    "pass the bincount file rank<r>.safetensors");
            row[static_cast<size_t>(e)] = value;
        }
        counts.rows.emplace(std::make_pair(iter, layer), std::move(row));
    }
    return counts;
}

// Copies rank r's rows into series (steps = iters, layers = layers, source r); the rank must hold exactly the
// (iteration, layer) tensors rank 0 holds.
void copy_rank(const RankCounts& rank, const std::string& path, int r, const std::set<int64_t>& iters,
               const std::set<int64_t>& layers, LoadSeries& series) {
    int s = 0;
    for (int64_t iter : iters) {
        int l = 0;
        for (int64_t layer : layers) {
            const auto found = rank.rows.find({iter, layer});
            if (found == rank.rows.end())
                throw_input_error(path,
                                  "tensor \"" + std::to_string(iter) + "_" + std::to_string(layer) + "\" is missing",
                                  "pass files of one run (every rank records the same iterations and layers)");
            std::copy(found->second.begin(), found->second.end(), &series.at(s, l, r, 0));
            ++l;
        }
        ++s;
    }
    if (rank.rows.size() != iters.size() * layers.size())
        throw_input_error(path, "holds tensors of iterations or layers that rank 0's file does not",
                          "pass files of one run (every rank records the same iterations and layers)");
}

}  // namespace

LoadSeries parse_trtllm(const std::string& meta_info, const std::vector<std::string>& rank_files) {
    const json meta = parse_json_file(meta_info);
    const int experts = meta_int(meta, meta_info, "num_experts", 1 << 16);
    const int top_k = meta_int(meta, meta_info, "num_experts_per_token", experts);
    std::map<int, std::string> by_rank;
    for (const std::string& file : rank_files)
        if (!by_rank.emplace(rank_of_safetensors_file(file), file).second)
            throw_input_error(file, "rank " + std::to_string(rank_of_safetensors_file(file)) + " is given twice",
                              "pass each rank once");
    const int ranks = static_cast<int>(by_rank.size());
    if (ranks == 0) throw_input_error(meta_info, "no rank<r>.safetensors files", "pass the rank files too");
    std::vector<RankCounts> per_rank;
    int64_t cells = 0;
    for (int r = 0; r < ranks; ++r) {
        if (!by_rank.count(r))
            throw_input_error(
                meta_info,
                "rank" + std::to_string(r) + ".safetensors is missing among " + std::to_string(ranks) + " rank files",
                "pass every rank's file (ranks 0 .. N-1)");
        per_rank.push_back(read_rank(by_rank[r], experts, cells));
        cells += static_cast<int64_t>(per_rank.back().rows.size()) * experts;
    }
    std::set<int64_t> iters, layers;
    for (const auto& [key, row] : per_rank[0].rows) {
        iters.insert(key.first);
        layers.insert(key.second);
    }
    check_cells(meta_info, static_cast<int64_t>(iters.size()), static_cast<int64_t>(layers.size()), ranks, experts);
    LoadSeries series;
    series.origin = by_rank[0];
    series.steps = static_cast<int>(iters.size());
    series.layers = static_cast<int>(layers.size());
    series.sources = ranks;
    series.experts = experts;
    series.top_k = top_k;
    series.counts.assign(static_cast<size_t>(series.steps) * series.layers * ranks * experts, 0);
    for (int64_t layer : layers) series.layer_names.push_back("layer " + std::to_string(layer));
    for (int r = 0; r < ranks; ++r) copy_rank(per_rank[static_cast<size_t>(r)], by_rank[r], r, iters, layers, series);
    return series;
}

}  // namespace prophet::import_detail
