// device_load.h: how evenly one MoE layer's expert work is spread over the devices.
//
// From H_i (tokens computed on device i, LayerFlow::computed):
//   max_mean_load max_i H_i / mean_i H_i         (1 = perfect; the suite's imbalance figure)
//   balancedness  mean_i H_i / max_i H_i         (vLLM's and SGLang's EPLB metric, in (0, 1], 1 = perfect)
//   std           population std of H_i, tokens  (Pro-Prophet's balance degree)
// A layer with no tokens is perfectly balanced (1, 1, 0).
#pragma once

#include <cstdint>

namespace prophet {

struct DeviceLoad {
    double max_mean_load = 1.0;
    double balancedness = 1.0;
    double std = 0.0;
};

DeviceLoad device_load(const int64_t* computed, int num_devices);

// max_i H_i / mean_i H_i of one layer, as max_i H_i * D / sum_i H_i (one rounding), 1 for a layer with no tokens:
// the suite's one max/mean rule. Evaluation (DeviceLoad::max_mean_load), the simulator, the trainer and serving all
// take it, so their figures agree exactly (tests/train/test_max_mean_load_paths.cpp).
double max_mean_load(const int64_t* computed, int num_devices);

// mean_i H_i / max_i H_i of one layer, as (sum_i H_i / D) / max_i H_i, 1 for a layer with no tokens: the one
// balancedness rule (DeviceLoad::balancedness, serving's rebalance records).
double balancedness(const int64_t* computed, int num_devices);

}  // namespace prophet
