// trace_routing.h: recorded routing in real runs (routing.source = "trace", docs/testbed.md "Recorded routing").
//
// Like FastMoE's FileGate, the gate's top-k choices are replaced, after the gate has run, by assignments drawn to
// match a routing trace's per-device, per-expert counts: at step s, layer l, rank r routes its N tokens x K choices
// as trace iteration s mod I, layer l, device(s) of r prescribe, scaled to N x K. The losses are then not a model's
// (the experts see tokens the gate did not choose), but the system's time under the trace's imbalance is.
//
// Devices: with D ranks and a trace of D_t devices, rank r takes the sum of trace devices d with d mod D == r when
// D_t >= D, and trace device r mod D_t when D_t < D.
// Scaling: the rank's row c [E] (sum S) becomes q [E] with sum N x K: floor(c_e N K / S), the rest by largest
// remainder (ties: lower e); then each q_e is capped at N (a token takes an expert once), the excess going to the
// experts with room in order of their trace count (ties: lower e). S = 0: uniform.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace prophet {

// The assignment counts [E] rank `rank` of `ranks` routes at (iteration, layer): sum N * K, each <= N.
std::vector<int64_t> trace_rank_counts(const Trace& trace, int iteration, int layer, int rank, int ranks, int N, int K);

// expert_idx [N,K] (overwrite) holding expert e exactly counts[e] times and no expert twice for one token.
// counts: [E], sum N * K, each in [0, N].
void assign_from_counts(const std::vector<int64_t>& counts, int N, int K, int* expert_idx);

// One rank's router over a trace (read and checked against the model at construction).
class TraceRouter {
  public:
    // Throws prophet::Error (exit 3) naming routing.trace when the trace's experts or layers differ from the model's.
    TraceRouter(Trace trace, int num_layers, int num_experts, int rank, int ranks);
    // Overwrites expert_idx [N,K] for `step`, `layer` (trace iteration step mod I).
    void route(int64_t step, int layer, int N, int K, int* expert_idx) const;

  private:
    Trace trace_;
    int rank_, ranks_;
};

}  // namespace prophet
