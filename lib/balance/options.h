// options.h: the `balance.*` config keys shared by `prophet plan`, `train` and `sweep`.
#pragma once

#include "balance/policies.h"
#include "core/config.h"

namespace prophet {

// Adds balance.policy (choices: policy_names(), plus "all" when allow_all) and every BalanceOptions key.
void add_balance_keys(Schema& schema, bool allow_all, const std::string& default_policy);
BalanceOptions balance_options_from(const Config& config);

}  // namespace prophet
