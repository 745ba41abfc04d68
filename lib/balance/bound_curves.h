// bound_curves.h: what x extra expert holders can achieve at best in one layer, for the layer lower bound
// (bounds.h; docs/bounds.md "The terms"): the busiest device's compute and received tokens as curves over x, and the
// tokens each further holder can keep local. Internal to lib/balance's bound files.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "balance/cluster.h"

namespace prophet::bound_detail {

// [x] bound on the tokens the busiest device receives with x extra holders in all, x = 0 .. where it stops
// falling (or kReceiveSteps): e's tokens off the rows of its h_e holders, at least w_e minus e's h_e largest rows, all
// reach those holders, so one takes in >= (w_e - top_{h_e}(e)) / h_e, which falls with h_e; the greedy that gives each
// holder to the expert of the largest share minimises the maximum (as compute_curve). counts [D][E].
constexpr int64_t kReceiveSteps = 2048;
void receive_curve(const int64_t* counts, int D, int E, int64_t max_extra, std::vector<double>& curve);

// [x] bound on max_i H_i (tokens) with x extra holders in all, x = 0 .. the first x where it stops falling:
// max(ceil(total / D), max_e ceil(w_e / h_e)) under the greedy that gives each holder to the largest w_e / h_e.
void compute_curve(const std::vector<int64_t>& w, int D, int64_t total, int64_t max_extra, std::vector<int64_t>& curve);

// [k] tokens kept local by the k largest counts outside each expert's best row, k = 0 .. their number: counts
// [rows][E] (tokens of a device or a node per expert). An expert is held by its owner (anywhere: a moved owner pays
// no per-iteration transfer) plus one row per receiver, so its owner keeps at most its largest row and each
// receiver one more row; *best_local gets the sum over experts of the largest row. With per_expert < rows - 1 only
// each expert's per_expert largest other rows count (an expert with at most that many receivers there).
// (prefix [k] into `prefix`, its memory kept between calls: these arrays are E x D long)
void gain_beyond_best(const int64_t* counts, int rows, int E, int64_t* best_local, std::vector<int64_t>& prefix,
                      int per_expert = std::numeric_limits<int>::max());

// Per node: a node keeps e's tokens inside only if one of its devices holds e; [nodes][E] counts.
std::vector<int64_t> node_counts(const int64_t* counts, const ClusterSpec& cl, int E, int* nodes_out);

}  // namespace prophet::bound_detail
