// regime.h: the balance.regime keys (training | serving) and the default that follows the command
// (docs/serving.md, "Which regime a command runs"): training accounting for `prophet train` and for replays of
// training routing, serving accounting for replays of an inference engine's statistics and for serving sweeps.
#pragma once

#include <string>

#include "balance/rebalance.h"
#include "core/config.h"

namespace prophet {

// Adds balance.regime (choices auto | training | serving, default `default_regime`), balance.rebalance_every and
// balance.window (vLLM's defaults 3000 and 1000) to `schema`.
void add_regime_keys(Schema& schema, const std::string& default_regime);

// The regime a replay of a trace runs when balance.regime is "auto": serving for a trace imported from an
// inference engine's load statistics (source "import:sglang", "import:vllm", "import:trtllm" or "import:eplb",
// docs/trace-format.md), training for every other source (generated, profiled from training, Megatron's
// tokens_per_expert). "training" and "serving" are returned unchanged.
std::string resolve_regime(const std::string& regime, const std::string& trace_source);

// Replaces balance.regime = auto in `config` by resolve_regime's answer for the trace (so the run records the
// regime it ran).
void resolve_regime_in(Config& config, const std::string& trace_source);

// balance.rebalance_every and balance.window of a config that has the keys of add_regime_keys.
RebalanceSettings rebalance_settings_from(const Config& config);

}  // namespace prophet
