// serve_loop.h: the inference run of `prophet profile --inference` (docs/serving.md):
//   1. profile   serve.profile_iterations batches of data A (steps 0..P-1), static placement: routing counts and
//                layer-to-layer transitions (RoutingProfile)
//   2. plan      the policy's placements (ServingPlanner; offline policies solve here, once)
//   3. warmup    serve.warmup batches under the policy, not measured
//   4. measure   serve.iterations batches under the policy: data A after the profiled batches (in-sample) or
//                data B from step 0 (out-of-sample)
// Every rank runs it (collective); results are identical on every rank.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "serve/inference.h"
#include "serve/serve_config.h"
#include "serve/serving_planner.h"

namespace prophet::serve {

struct ServeRun {
    RoutingProfile profile;
    std::vector<BatchResult> measured;   // [serve.iterations]
    double offline_plan_s = 0;           // wall time of the offline planning (0 for online policies)
    IlpReport ilp;                       // moetuner / moetuner-joint
    std::vector<Placement> offline;      // [L] offline policies' placements (empty for online ones)
    std::string token_path = "home";     // how tokens moved between layers (balance/token_path.h); the CPU ranks
                                         // always combine at home, a simulated replay may go layer to layer
};

// phase: "profile" | "warmup" | "measure"; index counts batches within the phase
using BatchCallback = std::function<void(const std::string& phase, int index, const BatchResult& batch)>;

// Loads the parameters of a prophet train checkpoint (a checkpoint directory or one step directory) into model;
// the shapes must match the model config (exit 3 naming the tensor otherwise).
void load_parameters(Model<float>& model, const std::string& checkpoint);

ServeRun run_serving(Communicator& comm, const ServeSettings& settings, const BatchCallback& on_batch = nullptr);

}  // namespace prophet::serve
