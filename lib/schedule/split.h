// split.h: how the block-wise schedule divides one block's Trans (or Agg) between its two compute windows.
//
// Trans(l) runs beside FEC(l-1) and FNEC(l); Agg(l) beside BNEC(l) and BEC(l-1) (docs/scheduler.md). The part
// beside the non-expert compute is filled first, because that window's length is static and known offline; the
// rest goes beside the expert compute, whose length follows the routing. Both rules move whole experts and must
// give the same answer on every rank (the parts are separate tasks on each rank's communication stream, matched
// across ranks in order), so they use only the placement and offline estimates, never a rank's own timings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prophet {

enum class TransferSplitRule : int {
    kTime,  // first fit in expert order by each expert's estimated transfer time into the non-expert budget
    kHalf,  // the first ceil(n/2) moving experts (expert order) beside the non-expert compute (the authors' code)
};
TransferSplitRule parse_transfer_split_rule(const std::string& name);  // "time" | "half"; exit 2 otherwise

// moving [E]: 1 for the experts whose Trans/Agg group is more than their home; expert_s [E]: each one's estimated
// transfer time (s); nec_budget_s: the non-expert compute window (s). Returns [E]: 1 beside the non-expert
// compute, 0 beside the expert compute (experts not moving: 0).
std::vector<uint8_t> split_transfers(const std::vector<uint8_t>& moving, const std::vector<double>& expert_s,
                                     double nec_budget_s, TransferSplitRule rule);

}  // namespace prophet
