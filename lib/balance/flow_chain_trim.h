// flow_chain_trim.h: flow's chain trims (docs/policies.md, flow item 6). Under a chain broadcast Trans and Agg take
// at least busiest x one copy's time, where busiest is the most copies one device forwards or receives
// (cost_model.h ChainLoads): a step. One device handling a copy more than all the others costs a whole copy more
// (17.9 ms at hpwnv-16's 15 Gbit/s and d_ffn 4096, more than half a layer's FEC), however few copies the others
// handle; the families grow copies for compute and all-to-all and never look at that step. A trim goes the other
// way: from the best placement so far it takes copies off until no device handles more than a level below the
// busiest, so that the copies the step bought are dropped where they save the least.
//
// One removal, on the first device over the level (device order): of the copies whose removal lowers that device's
// count where it is over (its own replicas; the last receiver of a chain it forwards to, when that receiver ends
// the chain), the copy of the expert with the least load / copies (ties: lower expert, then lower device); where
// none lowers it, the last receiver of a chain it forwards to (the chain shortens, so this ends). Counts are kept
// up to date from the one chain a removal changes.
// Plain arrays: load [E] the experts' planning loads.
#pragma once

#include <functional>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"

namespace prophet {

// `start` with copies removed (above) until no device forwards or receives more than `level` copies (level >= 0;
// model: a chain broadcast).
Placement trim_chain_copies(const CostModel& model, const std::vector<double>& load, const Placement& start, int level);

// The trims of `start` at levels busiest - 1, busiest - 2, ... down to 1, each from the one before, scored by
// consider(placement) (predicted seconds); stops after two rises in a row. Nothing to trim (no copies, or not a
// chain broadcast): no call.
void walk_chain_trims(const CostModel& model, const std::vector<double>& load, const Placement& start,
                      const std::function<double(const Placement&)>& consider);

}  // namespace prophet
