// import_megatron.cpp: Megatron-LM's tokens_per_expert/rank{R}.jsonl (--save-tokens-per-expert-interval N).
//
// Each line is one MoE layer of one saved iteration on one rank:
//   {"iter": 100, "block": "decoder", "layer": 3, "tpe": [[128, 64], [96, 80]]}
// `tpe` holds, per micro-batch, the tokens the rank's local experts received (the grouped GEMM's split sizes, so
// a destination count: which rank sent them is not recorded). `layer` is the index inside the rank's pipeline
// stage (module name decoder.layers.<layer>), so the stage's offset is not in the file: layers are ordered by
// (stage, layer). "mtp" lines (multi-token prediction) are left out. Ranks follow Megatron's default order
// tp-cp-ep-dp-pp for the expert grid: rank = etp + ETP (ep + EP (edp + EDP pp)); expert ep x n + j is local
// expert j of expert-parallel rank ep (n local experts). Expert-data-parallel groups see different tokens and
// are summed; expert-tensor-parallel ranks see the same tokens and only etp rank 0 is read.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "core/error.h"
#include "load_series.h"

namespace prophet::import_detail {
namespace {

using nlohmann::json;

struct Grid {
    int ep = 1, etp = 1, pp = 1, edp = 1;
};

struct LayerKey {
    int64_t iter;
    int stage;
    int64_t layer;
    bool operator<(const LayerKey& o) const {
        return std::tie(iter, stage, layer) < std::tie(o.iter, o.stage, o.layer);
    }
};

struct Accumulated {
    int local_experts = 0;                            // n, from the first line read
    std::map<LayerKey, std::vector<int64_t>> counts;  // [EP x n] per (iter, stage, layer)
    std::map<LayerKey, int> reports;                  // how many ranks reported the key (EP x EDP expected)
    int mtp_lines = 0;
};

int rank_of_file(const std::string& path) {
    const std::string name = std::filesystem::path(path).filename().string();
    const std::string_view digits = std::string_view{name}.substr(std::min<size_t>(4, name.size()));
    const size_t dot = digits.find('.');
    if (!name.starts_with("rank") || dot == 0 || dot == std::string_view::npos || dot > 6 ||
        digits.substr(dot) != ".jsonl" || digits.substr(0, dot).find_first_not_of("0123456789") != std::string::npos)
        throw_input_error(path, "the file name is not rank<R>.jsonl",
                          "pass the files of Megatron's tokens_per_expert directory (or the directory itself)");
    return std::stoi(std::string(digits.substr(0, dot)));
}

int64_t line_int(const json& record, const char* key, const std::string& where) {
    const auto it = record.find(key);
    if (it == record.end() || !it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > (int64_t{1} << 40))
        throw_input_error(
            where,
            std::string("field \"") + key + "\" is " +
                (it == record.end() ? std::string("missing") : "not a non-negative integer up to 2^40: " + it->dump()),
            "pass the JSONL lines Megatron wrote");
    return it->get<int64_t>();
}

// Sums the micro-batches of `tpe` into `out` (n entries), fixing n from the first line of the import.
void add_tpe(const json& tpe, const std::string& where, Accumulated& acc, int64_t* out) {
    if (!tpe.is_array() || tpe.empty())
        throw_input_error(where, "field \"tpe\" must be a non-empty list of micro-batches",
                          "pass the JSONL lines Megatron wrote");
    for (size_t mb = 0; mb < tpe.size(); ++mb) {
        const json& row = tpe[mb];
        const std::string field = "tpe[" + std::to_string(mb) + "]";
        if (!row.is_array() || row.empty() || row.size() != static_cast<size_t>(acc.local_experts))
            throw_input_error(where,
                              "field \"" + field + "\" must list " + std::to_string(acc.local_experts) +
                                  " local experts, found " +
                                  (row.is_array() ? std::to_string(row.size()) : row.type_name()),
                              "every line counts the same local experts");
        for (size_t j = 0; j < row.size(); ++j) {
            out[j] += json_count(row[j], where, field + "[" + std::to_string(j) + "]");
            if (out[j] > kMaxImportCount) throw_input_error(where, "field \"tpe\" sums past 2^40", "check the file");
        }
    }
}

void read_rank_file(const std::string& path, int rank, const Grid& grid, Accumulated& acc) {
    const int ep = (rank / grid.etp) % grid.ep;
    const int stage = rank / (grid.etp * grid.ep * grid.edp);
    const std::string text = read_bounded_file(path);
    std::set<std::pair<int64_t, int64_t>> seen;  // (iter, layer) of this file
    std::string_view rest(text);
    for (int line = 1; !rest.empty(); ++line) {
        const size_t end = rest.find('\n');
        const std::string_view row = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        const std::string where = path + " line " + std::to_string(line);
        json record;
        try {
            record = json::parse(row);
        } catch (const json::exception& e) {
            throw_input_error(where, std::string("not valid JSON: ") + e.what(), "pass the JSONL lines Megatron wrote");
        }
        if (!record.is_object()) throw_input_error(where, "the line is not a JSON object", "pass Megatron's JSONL");
        const auto block = record.find("block");
        if (block == record.end() || !block->is_string() || (*block != "decoder" && *block != "mtp"))
            throw_input_error(where, "field \"block\" must be \"decoder\" or \"mtp\"", "pass Megatron's JSONL");
        if (*block == "mtp") {
            ++acc.mtp_lines;
            continue;
        }
        const LayerKey key{line_int(record, "iter", where), stage, line_int(record, "layer", where)};
        if (!seen.insert({key.iter, key.layer}).second)
            throw_input_error(where,
                              "a second record of iter " + std::to_string(key.iter) + ", layer " +
                                  std::to_string(key.layer) + " in one file",
                              "virtual pipeline stages (two model chunks per rank) are not supported");
        const auto tpe = record.find("tpe");
        if (tpe == record.end()) throw_input_error(where, "field \"tpe\" is missing", "pass Megatron's JSONL");
        if (acc.local_experts == 0) {
            const bool listed = tpe->is_array() && !tpe->empty() && (*tpe)[0].is_array();
            acc.local_experts = listed ? static_cast<int>(std::min<size_t>((*tpe)[0].size(), 1 << 20)) : 0;
            if (acc.local_experts == 0)
                throw_input_error(where, "field \"tpe\" has no counts", "pass Megatron's JSONL");
        }
        auto [it, fresh] = acc.counts.try_emplace(key);
        if (fresh) {
            check_cells(path, static_cast<int64_t>(acc.counts.size()), 1, grid.ep, acc.local_experts);
            it->second.assign(static_cast<size_t>(grid.ep) * acc.local_experts, 0);
        }
        add_tpe(*tpe, where, acc, it->second.data() + static_cast<size_t>(ep) * acc.local_experts);
        ++acc.reports[key];
    }
}

// Dense steps x layers from the keys; every key must have been reported by all EP x EDP ranks of its stage and
// every saved iteration must hold the same layers.
LoadSeries to_series(const Accumulated& acc, const Grid& grid, const std::string& origin) {
    std::set<int64_t> iters;
    std::set<std::pair<int, int64_t>> layers;
    for (const auto& [key, reports] : acc.reports) {
        iters.insert(key.iter);
        layers.insert({key.stage, key.layer});
        if (reports != grid.ep * grid.edp)
            throw_input_error(origin,
                              "iter " + std::to_string(key.iter) + ", stage " + std::to_string(key.stage) + ", layer " +
                                  std::to_string(key.layer) + " is in " + std::to_string(reports) + " of the stage's " +
                                  std::to_string(grid.ep * grid.edp) + " rank files",
                              "pass every rank's file, with --ep-size, --etp-size and --pp-size as the run used");
    }
    if (iters.empty()) throw_input_error(origin, "no decoder records", "pass Megatron's tokens_per_expert files");
    const int experts = grid.ep * acc.local_experts;
    check_cells(origin, static_cast<int64_t>(iters.size()), static_cast<int64_t>(layers.size()), 1, experts);
    LoadSeries series;
    series.origin = origin;
    series.steps = static_cast<int>(iters.size());
    series.layers = static_cast<int>(layers.size());
    series.experts = experts;
    series.counts.assign(static_cast<size_t>(series.steps) * series.layers * experts, 0);
    for (const auto& [stage, layer] : layers)
        series.layer_names.push_back(grid.pp > 1 ? "stage " + std::to_string(stage) + " layer " + std::to_string(layer)
                                                 : "layer " + std::to_string(layer));
    int s = 0;
    for (int64_t iter : iters) {
        int l = 0;
        for (const auto& [stage, layer] : layers) {
            const auto found = acc.counts.find(LayerKey{iter, stage, layer});
            if (found == acc.counts.end())
                throw_input_error(origin, "iter " + std::to_string(iter) + " has no record of " + series.layer_names[l],
                                  "pass files that saved the same iterations");
            std::copy(found->second.begin(), found->second.end(), &series.at(s, l, 0, 0));
            ++l;
        }
        ++s;
    }
    return series;
}

}  // namespace

LoadSeries parse_megatron(const std::vector<std::string>& rank_files, int ep_size, int etp_size, int pp_size,
                          std::vector<std::string>& notes) {
    const std::string origin = rank_files.empty() ? std::string("megatron") : rank_files[0];
    const int world = static_cast<int>(rank_files.size());
    std::map<int, std::string> by_rank;
    for (const std::string& file : rank_files)
        if (!by_rank.emplace(rank_of_file(file), file).second)
            throw_input_error(file, "rank " + std::to_string(rank_of_file(file)) + " is given twice",
                              "pass each rank's file once");
    for (int r = 0; r < world; ++r)
        if (!by_rank.count(r))
            throw_input_error(
                origin, "rank" + std::to_string(r) + ".jsonl is missing among " + std::to_string(world) + " files",
                "pass every rank's file (ranks 0 .. N-1)");
    Grid grid{ep_size, etp_size, pp_size, 1};
    const int64_t model_ranks = int64_t{ep_size} * etp_size * pp_size;
    if (world % model_ranks != 0)
        throw_input_error(
            origin,
            std::to_string(world) + " rank files are not a multiple of ep x etp x pp = " + std::to_string(model_ranks),
            "set --ep-size, --etp-size and --pp-size as the run did");
    grid.edp = static_cast<int>(world / model_ranks);
    Accumulated acc;
    for (const auto& [rank, file] : by_rank)
        if (rank % grid.etp == 0) read_rank_file(file, rank, grid, acc);
    if (acc.mtp_lines > 0)
        notes.push_back(std::to_string(acc.mtp_lines) + " multi-token-prediction (\"mtp\") records left out");
    if (grid.edp > 1)
        notes.push_back("counts summed over " + std::to_string(grid.edp) + " expert-data-parallel groups");
    return to_series(acc, grid, origin);
}

}  // namespace prophet::import_detail
