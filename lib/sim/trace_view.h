// trace_view.h: the TraceView (balance/evaluate.h) over a whole recorded trace, every iteration and layer, and its
// TraceShape (balance/options.h); what `prophet plan` and the sweep engines hand the evaluator, the simulator and
// the cost model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "balance/evaluate.h"
#include "balance/options.h"
#include "core/error.h"
#include "trace/trace.h"

namespace prophet {

// Points into trace's arrays: valid while trace lives and is not resized.
inline TraceView view_of(const Trace& trace) {
    TraceView view;
    view.counts = trace.counts.data();
    view.transitions = trace.has_transitions() ? trace.transitions.data() : nullptr;
    view.num_iterations = trace.meta.num_iterations;
    view.num_layers = trace.meta.num_layers;
    view.num_devices = trace.meta.num_devices;
    view.num_experts = trace.meta.num_experts;
    return view;
}

// The view of counts laid out [num_iterations][num_layers][num_devices][num_experts] (a longer vector's first
// iterations), without transitions. Points into counts: valid while counts lives and is not resized.
inline TraceView view_of(const std::vector<int64_t>& counts, int num_iterations, int num_layers, int num_devices,
                         int num_experts) {
    const size_t needed = static_cast<size_t>(num_iterations) * num_layers * num_devices * num_experts;
    PROPHET_ASSERT_MSG(
        num_iterations > 0 && num_layers > 0 && num_devices > 0 && num_experts > 0 && counts.size() >= needed,
        "view_of: " + std::to_string(counts.size()) + " counts for I x L x D x E = " + std::to_string(needed));
    TraceView view;
    view.counts = counts.data();
    view.num_iterations = num_iterations;
    view.num_layers = num_layers;
    view.num_devices = num_devices;
    view.num_experts = num_experts;
    return view;
}

// What the cost model needs of a recorded trace (cost_model_for_trace: lib/balance does not read TraceMeta).
inline TraceShape shape_of(const TraceMeta& meta) {
    return {meta.num_devices, meta.num_experts, meta.tokens_per_iteration, meta.d_model, meta.d_ffn, meta.seq_len};
}

}  // namespace prophet
