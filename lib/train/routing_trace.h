// routing_trace.h: the header of a routing trace recorded from the model itself (prophet profile, a sweep's
// validation of a real run, the serving profile): shapes from the model's config, one iteration = one batch of
// B sequences of T tokens over all ranks.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "model/model_config.h"
#include "trace/trace.h"

namespace prophet {

inline TraceMeta routing_trace_meta(const ModelConfig& m, int num_devices, int num_iterations, std::string source) {
    TraceMeta meta;
    meta.num_iterations = num_iterations;
    meta.num_layers = m.L;
    meta.num_devices = num_devices;
    meta.num_experts = m.E;
    meta.top_k = m.K;
    meta.tokens_per_iteration = static_cast<int64_t>(m.B) * m.T;
    meta.d_model = m.C;
    meta.d_ffn = m.hidden_size();
    meta.seq_len = m.T;
    meta.source = std::move(source);
    return meta;
}

}  // namespace prophet
