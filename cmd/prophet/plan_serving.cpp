#include "plan_serving.h"

#include <algorithm>
#include <cstdio>

#include "balance/regime.h"

namespace prophet::cli {

void add_serving_keys(Schema& s) { add_regime_keys(s, "auto"); }

PlanServing evaluate_plan_serving(const std::vector<std::string>& policies, const TraceView& view,
                                  const CostModel& cost, const EvalSettings& settings, const Config& config) {
    PlanServing out;
    out.enabled = config.get_string("balance.regime") == "serving";
    if (!out.enabled) return out;
    out.settings = rebalance_settings_from(config);
    std::vector<std::string> names = policies;
    if (std::find(names.begin(), names.end(), "static") == names.end())
        names.insert(names.begin(), "static");  // the baseline of the xstatic column
    for (const std::string& p : names) out.scores.push_back(evaluate_serving(p, view, cost, settings, out.settings));
    return out;
}

nlohmann::json serving_json(const PlanServing& serving) {
    nlohmann::json j = {{"rebalance_every", serving.settings.rebalance_every},
                        {"window", serving.settings.window},
                        {"policies", nlohmann::json::array()}};
    for (const ServingScore& s : serving.scores) {
        nlohmann::json p = {
            {"name", s.name},         {"layer_ms", s.mean_layer_ms},    {"balancedness", s.mean_balancedness},
            {"stall_ms", s.stall_ms}, {"amortised_ms", s.amortised_ms}, {"rebalances", nlohmann::json::array()}};
        for (const RebalanceRecord& r : s.rebalances)
            p["rebalances"].push_back({{"at_iteration", r.at_iteration},
                                       {"window", {r.window_begin, r.window_end}},
                                       {"served_until", r.served_end},
                                       {"predicted_balancedness", r.predicted_balancedness},
                                       {"realised_balancedness", r.realised_balancedness},
                                       {"copies_moved", r.copies_moved},
                                       {"bytes_moved", r.bytes_moved},
                                       {"stall_ms", r.stall_s * 1e3}});
        j["policies"].push_back(p);
    }
    return j;
}

void print_serving(const PlanServing& serving) {
    std::printf(
        "# serving: rebalance every %d iterations on the previous %d; per MoE layer: forward 2 A2A + FEC, no "
        "Trans/Agg; stall = sending new copies once per rebalance, amortised over I x L\n",
        serving.settings.rebalance_every, serving.settings.window);
    double static_ms = 0;
    for (const ServingScore& s : serving.scores)
        if (s.name == "static") static_ms = s.mean_layer_ms;
    std::printf("# %-15s %9s %7s %12s %10s %12s %10s\n", "policy", "layer ms", "xstatic", "balancedness", "stall ms",
                "amortised ms", "rebalances");
    for (const ServingScore& s : serving.scores)
        std::printf("  %-15s %9.4f %7.3f %12.3f %10.3f %12.5f %10zu\n", s.name.c_str(), s.mean_layer_ms,
                    s.mean_layer_ms > 0 ? static_ms / s.mean_layer_ms : 0.0, s.mean_balancedness, s.stall_ms,
                    s.amortised_ms, s.rebalances.size());
    for (const ServingScore& s : serving.scores)
        for (const RebalanceRecord& r : s.rebalances)
            std::printf(
                "# rebalance: %s at %d (planned on [%d, %d)): balancedness predicted %.3f, realised %.3f; "
                "%d copies, %.4g bytes, stall %.3f ms\n",
                s.name.c_str(), r.at_iteration, r.window_begin, r.window_end, r.predicted_balancedness,
                r.realised_balancedness, r.copies_moved, r.bytes_moved, r.stall_s * 1e3);
}

}  // namespace prophet::cli
