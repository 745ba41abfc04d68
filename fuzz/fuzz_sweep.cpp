// fuzz_sweep.cpp: libFuzzer target for sweep files (experiments/sweeps/*.toml): the input bytes as a sweep file
// read by prophet::sweep::parse_sweep_string (paths resolved from the repository root, so a seed may name the shipped
// cluster and trace files), then expanded into points (expand_points validates every point's config). Only the
// library's public entry points are called: lib/sweep is free to move code between its files. Every malformed
// input must end in a prophet::Error. A sweep that parses also gets its Slurm batch script written
// (parse_slurm_spec, make_batch_job), which must hold no line the name or a path injected.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_file.h"
#include "sweep/launch_slurm.h"
#include "sweep/sweep.h"

#ifndef PROPHET_SOURCE_DIR
#define PROPHET_SOURCE_DIR "."
#endif

namespace {

// The Slurm batch script of the sweep (lib/sweep/launch_slurm.h): whatever the name and [sweep.slurm] hold, the
// script has exactly its 5 command lines (set, POINTS, points, shard, exec); every other line is a comment or an
// #SBATCH directive. A sixth command line is an injection (issue 26 item 1): abort, so libFuzzer reports it.
void check_batch_script(const uint8_t* data, size_t size, const prophet::sweep::SweepSpec& spec,
                        const std::vector<prophet::sweep::SweepPoint>& points) {
    static fuzz::InputFile file;
    const prophet::sweep::SlurmSpec slurm = prophet::sweep::parse_slurm_spec(file.write(data, size));
    std::vector<int> all;
    for (size_t i = 0; i < points.size() && i < 64; ++i) all.push_back(static_cast<int>(i) + 1);
    if (all.empty()) return;
    const std::string script =
        prophet::sweep::make_batch_job(spec, slurm, points, all, "/s/sweep.toml", "/p/prophet", "/w", "/shards").script;
    std::istringstream in(script);
    int commands = 0;
    for (std::string line; std::getline(in, line);) commands += !line.empty() && line[0] != '#';
    if (commands != 5) {
        std::fprintf(stderr, "fuzz_sweep: the batch script has %d command lines, not 5:\n%s", commands, script.c_str());
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const prophet::sweep::SweepSpec spec = prophet::sweep::parse_sweep_string(text, "fuzz-sweep.toml", PROPHET_SOURCE_DIR);
        const std::vector<prophet::sweep::SweepPoint> points = prophet::sweep::expand_points(spec);
        check_batch_script(data, size, spec, points);
    } catch (const prophet::Error&) {
    }
    return 0;
}
