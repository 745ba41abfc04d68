// trans_agg.h: Trans and Agg (Pro-Prophet §1, §5) for the experts of one MoE layer.
//
// Every rank keeps a copy of every expert, but only expert e's HOME rank (static layout: e / (E/D)) holds the
// authoritative parameters and optimizer state. Under a placement, e's group is {home} + every rank that holds e
// (its placement owner and its replica holders), sorted ascending. When the group is more than {home}:
//   Trans (before dispatch): broadcast e's parameters from home into every member's copy;
//   Agg   (after the expert backward): sum the members' gradients of e into home's, in ascending rank order,
//         then zero the non-home members' gradients so they never reach an optimizer or a grad norm.
// A group of {home} alone costs nothing. Ranks outside a group do not take part in its broadcast or reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "balance/placement.h"

namespace prophet {

class Communicator;

// home rank of expert e under the static layout; requires E % D == 0
inline int moe_home_rank(int expert, int E, int D) { return expert / (E / D); }

// sorted ranks of expert e's Trans/Agg group: home and every rank holding e under the placement
std::vector<int> moe_expert_group(const Placement& placement, int expert, int home);

// params [E]: this rank's copy of each expert (numel floats each). Broadcasts from home to every group that is
// more than {home}; all of this rank's broadcasts are in flight together, then waited on. tag_base + e tags e.
// only [E] (optional): restrict to the experts with only[e] = 1 (one part of a split Trans).
// resident (optional): the placement of the previous Trans, whose copies are still current (serving never updates
// parameters): its holders of e are left out of e's group, so only the ranks that newly hold e receive it and an
// unchanged placement sends nothing. Null, or a placement with no experts (no Trans yet): every holder receives.
void moe_trans(Communicator* comm, const Placement& placement, float* const* params, size_t numel, int tag_base,
               const uint8_t* only = nullptr, const Placement* resident = nullptr);

// grads [E]: this rank's gradient of each expert (numel floats each). Sums every group that is more than {home}
// into home's gradient, then zeroes the other members' gradients. tag_base + e tags e. only: as for moe_trans.
void moe_agg(Communicator* comm, const Placement& placement, float* const* grads, size_t numel, int tag_base,
             const uint8_t* only = nullptr);

// [E] 1 for the experts whose Trans/Agg group is more than {home}: the ones that move
std::vector<uint8_t> moe_moving_experts(const Placement& placement);
// number of ranks expert e's parameters are sent to (its group size - 1)
int moe_receivers(const Placement& placement, int expert);

}  // namespace prophet
