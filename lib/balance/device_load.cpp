#include "balance/device_load.h"

#include <algorithm>
#include <cmath>

namespace prophet {

DeviceLoad device_load(const int64_t* computed, int D) {
    DeviceLoad out;
    double mean = 0;
    int64_t h_max = 0;
    for (int i = 0; i < D; ++i) {
        mean += static_cast<double>(computed[i]);
        h_max = std::max(h_max, computed[i]);
    }
    mean /= D;
    double var = 0;
    for (int i = 0; i < D; ++i) var += (computed[i] - mean) * (computed[i] - mean);
    out.std = std::sqrt(var / D);
    if (mean > 0) {
        out.max_mean = static_cast<double>(h_max) / mean;
        out.balancedness = mean / static_cast<double>(h_max);
    }
    return out;
}

double max_mean_load(const int64_t* computed, int num_devices) {
    int64_t h_max = 0, h_sum = 0;
    for (int i = 0; i < num_devices; ++i) {
        h_max = std::max(h_max, computed[i]);
        h_sum += computed[i];
    }
    return h_sum > 0 ? static_cast<double>(h_max) * num_devices / static_cast<double>(h_sum) : 1.0;
}

}  // namespace prophet
