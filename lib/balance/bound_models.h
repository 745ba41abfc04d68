// bound_models.h: each system model `prophet plan` reports (Eq 6, Eq 8, fastermoe_s and the Sim column's blockwise
// pieces) evaluated at bounds on its terms, kept as the least so far in a LayerBound (docs/bounds.md "Why the models
// can be bounded term by term", "The Sim column"). Internal to lib/balance's bound files.
#pragma once

#include <cstdint>

#include "balance/bound_topology.h"
#include "balance/bounds.h"
#include "balance/cost_model.h"

namespace prophet::bound_detail {

// The four models at given term bounds (seconds): each model's time is nondecreasing in every term.
struct Terms {
    double a2a = 0, a2a_l2l = 0, fec = 0, trans = 0, agg = 0;
    // the longest single expert's own Trans (Agg) of the class: its copies alone (0: no replica). Whole experts
    // (the scheduler's `time` split) leave one longer than the non-expert window wholly beside the expert compute.
    double one_trans = 0, one_agg = 0;
    // the shortest: every expert with a copy takes at least this alone (one copy's transfer; 0: no replica)
    double each_trans = 0, each_agg = 0;
    // what the copies outside the first window take at least together: whole experts fit at most a few node
    // receivers' copies in FNEC (BNEC), so the rest of the class's node receivers cross nodes beside the second
    // (docs/bounds.md "Whole experts", node receivers beyond the first window; 0: no such bound)
    double rest_trans = 0, rest_agg = 0;
};

// A transfer of at least `whole` seconds whose longest expert alone takes at least `one` and every expert at least
// `each`, beside a first window (FNEC or BNEC) and then a second (FEC, BEC or a level): at least max(0, whole -
// first - second) is exposed; with whole experts, when one > first, at least max(0, one - second), and when each >
// first no expert fits the first window, so at least max(0, whole - second) (docs/bounds.md "Whole experts").
// With whole experts, when the copies outside the first window take at least `rest`, at least max(0, rest - second).
inline double exposed_bound(double whole, double one, double each, double rest, double first, double second,
                            bool whole_experts) {
    double beyond_first = whole - first;
    if (whole_experts) beyond_first = std::max(beyond_first, rest);
    if (whole_experts && one > first) beyond_first = std::max(beyond_first, one);
    // the margin: t_e's own rounding
    if (whole_experts && each > first * (1 + 1e-9)) beyond_first = std::max(beyond_first, whole);
    return std::max(0.0, beyond_first - second);
}
// exposed_bound for a class's Trans (first window FNEC) and Agg (BNEC)
inline double exposed_trans(const Terms& t, double fnec, double second, bool whole_experts) {
    return exposed_bound(t.trans, t.one_trans, t.each_trans, t.rest_trans, fnec, second, whole_experts);
}
inline double exposed_agg(const Terms& t, double bnec, double second, bool whole_experts) {
    return exposed_bound(t.agg, t.one_agg, t.each_agg, t.rest_agg, bnec, second, whole_experts);
}

// What the Sim column's blockwise pieces of layer l read of its neighbours (docs/bounds.md "The Sim column").
constexpr int kLevels = LayerBound::kSimLevels;
struct SimWindow {
    bool first = true, last = true;  // layer 0 (Trans and Agg whole, nothing beside them); layer L-1 (no charge)
    double prev_hide_s[kLevels] = {kUnlimited, kUnlimited, kUnlimited, kUnlimited, kUnlimited};  // layer l-1's
    double own_hide_s[kLevels] = {kUnlimited, kUnlimited, kUnlimited, kUnlimited, kUnlimited};
    double fnec_s = 0, bnec_s = 0;  // the model's fnec_s() and bnec_s() (Eq 8's windows too)
    // the pairwise pieces' FEC grids (LayerBound::fec_level_s): layer l-1's (0: unknown) and this layer's
    double prev_fec_s[LayerBound::kFecLevels] = {}, own_fec_s[LayerBound::kFecLevels] = {};
    bool transfers_may_hide = false;  // BoundBudget::sim_transfers_may_hide: no exposed transfer is charged
    bool whole_experts = true;        // BoundBudget::sim_whole_experts: the split moves whole experts
};

// Which of a LayerBound's fields a scan computes: all of them; the cost-model columns (Eq 6, Eq 8, fastermoe_s and
// their layer_to_layer variants) only; or the Sim column's only (sim_none_s, sim_fastermoe_s and the pieces). The flat
// paper count scans twice (bounds.cpp layer_bound): its columns under the paper's count, the Sim column under the
// simulator's.
enum class BoundColumns { kAll, kModels, kSim };

// The four models at the terms t of placements with n receivers: each of b's fields that `columns` names becomes
// the least of itself and that model's time (eq6_receivers: the n of a new least Eq 6); the Sim pieces per pair of
// hiding levels.
void take_min(LayerBound& b, const CostModel& m, const SimWindow& w, const Terms& t, int64_t n,
              BoundColumns columns = BoundColumns::kAll);

}  // namespace prophet::bound_detail
