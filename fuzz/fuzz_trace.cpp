// fuzz_trace.cpp: libFuzzer target for the trace readers: the input bytes as a file read by
// prophet::load_trace (dispatch by content: binary, CSV or generator TOML), read_trace_file and read_trace_csv.
// Every malformed input must end in a prophet::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_file.h"
#include "trace/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
