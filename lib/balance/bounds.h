// bounds.h: a proven lower bound on one MoE layer's time, over every placement and routing the run's budget
// allows, under each system model `prophet plan` reports (docs/bounds.md gives the proofs).
//
// Inputs: one layer's counts[d*E + e] (tokens device d routes to expert e), the cost model, and the budget
// (balance.max_replicas_per_device). A placement's *receivers* n = its replicas (placement.h; an owner away from
// its static home moves once and pays no per-iteration Trans/Agg: cost_model.h) decide every term it can improve:
//   compute   max_i H_i >= max(ceil(total / D), max_e ceil(w_e / h_e)) with sum_e (h_e - 1) <= min(n, D * cap),
//             h_e <= D (each holder computes at most max_i H_i of e's w_e tokens); the best h for a given number
//             of extra holders is the greedy that always adds one to the expert of largest w_e / h_e.
//   a2a       a device keeps local only the tokens of experts it holds: it holds its home experts plus at most
//             k = n + E other (device, expert) pairs (replicas plus up to E moved owners), so at least
//             S(k) = total - home tokens - the k largest non-home counts leave their device; Eq 1's busiest
//             receiver gets >= ceil(S / D) of them, the topology's devices drain them at most at the sum of their
//             ingress capacities.
//   transfer  n >= 1 receivers move >= n experts (flat Eqs 4-5: >= n + ceil(n / (D - 1)) counted with the sender),
//             at least one expert over the cheapest path (topology), n over all devices' ingress.
// Each model's time is nondecreasing in every term (Eq 8's credit and FasterMoE's overlap subtract at most what a
// larger term adds), so each model evaluated at the terms' bounds for a given n bounds every placement with n
// receivers; the layer's bound is the minimum over n (n = 0: owners anywhere, no replica, no transfer).
// The layer_to_layer token path (token_path.h) moves tokens home only into layer 0 and out of layer L-1; its bound
// keeps half the home bound's all-to-all there (a2a = (in + out) / 2) and none between layers.
// The simulator's column (no gate, planning or dense time, as `prophet plan` runs it) is the least over its
// schedules: none is Eq 6, fastermoe fastermoe_s, blockwise exposes Trans(0)/Agg(0) whole and what of Trans(l)/Agg(l)
// layer l-1's FEC and FNEC/BNEC cannot hide (a bound on the layers' sum: docs/bounds.md "The Sim column").
#pragma once

#include <cstdint>
#include <vector>

#include "balance/cost_model.h"
#include "balance/evaluate.h"

namespace prophet {

struct BoundBudget {
    int max_replicas_per_device = 0;  // 0: no cap (balance.max_replicas_per_device)
    // true where the simulated iteration has compute beside the MoE ops (gate, measured planning time, dense ops:
    // the sweeps' simulator) that may hide a transfer: the Sim column then keeps no transfer term (4 A2A + 3 FEC).
    bool sim_transfers_may_hide = false;
    // the Sim column's block-wise split moves whole experts (sim.split_rule "time", as `prophet plan` runs it);
    // false: bytes ("fluid"), whose exposed parts the bound then takes from the whole transfer only
    bool sim_whole_experts = true;
};

// Lower bounds, seconds per MoE layer, each the minimum over placements of that model's time.
struct LayerBound {
    double eq6_s = 0, eq8_s = 0, fastermoe_s = 0, sim_s = 0;   // home token path
    double eq6_l2l_s = 0, eq8_l2l_s = 0, fastermoe_l2l_s = 0;  // layer_to_layer token path
    // components, for the report: with the whole budget (as many receivers as help) and with none
    double compute_tokens = 0;  // bound on max_i H_i with the whole budget (tokens)
    double a2a_s = 0;           // bound on one home-path all-to-all with the whole budget
    double one_transfer_s = 0;  // bound on Trans for a single receiver (what any replica costs)
    int64_t eq6_receivers = 0;  // the receivers n at which the Eq 6 bound is reached (0: static)
    // The Sim column's per-layer pieces (docs/bounds.md "The Sim column"). A layer's FEC hides layer l+1's
    // Trans/Agg under the blockwise schedule; split at a level hide_s[k]: this layer is charged 3 min(FEC, hide_s[k])
    // and layer l+1 is credited with Trans/Agg exposed beyond hide_s[k] (+ FNEC, BNEC). sim_parts_s[j][k]: the
    // piece with layer l-1's level j and this layer's level k; level kSimLevels-1 is "no split" (no credit, no
    // charge), so sim_parts_s[last][last] bounds this layer alone under the blockwise schedule (sim_s from
    // layer_bound: the least of it, sim_none_s and sim_fastermoe_s). trace_bounds picks one level per layer so that
    // the pieces' sum bounds the layers' sum.
    static constexpr int kSimLevels = 5;
    double hide_s[kSimLevels] = {};
    double sim_parts_s[kSimLevels][kSimLevels] = {};
    // The pairwise Sim pieces (docs/bounds.md "Pairs of layers"): fec_level_s, a grid of this layer's FEC from its
    // floor up; a placement's class is the largest level at most its FEC bound. sim_pairs_s[j][k]: the least piece
    // over placements of class k, charged 3 x layer l-1's level j (a bound on layer l-1's FEC, unknown: 0) and the
    // transfers that level leaves exposed (layer 0: Trans and Agg whole; layer L-1 also its own 3 FEC).
    // trace_bounds takes the least sum over classes by dynamic programming and keeps the larger of the two sums.
    static constexpr int kFecLevels = 12;
    double fec_level_s[kFecLevels] = {};
    double sim_pairs_s[kFecLevels][kFecLevels] = {};
    // The Sim column under the other two schedules: none runs Eq 6, fastermoe fastermoe_s (under the simulator's
    // transfer count). A run simulates every layer under one schedule, so an iteration's Sim sum is at least the
    // least of its blockwise pieces' sum and these two sums (trace_bounds).
    double sim_none_s = 0, sim_fastermoe_s = 0;
};

// counts [D*E]; `model` must be the layer's (model_for_layer: first_block for layer 0). layer in [0, num_layers).
// prev_hide_s: layer l-1's hide_s (nullptr when unknown: no credit); prev_fec_level_s: layer l-1's fec_level_s
// (nullptr when unknown: levels 0).
LayerBound layer_bound(const CostModel& model, const int64_t* counts, int num_devices, int num_experts,
                       const BoundBudget& budget, int layer, int num_layers, const double* prev_hide_s = nullptr,
                       const double* prev_fec_level_s = nullptr);

// Every (iteration, layer) of a trace, each layer under model_for_layer(cost, l).
struct TraceBounds {
    std::vector<LayerBound> layers;  // [I*L] iteration-major
    LayerBound mean;                 // each field's mean over layers (eq6_receivers: the rounded mean)
    double median_us = 0;            // time to bound one layer (median), microseconds
};
TraceBounds trace_bounds(const TraceView& trace, const CostModel& cost, const BoundBudget& budget);

// gap = predicted / bound - 1 (0 when the bound is 0: nothing to move or compute)
inline double gap_to_bound(double predicted, double bound) { return bound > 0 ? predicted / bound - 1.0 : 0.0; }

}  // namespace prophet
