// plan_serving.h: `prophet plan` under balance.regime = serving: every policy with periodic rebalancing
// (lib/balance/rebalance.h), printed as a section after the table and as "serving" in --json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "balance/rebalance.h"
#include "core/config.h"

namespace prophet::cli {

// balance.regime (auto | training | serving, default auto: from the trace's source, balance/regime.h),
// balance.rebalance_every, balance.window (vLLM's defaults 3000 and 1000)
void add_serving_keys(Schema& schema);

struct PlanServing {
    bool enabled = false;  // balance.regime = serving
    RebalanceSettings settings;
    std::vector<ServingScore> scores;  // one per policy, static first when present
};

// Runs each policy (the plan's, skipped ones left out by the caller), and static for the ratio when it is not
// among them, when the config says serving.
PlanServing evaluate_plan_serving(const std::vector<std::string>& policies, const TraceView& view,
                                  const CostModel& cost, const EvalSettings& settings, const Config& config);
nlohmann::json serving_json(const PlanServing& serving);
void print_serving(const PlanServing& serving);

}  // namespace prophet::cli
