// fuzz_cluster.cpp: libFuzzer target for cluster files (experiments/clusters/*.toml): the input bytes as a cluster
// TOML read by prophet::load_cluster_file, then what every reader of a cluster does with it: the bandwidth of
// each message size and device pair, and a round trip through cluster_to_toml (prophet profile --calibrate's
// writer) that must load again to the same numbers. Every malformed input must end in a prophet::Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "balance/cluster.h"
#include "core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::InputFile file;
    prophet::ClusterSpec cluster;
    try {
        cluster = prophet::load_cluster_file(file.write(data, size));
    } catch (const prophet::Error&) {
        return 0;
    }
    // a loaded cluster is usable: positive finite bandwidths for every message size and pair
    for (const double bytes : {0.0, 1.0, 4096.0, 1e6, 1e12}) {
        const double bw = cluster.a2a_bytes_per_s(bytes);
        if (!(bw > 0) || !std::isfinite(bw)) std::abort();
    }
    const int d = cluster.num_devices;
    for (const int a : {0, d / 2, d - 1})
        for (const int b : {0, d / 2, d - 1}) {
            const double bw = cluster.link_bytes_per_s(a, b);
            if (a != b && (!(bw > 0) || std::isnan(bw))) std::abort();
        }
    // what prophet writes, prophet reads back
    const std::string text = prophet::cluster_to_toml(cluster);
    static fuzz::InputFile again;
    try {
        const prophet::ClusterSpec back = prophet::load_cluster_file(
            again.write(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
        if (back.num_devices != cluster.num_devices || back.a2a_bandwidth.size() != cluster.a2a_bandwidth.size())
            std::abort();
    } catch (const prophet::Error&) {
        std::abort();  // cluster_to_toml wrote a file its own reader refuses
    }
    return 0;
}
