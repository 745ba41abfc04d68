// generator_params.h (internal to lib/trace): a generator TOML's [trace] table read into plain values and checked
// against the generator's limits; trace_generate.cpp draws the trace from them.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"

namespace prophet::trace_gen {

enum class Generator { kUniform, kZipf, kDevicePreference, kDrift, kShift };

struct Params {
    Generator generator = Generator::kZipf;
    std::string generator_name;
    uint64_t seed = 0;
    int num_experts = 0;  // E
    int num_devices = 0;  // D
    int top_k = 1;        // K
    int64_t tokens_per_iteration = 0;
    int num_iterations = 0;  // I
    int num_layers = 0;      // L
    double zipf_s = 1.2;
    double preference_strength = 0.0;
    double drift_rate = 0.0;
    int shift_period = 1;
    bool record_transitions = true;
    double layer_affinity = 0.0;
    bool random_affinity = false;  // trace.affinity_mapping = "random": rank r -> a random rank at layer l+1
    bool count_sampling = false;   // trace.sampling = "counts": each (iteration, layer, device) row at once
    int d_model = 0;
    int d_ffn = 0;
    int seq_len = 0;
};

// The [trace] table of a Config built on trace_generator_schema(), with the rules between keys (top_k within the
// experts, tokens divisible by devices, count sampling's conditions) and the size and work caps checked; errors name
// `origin`.
Params read_params(const Config& config, const std::string& origin);

}  // namespace prophet::trace_gen
