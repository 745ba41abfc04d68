#include "balance/regime.h"

namespace prophet {

void add_regime_keys(Schema& s, const std::string& default_regime) {
    s.add_string("balance.regime", default_regime, {"auto", "training", "serving"},
                 "training: replicas pay Trans and Agg every iteration (Pro-Prophet); serving: weights are static "
                 "between rebalances, a rebalance sends new copies once (a stall); auto: serving for a trace "
                 "imported from sglang, vllm, trtllm or eplb statistics, training otherwise");
    s.add_int("balance.rebalance_every", 3000, 1, 1 << 30,
              "serving: iterations between rebalances (vLLM's default step_interval: 3000)");
    s.add_int("balance.window", 1000, 1, 1 << 30,
              "serving: iterations of history a rebalance plans on (vLLM's default window_size: 1000)");
}

std::string resolve_regime(const std::string& regime, const std::string& trace_source) {
    if (regime != "auto") return regime;
    for (const char* engine : {"sglang", "vllm", "trtllm", "eplb"}) {
        const std::string prefix = std::string("import:") + engine + " ";
        if (trace_source.rfind(prefix, 0) == 0) return "serving";
    }
    return "training";
}

void resolve_regime_in(Config& config, const std::string& trace_source) {
    const std::string regime = config.get_string("balance.regime");
    if (regime == "auto")
        config.set("balance.regime", resolve_regime(regime, trace_source),
                   "balance.regime auto, trace " + trace_source);
}

RebalanceSettings rebalance_settings_from(const Config& config) {
    RebalanceSettings r;
    r.rebalance_every = static_cast<int>(config.get_int("balance.rebalance_every"));
    r.window = static_cast<int>(config.get_int("balance.window"));
    return r;
}

}  // namespace prophet
