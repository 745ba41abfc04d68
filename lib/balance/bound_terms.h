// bound_terms.h: the layer lower bound's (bounds.h) time terms for given unavoidable quantities: one all-to-all
// moving at least so many tokens, one Trans or Agg of at least so many expert copies (docs/bounds.md "The terms").
// Internal to lib/balance's bound files.
#pragma once

#include <cstdint>

#include "balance/bound_topology.h"
#include "balance/cost_model.h"

namespace prophet::bound_detail {

// One all-to-all moving at least `sent` tokens off their devices, `across` of them off their nodes (home path,
// either direction); `busiest` tokens reach one device (receive_curve).
double a2a_bound(const CostModel& m, const TopologyLimits& topo, int64_t sent, int64_t across, double busiest);

// Trans (agg = false) or Agg with n >= 1 receivers in all.
double transfer_bound(const CostModel& m, const TopologyLimits& topo, int64_t n, bool agg);

}  // namespace prophet::bound_detail
