// serve_config.h: the keys of `prophet profile --inference` (docs/serving.md): every key of prophet train (the
// model, data A, the policy, the cluster of the planner's cost model, the store) plus the serve.* keys below.
//
// An inference run profiles routing on data A for serve.profile_iterations batches (static placement), plans the
// policy's placement once from that profile (offline policies) or per batch (online ones), runs serve.warmup
// unmeasured batches and then serve.iterations measured ones, on data A again (in-sample: the batches after the
// profiled ones) or, when serve.eval_mixture is set, on data B: the same generated corpus (same topics) with that
// topic mixture (out-of-sample).
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "model/data.h"
#include "train/train_config.h"

namespace prophet::serve {

const Schema& serve_schema();

struct ServeSettings {
    TrainSettings base;            // model, data A, policy, cost model, store (train.* keys are ignored)
    int profile_iterations = 4;    // batches of data A whose routing is profiled (steps [0, P))
    int warmup = 2;                // unmeasured batches before the measured ones
    int iterations = 20;           // measured batches
    std::string checkpoint;        // "" = freshly initialised parameters (model.seed = run.seed)
    DataConfig eval_data;          // data A, or data B when out_of_sample
    bool out_of_sample = false;
    // simulated nodes (serve_sim.h): cluster files and the served model's dimensions there
    std::vector<std::string> sim_clusters;
    int sim_d_model = 4096, sim_d_ffn = 14336, sim_bytes_per_elem = 2;
    int64_t sim_tokens_per_device = 4096;
    // the first evaluated step: in-sample evaluation continues after the profiled batches; data B starts at 0
    int64_t eval_first_step() const { return out_of_sample ? 0 : profile_iterations; }
};

// Reads and cross-checks the resolved config (train_settings_from's checks plus the serve.* keys); throws
// prophet::Error (exit 3) naming the key, the value, the rule and a fix.
ServeSettings serve_settings_from(const Config& config, int world_size);

}  // namespace prophet::serve
