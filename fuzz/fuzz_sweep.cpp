// fuzz_sweep.cpp: libFuzzer target for sweep files (experiments/sweeps/*.toml): the input bytes as a sweep file
// read by prophet::sweep::parse_sweep_string (paths resolved from the repository root, so a seed may name the shipped
// cluster and trace files), then expanded into points (expand_points validates every point's config). Only the
// library's public entry points are called: lib/sweep is free to move code between its files. Every malformed
// input must end in a prophet::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "sweep/sweep.h"

#ifndef PROPHET_SOURCE_DIR
#define PROPHET_SOURCE_DIR "."
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const prophet::sweep::SweepSpec spec = prophet::sweep::parse_sweep_string(text, "fuzz-sweep.toml", PROPHET_SOURCE_DIR);
        (void)prophet::sweep::expand_points(spec);
    } catch (const prophet::Error&) {
    }
    return 0;
}
