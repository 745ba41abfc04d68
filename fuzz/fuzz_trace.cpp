// fuzz_trace.cpp: libFuzzer target for the trace readers: the input bytes as a file read by
// prophet::load_trace (dispatch by content: binary, CSV or generator TOML), read_trace_file and read_trace_csv.
// Every malformed input must end in a prophet::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "fuzz_file.h"
#include "trace/generator_params.h"
#include "trace/trace.h"

namespace {

// The generator builds what a valid TOML asks for, up to its own limits (2^28 counts and transitions, 2^32 expert
// draws: lib/trace/generator_params.cpp), which under ASan is seconds of work and gigabytes: valid work, not a
// finding, but past -timeout and -rss_limit_mb (a 130-byte TOML asking for 1.7 GB of counts was reported as
// out-of-memory, 2026-12-08). So a generator TOML whose trace would hold more than kMaxCells cells or take more
// than kMaxDraws draws is only read and checked (read_params applies every rule and limit), not generated.
constexpr double kMaxCells = 0x1p22;  // 32 MiB of int64
constexpr double kMaxDraws = 0x1p24;

bool too_large_to_generate(const uint8_t* data, size_t size) {
    try {
        prophet::Config config(prophet::trace_generator_schema(), "fuzz");
        config.merge_toml_string(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
        const prophet::trace_gen::Params p = prophet::trace_gen::read_params(config, "fuzz");
        const double E = p.num_experts, layers = static_cast<double>(p.num_iterations) * p.num_layers;
        const double cells = layers * p.num_devices * E + (p.record_transitions ? layers * E * E : 0.0);
        const double draws = p.count_sampling ? 0.0 : layers * static_cast<double>(p.tokens_per_iteration) * p.top_k;
        return cells > kMaxCells || draws > kMaxDraws;
    } catch (const prophet::Error&) {
        return false;  // not a valid generator TOML (or not TOML at all): the readers below must say so
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (too_large_to_generate(data, size)) return 0;
    static fuzz::InputFile file;
    const std::string& path = file.write(data, size);
    try {
        prophet::Trace t = prophet::load_trace(path);
        (void)prophet::consecutive_js_divergence(t);
    } catch (const prophet::Error&) {
    }
    try {
        (void)prophet::read_trace_file(path);
    } catch (const prophet::Error&) {
    }
    try {
        (void)prophet::read_trace_csv(path);
    } catch (const prophet::Error&) {
    }
    return 0;
}
