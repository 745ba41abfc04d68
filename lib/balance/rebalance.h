// rebalance.h: serving-regime periodic rebalancing as inference engines run it (vLLM's and SGLang's EPLB).
//
// In serving, weights are static between rebalances: a placement costs no Trans or Agg per iteration (nothing is
// re-sent, no gradient is reduced); a rebalance sends each newly held (expert, device) copy's weights once, a stall
// at the rebalance, shown as such and amortised over the iterations served. Protocol (docs/serving.md,
// "Periodic rebalancing"): iterations [0, every) run the static layout (nothing recorded yet); at t = k x every the
// policy plans on the `window` iterations before t ([max(0, t - window), t)) and its placement serves
// [t, t + every). Per rebalance: balancedness (mean / max device load, per layer, averaged over layers) predicted on
// the planning window and realised on the iterations served, the weights moved and the stall.
#pragma once

#include <string>
#include <vector>

#include "balance/evaluate.h"

namespace prophet {

// vLLM's EPLB defaults (vllm/config: EPLBConfig window_size = 1000, step_interval = 3000).
struct RebalanceSettings {
    int rebalance_every = 3000;  // iterations between rebalances
    int window = 1000;           // iterations of history a rebalance plans on
};

struct RebalanceRecord {
    int at_iteration = 0;                  // first iteration the new placement serves
    int window_begin = 0, window_end = 0;  // iterations planned on, [begin, end)
    int served_end = 0;                    // it serves [at_iteration, served_end)
    double predicted_balancedness = 0;     // on the planning window's summed loads, mean over layers (1 = balanced)
    double realised_balancedness = 0;      // on the served iterations' summed loads
    int copies_moved = 0;                  // (expert, device) copies newly held, over every layer
    double bytes_moved = 0;                // their weights (expert_bytes each)
    double stall_s = 0;                    // sending them, every layer's copies at once (moves.h pricing)
};

struct ServingScore {
    std::string name;
    std::vector<RebalanceRecord> rebalances;
    double mean_layer_ms = 0;      // forward MoE time per layer (2 T_A2A + T_FEC, no Trans/Agg), mean over I x L
    double stall_ms = 0;           // every rebalance's stall together
    double amortised_ms = 0;       // stall_ms / (I x L): per layer and iteration, comparable with mean_layer_ms
    double mean_balancedness = 0;  // realised, mean over I x L (per iteration and layer)
};

// Runs `policy` under the serving regime over the whole trace. The policy plans through evaluate_policy on each
// planning window (offline policies plan once on it; online ones: their placement for the window's last
// iteration). Throws prophet::Error for an unknown policy or settings out of range (both >= 1).
ServingScore evaluate_serving(const std::string& policy, const TraceView& trace, const CostModel& cost,
                              const EvalSettings& settings, const RebalanceSettings& rebalance);

}  // namespace prophet
