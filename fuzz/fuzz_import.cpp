// fuzz_import.cpp: libFuzzer target for the engines' expert-load readers (`prophet trace import --format F`,
// lib/import): SGLang's and vLLM's JSON, DeepSeek EPLB's weight matrix (CSV or JSON), Megatron-LM's rank<R>.jsonl
// and TensorRT-LLM's meta_info.json + rank<R>.safetensors, each read and built into a trace by
// import_engine_trace. These files come from other programs and other machines: every malformed input must end in
// a prophet::Error. The input is a header line naming the format and the options, then the files split at
// fuzz::kFileSeparator (fuzz_file.h):
//   <format> [devices [top_k [rescale_tokens [ep_size [etp_size [pp_size]]]]]] "\n" <file 0> [sep <file 1> ...]
// format: sglang, vllm, eplb (one file), megatron (file i is rank<i>.jsonl) or trtllm (file 0 is meta_info.json,
// file i >= 1 is rank<i-1>.safetensors). The numbers are clamped to small ranges so that an input's size, not its
// header, decides how much the reader may allocate; a header the target cannot read is skipped. A successful
// import must hold a trace validate_trace accepts.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_file.h"
#include "import/import.h"
#include "trace/trace.h"

namespace fs = std::filesystem;

namespace {

constexpr size_t kMostFiles = 8;

// the header's options, clamped (a negative or huge number becomes its range's end: the readers' own range checks
// are exercised by the unit tests, the files' contents here)
bool read_header(std::string_view line, prophet::ImportOptions& o) {
    std::istringstream in{std::string(line)};
    if (!(in >> o.format)) return false;
    int64_t v[6] = {0, 0, 0, 0, 1, 1};
    for (int64_t& value : v)
        if (!(in >> value)) break;
    o.devices = static_cast<int>(std::clamp<int64_t>(v[0], 0, 64));
    o.top_k = static_cast<int>(std::clamp<int64_t>(v[1], 0, 16));
    o.rescale_tokens = std::clamp<int64_t>(v[2], 0, int64_t{1} << 16);
    if (o.format == "megatron") {
        o.ep_size = static_cast<int>(std::clamp<int64_t>(v[3], 1, 8));
        o.etp_size = static_cast<int>(std::clamp<int64_t>(v[4], 1, 2));
        o.pp_size = static_cast<int>(std::clamp<int64_t>(v[5], 1, 4));
    }
    return true;
}

// writes the parts under the names the format reads; returns the paths to pass
std::vector<std::string> write_files(const fuzz::ScratchDir& dir, const std::string& format,
                                     const std::vector<std::string_view>& parts) {
    std::vector<std::string> files;
    for (size_t i = 0; i < parts.size(); ++i) {
        std::string name = "load.json";
        if (format == "eplb") name = "weight";
        if (format == "megatron") name = "rank" + std::to_string(i) + ".jsonl";
        if (format == "trtllm") name = i == 0 ? "meta_info.json" : "rank" + std::to_string(i - 1) + ".safetensors";
        const fs::path path = dir.path() / name;
        fuzz::put(path, parts[i]);
        files.push_back(path.string());
        if (format == "sglang" || format == "vllm" || format == "eplb") break;  // one file
    }
    return files;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const fuzz::ScratchDir dir("prophet-fuzz-import");
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t newline = input.find('\n');
    if (newline == std::string_view::npos) return 0;
    prophet::ImportOptions options;
    if (!read_header(input.substr(0, newline), options)) return 0;
    const auto& formats = prophet::import_formats();
    if (std::find(formats.begin(), formats.end(), options.format) == formats.end()) return 0;
    dir.clear();
    options.files = write_files(dir, options.format, fuzz::split_files(input.substr(newline + 1), kMostFiles));
    prophet::ImportResult result;
    try {
        result = prophet::import_engine_trace(options);
    } catch (const prophet::Error&) {
        return 0;
    }
    // an import that succeeded promises a valid trace: an Error from here on escapes, and is a finding
    prophet::validate_trace(result.trace, "fuzz_import");
    (void)prophet::consecutive_js_divergence(result.trace);
    return 0;
}
