// import.cpp: `prophet trace import --format F`: checks the options, finds the files of a directory and hands them
// to the format's parser, then builds the trace (import_build.cpp).
#include "import.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "load_series.h"

namespace prophet {
namespace {

namespace fs = std::filesystem;
using namespace import_detail;

[[noreturn]] void usage(const std::string& text) { throw Error(kExitUsage, "usage error: " + text); }

void check_range(const char* option, int64_t value, int64_t low, int64_t high) {
    if (value < low || value > high)
        throw_config_error(option, std::to_string(value),
                           "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "]",
                           "see prophet trace --help");
}

void check_options(const ImportOptions& o) {
    const auto& formats = import_formats();
    if (std::find(formats.begin(), formats.end(), o.format) == formats.end())
        usage("--format " + o.format + " is not an engine format (sglang, vllm, megatron, trtllm, eplb)");
    if (o.files.empty()) usage("prophet trace import --format " + o.format + " needs the engine's file(s)");
    const bool single_file = o.format == "sglang" || o.format == "vllm" || o.format == "eplb";
    if (single_file && o.files.size() != 1)
        usage("--format " + o.format + " reads one file, got " + std::to_string(o.files.size()));
    if (o.format != "megatron" && (o.ep_size != 0 || o.etp_size != 1 || o.pp_size != 1))
        usage("--ep-size, --etp-size and --pp-size describe Megatron's rank files: only with --format megatron");
    if (o.format == "megatron" && o.ep_size == 0)
        usage("--format megatron needs --ep-size N (the run's --expert-model-parallel-size)");
    if (o.devices != 0) check_range("--devices", o.devices, 1, 65536);
    if (o.top_k != 0) check_range("--top-k", o.top_k, 1, 65536);
    if (o.rescale_tokens != 0) check_range("--rescale-tokens", o.rescale_tokens, 1, int64_t{1} << 40);
    if (o.format == "megatron") {
        check_range("--ep-size", o.ep_size, 1, 65536);
        check_range("--etp-size", o.etp_size, 1, 1024);
        check_range("--pp-size", o.pp_size, 1, 1024);
    }
}

// The files of `dir` whose names satisfy `keep`, sorted by name.
std::vector<std::string> files_in(const std::string& dir, bool (*keep)(const std::string&)) {
    std::vector<std::string> found;
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error))
        if (entry.is_regular_file() && keep(entry.path().filename().string())) found.push_back(entry.path().string());
    if (error) throw_input_error(dir, "cannot list the directory: " + error.message(), "check the path");
    std::sort(found.begin(), found.end());
    return found;
}

bool is_rank_name(const std::string& name, const std::string& suffix) {
    if (!name.starts_with("rank") || !name.ends_with(suffix) || name.size() <= 4 + suffix.size()) return false;
    const std::string digits = name.substr(4, name.size() - 4 - suffix.size());
    return digits.find_first_not_of("0123456789") == std::string::npos;
}

LoadSeries parse_directory_format(const ImportOptions& o, std::vector<std::string>& notes) {
    std::vector<std::string> files = o.files;
    const bool directory = files.size() == 1 && fs::is_directory(files[0]);
    if (o.format == "megatron") {
        if (directory) files = files_in(o.files[0], [](const std::string& n) { return is_rank_name(n, ".jsonl"); });
        if (files.empty())
            throw_input_error(o.files[0], "no rank<R>.jsonl files", "pass Megatron's tokens_per_expert directory");
        return parse_megatron(files, o.ep_size, o.etp_size, o.pp_size, notes);
    }
    std::string meta_info;
    std::vector<std::string> ranks;
    if (directory) {
        meta_info = (fs::path(o.files[0]) / "meta_info.json").string();
        ranks = files_in(o.files[0], [](const std::string& n) { return is_rank_name(n, ".safetensors"); });
    } else {
        for (const std::string& file : files)
            (fs::path(file).filename() == "meta_info.json" ? meta_info : ranks.emplace_back()) = file;
        if (meta_info.empty())
            usage("--format trtllm needs meta_info.json among the files (or the EXPERT_STATISTIC_PATH directory)");
    }
    return parse_trtllm(meta_info, ranks);
}

}  // namespace

const std::vector<std::string>& import_formats() {
    static const std::vector<std::string> formats = {"sglang", "vllm", "megatron", "trtllm", "eplb"};
    return formats;
}

ImportResult import_engine_trace(const ImportOptions& options) {
    check_options(options);
    ImportResult result;
    LoadSeries series;
    if (options.format == "sglang")
        series = parse_sglang(options.files[0]);
    else if (options.format == "vllm")
        series = parse_vllm(options.files[0]);
    else if (options.format == "eplb")
        series = parse_eplb(options.files[0]);
    else
        series = parse_directory_format(options, result.notes);
    result.trace = build_imported_trace(series, options, result.notes);
    return result;
}

}  // namespace prophet
