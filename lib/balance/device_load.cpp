#include "balance/device_load.h"

#include <algorithm>
#include <cmath>

namespace prophet {

namespace {

struct MaxAndSum {
    int64_t max = 0, sum = 0;  // tokens
};

MaxAndSum max_and_sum(const int64_t* computed, int num_devices) {
    MaxAndSum out;
    for (int i = 0; i < num_devices; ++i) {
        out.max = std::max(out.max, computed[i]);
        out.sum += computed[i];
    }
    return out;
}

}  // namespace

DeviceLoad device_load(const int64_t* computed, int D) {
    DeviceLoad out;
    double mean = 0;
    for (int i = 0; i < D; ++i) mean += static_cast<double>(computed[i]);
    mean /= D;
    double var = 0;
    for (int i = 0; i < D; ++i) var += (computed[i] - mean) * (computed[i] - mean);
    out.std = std::sqrt(var / D);
    out.max_mean_load = max_mean_load(computed, D);
    out.balancedness = balancedness(computed, D);
    return out;
}

double max_mean_load(const int64_t* computed, int num_devices) {
    const MaxAndSum h = max_and_sum(computed, num_devices);
    return h.sum > 0 ? static_cast<double>(h.max) * num_devices / static_cast<double>(h.sum) : 1.0;
}

double balancedness(const int64_t* computed, int num_devices) {
    const MaxAndSum h = max_and_sum(computed, num_devices);
    return h.max > 0 ? static_cast<double>(h.sum) / num_devices / static_cast<double>(h.max) : 1.0;
}

}  // namespace prophet
