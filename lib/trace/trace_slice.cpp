// trace_slice.cpp: a trace's leading iterations and layers (trace.h leading_slice).
#include <algorithm>
#include <string>

#include "core/error.h"
#include "trace/trace.h"

namespace prophet {
namespace {

void check_slice_count(const std::string& field, int value, int available, const char* what) {
    if (value >= 1 && value <= available) return;
    throw_config_error(field, std::to_string(value),
                       std::string("must be between 1 and the trace's ") + std::to_string(available) + " " + what,
                       "give at most " + std::to_string(available));
}

}  // namespace

Trace leading_slice(const Trace& trace, int iterations, int layers, const std::string& field_iterations,
                    const std::string& field_layers) {
    const TraceMeta& m = trace.meta;
    check_slice_count(field_iterations, iterations, m.num_iterations, "iterations");
    check_slice_count(field_layers, layers, m.num_layers, "layers");
    Trace out;
    out.meta = m;
    out.meta.num_iterations = iterations;
    out.meta.num_layers = layers;
    const size_t cells = static_cast<size_t>(m.num_devices) * m.num_experts;  // [D*E] per (iteration, layer)
    const size_t pairs = static_cast<size_t>(m.num_experts) * m.num_experts;  // [E*E] per (iteration, layer gap)
    for (int it = 0; it < iterations; ++it) {
        const int64_t* first = trace.layer_counts(it, 0);
        out.counts.insert(out.counts.end(), first, first + layers * cells);
        if (!trace.has_transitions()) continue;
        const int64_t* gaps = trace.transitions.data() + static_cast<size_t>(it) * (m.num_layers - 1) * pairs;
        out.transitions.insert(out.transitions.end(), gaps, gaps + static_cast<size_t>(layers - 1) * pairs);
    }
    return out;
}

}  // namespace prophet
