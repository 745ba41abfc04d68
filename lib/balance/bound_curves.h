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

// The mixed all-to-all term (docs/bounds.md "All-to-all", mixed): a token kept on its device saves `a` seconds, one
// kept in its node `b` (a = lambda x token bytes / the devices' ingress sum, b = (1 - lambda) x token bytes / the
// nodes' inter-node sum). Holders of expert e in node k keep their own rows on their devices and node k's row of e
// in the node; per node that is concave in the holders (the first saves a x its row + b x the node's row, each
// further one a x its row, rows largest first), so e's best h holders take its h largest such items, and with
// x extra holders in all the most saved is the sum of each expert's largest item (its owner, anywhere) and the x
// largest other items. `forced` gets that sum, `prefix` [k] the k largest other items' sum for k <= kMixedSteps
// (the memory is kept between calls) and `tail` the kMixedSteps-th item (0 when there are fewer): each item beyond
// saves at most that.
constexpr int64_t kMixedSteps = 4096;
struct MixedGain {
    double forced = 0, tail = 0;
    std::vector<double> prefix;
    // the most x extra holders save beyond the owners' items (seconds)
    double beyond_owners(int64_t x) const {
        const int64_t last = static_cast<int64_t>(prefix.size()) - 1;
        return x <= last ? prefix[static_cast<size_t>(x)] : prefix.back() + static_cast<double>(x - last) * tail;
    }
};
void mixed_gain_curve(const int64_t* counts, const ClusterSpec& cl, int E, double a, double b, MixedGain& out);

// Per node: a node keeps e's tokens inside only if one of its devices holds e; [nodes][E] counts.
std::vector<int64_t> node_counts(const int64_t* counts, const ClusterSpec& cl, int E, int* nodes_out);

}  // namespace prophet::bound_detail
