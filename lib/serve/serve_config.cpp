#include "serve/serve_config.h"

#include <unistd.h>

#include <cmath>

#include "balance/cluster.h"
#include "core/error.h"

namespace prophet::serve {

const Schema& serve_schema() {
    static const Schema schema = [] {
        Schema s = train_schema();
        s.add_int("serve.profile_iterations", 4, 1, 1e6,
                  "batches of data A profiled for routing counts and layer-to-layer transitions (static placement)");
        s.add_int("serve.warmup", 2, 0, 1e6, "unmeasured inference batches before the measured ones");
        s.add_int("serve.iterations", 20, 1, 1e7, "measured inference batches (percentiles are over these)");
        s.add_string("serve.checkpoint", "", {},
                     "checkpoint directory of prophet train --save to serve (empty: freshly initialised, run.seed)");
        KeySpec mixture;
        mixture.key = "serve.eval_mixture";
        mixture.type = ValueType::kFloatList;
        mixture.default_value = std::vector<double>{};
        mixture.min = 0.0;
        mixture.help =
            "topic weights of data B, one per data.num_topics (empty: evaluate in-sample on data A after the profile)";
        s.add(mixture);
        KeySpec clusters;
        clusters.key = "serve.sim_clusters";
        clusters.type = ValueType::kStringList;
        clusters.default_value = std::vector<std::string>{};
        clusters.help = "cluster files (D devices) on which the recorded routing is also served by the simulator, one "
                        "child run each (empty: none)";
        s.add(clusters);
        s.add_int("serve.sim_d_model", 4096, 1, 1 << 20, "simulated nodes: C, channels (Mixtral-8x7B: 4096)");
        s.add_int("serve.sim_d_ffn", 14336, 1, 1 << 22, "simulated nodes: F, expert hidden size (Mixtral-8x7B: 14336)");
        s.add_int("serve.sim_bytes_per_elem", 2, 1, 8, "simulated nodes: bytes per activation element (bf16: 2)");
        s.add_int("serve.sim_tokens_per_device", 4096, 1, 1 << 30,
                  "simulated nodes: tokens each device feeds a layer per batch; the recorded counts are scaled to it");
        return s;
    }();
    return schema;
}

ServeSettings serve_settings_from(const Config& c, int world_size) {
    ServeSettings s;
    s.base = train_settings_from(c, world_size);
    s.profile_iterations = static_cast<int>(c.get_int("serve.profile_iterations"));
    s.warmup = static_cast<int>(c.get_int("serve.warmup"));
    s.iterations = static_cast<int>(c.get_int("serve.iterations"));
    s.checkpoint = c.get_string("serve.checkpoint");
    if (!s.checkpoint.empty() && access(s.checkpoint.c_str(), R_OK) != 0)
        throw_config_error("serve.checkpoint", "\"" + s.checkpoint + "\"", "cannot read the checkpoint directory",
                           "give a directory written by prophet train --save, or leave it empty");
    if (s.base.model.capacity_factor > 0)
        throw_config_error("model.capacity_factor", std::to_string(s.base.model.capacity_factor),
                           "must be 0 for inference: the profile and the placements count every routed token",
                           "--set model.capacity_factor=0");
    s.sim_clusters = c.get_string_list("serve.sim_clusters");
    for (const std::string& path : s.sim_clusters) {
        if (access(path.c_str(), R_OK) != 0)
            throw_config_error("serve.sim_clusters", "\"" + path + "\"", "cannot read the cluster file",
                               "give files of experiments/clusters/ (e.g. moetuner-h100-ep4.toml)");
        // checked before anything runs: the replay needs one simulated device per rank
        const int devices = load_cluster_file(path).num_devices;
        if (devices != world_size)
            throw_config_error("serve.sim_clusters", "\"" + path + "\"",
                               "has num_devices = " + std::to_string(devices) + ", the run has " +
                                   std::to_string(world_size) + " ranks (the recorded routing is per rank)",
                               "run on " + std::to_string(devices) + " ranks, or simulate a cluster file of " +
                                   std::to_string(world_size) + " devices");
    }
    s.sim_d_model = static_cast<int>(c.get_int("serve.sim_d_model"));
    s.sim_d_ffn = static_cast<int>(c.get_int("serve.sim_d_ffn"));
    s.sim_bytes_per_elem = static_cast<int>(c.get_int("serve.sim_bytes_per_elem"));
    s.sim_tokens_per_device = c.get_int("serve.sim_tokens_per_device");
    s.eval_data = s.base.data;
    const std::vector<double>& mixture = c.get_float_list("serve.eval_mixture");
    if (!mixture.empty()) {
        if (s.base.data.source != "generated")
            throw_config_error("serve.eval_mixture", "[...]",
                               "needs the generated corpus (data.source = \"generated\"): data B is that corpus "
                               "with another topic mixture",
                               "--set data.source=generated, or leave serve.eval_mixture empty");
        if (static_cast<int64_t>(mixture.size()) != s.base.data.num_topics)
            throw_config_error("serve.eval_mixture", std::to_string(mixture.size()) + " weights",
                               "needs one weight per topic (data.num_topics = " +
                                   std::to_string(s.base.data.num_topics) + ")",
                               "give " + std::to_string(s.base.data.num_topics) + " weights");
        double sum = 0;
        for (double w : mixture) sum += w;
        if (!(sum > 0) || !std::isfinite(sum))
            throw_config_error("serve.eval_mixture", "weights summing to " + std::to_string(sum),
                               "must have a positive finite sum", "give at least one positive weight");
        s.out_of_sample = true;
        s.eval_data.mixture = mixture;
        s.eval_data.dominant_topic = -1;
        s.eval_data.dominance = 0.0;
        s.eval_data.shift_steps.clear();
        s.eval_data.shift_mixtures.clear();
        s.eval_data.validate();
    }
    return s;
}

}  // namespace prophet::serve
