// trace_view.h: the TraceView (balance/evaluate.h) over a whole recorded trace, every iteration and layer; what
// `prophet plan` and the sweep engines hand the evaluator and the simulator.
#pragma once

#include "balance/evaluate.h"
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

}  // namespace prophet
