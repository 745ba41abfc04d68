// serve_sim.h: the serving run of a real run's routing on simulated nodes (docs/serving.md, "Simulated nodes").
//
// The routing a real inference run recorded (the profile of data A and the counts of every measured batch) is
// scaled by token_scale (a serving batch of a large model routes far more tokens than the CPU model's), the
// policy plans again with the simulated cluster's cost model (MoETuner's ILP 2 sees that cluster's links), and
// lib/sim/inference.h times every layer on every device. The result has the shape of a real ServeRun, so the
// same statistics and records apply; forward_ms is the MoE part only: the sum over layers of the slowest
// device's expert + all-to-all + Trans time. Trans is charged only for replicas that were not resident in the
// previous batch; offline placements (EPLB's replicas) are deployed before the first batch.
#pragma once

#include <string>

#include "balance/cost_model.h"
#include "balance/policies.h"
#include "serve/serve_loop.h"

namespace prophet::serve {

ServeRun simulate_serving(const ServeRun& real, const std::string& policy, const CostModel& cost,
                          const BalanceOptions& options, int num_nodes, double token_scale);

// The cost model of a simulated cluster file for a run on D devices with model dims C, F (bytes per element b,
// tokens per device before top-k); throws prophet::Error (exit 3) naming serve.sim_clusters when the file's
// num_devices is not D.
CostModel simulated_cost_model(const std::string& cluster_path, int num_devices, int d_model, int d_ffn,
                               int bytes_per_elem, int64_t tokens_per_device);

}  // namespace prophet::serve
