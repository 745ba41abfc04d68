// model_config.h: the MoE-GPT's shape and its few non-shape options (ARCHITECTURE.md, "The model").
//
// Shape letters, defined once: V vocabulary, T sequence length, C channels, NH attention heads, L layers,
// E experts per layer, K experts per token, F expert hidden size, B global batch (sequences per step).
// N = B_local*T is the number of tokens one rank processes in one forward.
#pragma once

#include <cstdint>

namespace prophet {

struct ModelConfig {
    int V = 256;  // vocabulary (byte-level tokens by default)
    int T = 64;   // sequence length
    int C = 128;  // channels
    int NH = 4;   // attention heads; C % NH == 0
    int L = 4;    // layers
    int E = 8;    // experts per layer
    int K = 2;    // experts per token, 1 <= K <= E
    int F = 0;    // expert hidden size; 0 means 2*C (use hidden_size())
    int B = 8;    // global batch, in sequences
    double aux_loss_coef = 0.0;    // Switch-style load-balancing loss coefficient; 0 = off
    double capacity_factor = 0.0;  // > 0: each expert takes at most ceil(cf * N*K/E) assignments per rank;
                                   // 0 = dropless
    uint64_t seed = 1337;          // parameter initialisation

    int hidden_size() const { return F > 0 ? F : 2 * C; }
};

// Throws prophet::Error (exit code 3) naming the key ("model.<field>"), the value and the rule.
void model_config_validate(const ModelConfig& config);

}  // namespace prophet
