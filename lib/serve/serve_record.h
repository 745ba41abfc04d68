// serve_record.h: what an inference run writes into the store (docs/serving.md, "What is recorded"), and the
// tail summaries it prints. Rank 0 only; one transaction per call.
//
// metrics (step = measured batch 0..N-1 unless noted; layer/rank -1 = not per layer / reduced over ranks):
//   forward_ms                 wall time of the batch's forward, max over ranks
//   loss                       mean cross-entropy of the batch
//   max_mean_load              max/mean rows computed per rank, mean over layers
//   expert_ms, a2a_ms          per layer and rank (layer = l, rank = d)
//   expert_max_ms, a2a_max_ms, layer_max_ms
//                              per layer (layer = l): the max over ranks; layer -1: summed over layers
//   tail.<kind>.<stat>         step 0: kind in expert, a2a, layer, forward; stat in p50, p95, p99, mean_of_max,
//                              max; per layer (layer = l) and summed over layers (layer = -1)
//   plan.offline_s, ilp.*      step 0: offline planning time; MoETuner's ILP objectives and bounds
// expert_load rows for every measured batch; placements at step 0 and wherever a layer's placement changes;
// the routing profile of data A as a trace of the run (counts and transitions, one iteration per profiled batch
// summed into one).
#pragma once

#include <string>
#include <vector>

#include "serve/serve_config.h"
#include "serve/serve_loop.h"
#include "serve/tail_stats.h"
#include "store/store.h"

namespace prophet::serve {

// The tail summaries of a run: per layer [L] and summed over layers, for expert, a2a and layer times, and over
// forward_ms.
struct RunTails {
    std::vector<TailSummary> expert, a2a, layer;  // [L]
    TailSummary expert_sum, a2a_sum, layer_sum, forward;
};
RunTails run_tails(const ServeRun& run);

void record_serve_run(Store& store, const std::string& run_id, const ServeSettings& settings, const ServeRun& run);

}  // namespace prophet::serve
