// flow_extra_copies.h: flow's extra-copy pass (docs/policies.md, flow item 5). After the placement families, each
// round tries a few more copies on the best placement so far and keeps the round's best where the cost model
// predicts it faster. Why: the families add copies in EPLB's order (the expert of largest load / copies, on one
// rule's device), so a copy that pays on another device, or for the all-to-all it saves (under a chain broadcast
// one more receiver of an expert with copies costs little more Trans), or for a NIC it relieves, is never tried.
// Plain arrays: P [D*E] planning counts, load [E] expert loads.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "balance/cluster.h"
#include "balance/placement.h"

namespace prophet {

// The copies one round tries, (expert, device) pairs, each within the replica cap (0: none) and on a non-holder:
// - for experts that already have copies, one more on the non-holder sending them the most tokens and one on the
//   non-holder of least estimated load (load / copies of what it holds), the kExtraCopyTries of the largest
//   load / copies;
// - with `nics` (a topology with several nodes), NIC relief: the busiest NIC's cross-node ingress, counted as if
//   each expert's tokens from a node without a holder entered its owner's NIC, comes from the experts it owns;
//   for the kNicReliefTries of them sending it the most, one copy in the node sending that expert the most, on its
//   device of fewest replicas (a chain broadcast's busiest device forwards no more), then least estimated load.
constexpr int kExtraCopyTries = 8, kNicReliefTries = 4;
std::vector<std::pair<int, int>> extra_copy_tries(const int64_t* P, const std::vector<double>& load,
                                                  const Placement& at, int cap, const ClusterSpec* nics);

// Up to `rounds` rounds from `start`: every try of the round is scored by consider(p), which returns whether p
// became the best placement so far; the round's last such p is the next round's start. Stops at a round with none.
void add_extra_copies(const int64_t* P, const std::vector<double>& load, const Placement& start, int cap, int rounds,
                      const ClusterSpec* nics, const std::function<bool(const Placement&)>& consider);

}  // namespace prophet
