// load_series.h: expert loads read from an engine's file, before they become a prophet trace (internal to
// lib/import). Every format parser fills one LoadSeries; build_imported_trace (import_build.cpp) turns it into a
// Trace by one documented set of rules (docs/trace-format.md, section 7).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "import.h"

namespace prophet::import_detail {

// The most cells (steps x layers x devices x experts) one import holds in memory: 2^28 int64 (2 GiB), the
// synthetic generator's limit.
inline constexpr int64_t kMaxImportCells = int64_t{1} << 28;
// The largest input file read whole (JSON, CSV, JSONL); larger ones are refused (exit 4) before reading.
inline constexpr int64_t kMaxImportFileBytes = int64_t{1} << 30;
// Counts above this are refused: sums of up to 2^31 of them stay far inside int64.
inline constexpr int64_t kMaxImportCount = int64_t{1} << 40;

struct LoadSeries {
    int steps = 0;    // S: snapshots in file order (one forward pass, step or training iteration each)
    int layers = 0;   // L: MoE layers as the file numbers them (some may be dense, all zero)
    int sources = 1;  // 1 when the file has no per-device split, else the number of devices tokens came from
    int experts = 0;  // E
    std::vector<int64_t> counts;           // [S][L][sources][E] tokens routed to each expert
    std::vector<std::string> layer_names;  // [L] the file's own name of each layer, for messages ("layer 3")
    int top_k = 0;                         // from the file when it records it, else 0
    std::string origin;                    // the file named in messages about the whole series

    int64_t& at(int step, int layer, int source, int expert) {
        return counts[((static_cast<size_t>(step) * layers + layer) * sources + source) * experts + expert];
    }
    int64_t at(int step, int layer, int source, int expert) const {
        return counts[((static_cast<size_t>(step) * layers + layer) * sources + source) * experts + expert];
    }
    // the [sources][experts] cells of one step and layer
    const int64_t* cells(int step, int layer) const {
        return counts.data() + (static_cast<size_t>(step) * layers + layer) * sources * experts;
    }
};

// Throws exit 3 naming `origin` when steps x layers x sources x experts exceeds kMaxImportCells (checked before
// anything of that size is allocated).
void check_cells(const std::string& origin, int64_t steps, int64_t layers, int64_t sources, int64_t experts);

// Reads a whole text file after checking that it exists, is a regular file and holds at most kMaxImportFileBytes.
std::string read_bounded_file(const std::string& path);

// The JSON value as a count: a non-negative integer up to kMaxImportCount; otherwise exit 3 naming `path` and
// `field` (e.g. "logical_count[2][0][5]").
int64_t json_count(const nlohmann::json& value, const std::string& path, const std::string& field);

// JSON text of a whole file, parsed; exit 3 naming the file when it is not valid JSON.
nlohmann::json parse_json_file(const std::string& path);

// One parser per format (import_json.cpp, import_megatron.cpp, import_trtllm.cpp).
LoadSeries parse_sglang(const std::string& path);
LoadSeries parse_vllm(const std::string& path);
LoadSeries parse_eplb(const std::string& path);
LoadSeries parse_megatron(const std::vector<std::string>& rank_files, int ep_size, int etp_size, int pp_size,
                          std::vector<std::string>& notes);
LoadSeries parse_trtllm(const std::string& meta_info, const std::vector<std::string>& rank_files);

// The trace of a series by the rules at the top of import_build.cpp (docs/trace-format.md, section 7); what it
// left out or assumed is appended to `notes`.
Trace build_imported_trace(const LoadSeries& series, const ImportOptions& options, std::vector<std::string>& notes);

}  // namespace prophet::import_detail
