// trace_bounds (bounds.h): every layer of a trace bounded in turn, and per iteration the dynamic programming over
// its layers that picks each layer's Sim piece (docs/bounds.md "The Sim column").
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "balance/bound_models.h"
#include "balance/bounds.h"
#include "core/stats.h"
#include "core/timer.h"

namespace prophet {
namespace bound_detail {
namespace {

// One iteration's layers [L]: the largest sum of sim_parts_s, layer l's level being layer l+1's credit level (any
// consistent choice bounds the sum: docs/bounds.md); parts[l] gets layer l's piece. Returns the sum.
double choose_sim_parts(const LayerBound* layers, int L, double* parts) {
    using Row = std::array<double, kLevels>;
    std::vector<Row> best(static_cast<size_t>(L));                       // [l][k]: the largest sum up to l
    std::vector<std::array<int, kLevels>> from(static_cast<size_t>(L));  // [l][k]: layer l-1's level there
    for (int k = 0; k < kLevels; ++k) best[0][k] = layers[0].sim_parts_s[kLevels - 1][k];
    for (int l = 1; l < L; ++l)
        for (int k = 0; k < kLevels; ++k) {
            best[l][k] = -kUnlimited;
            for (int j = 0; j < kLevels; ++j) {
                const double v = best[l - 1][j] + layers[l].sim_parts_s[j][k];
                if (v > best[l][k]) best[l][k] = v, from[l][k] = j;
            }
        }
    int k = static_cast<int>(std::max_element(best[L - 1].begin(), best[L - 1].end()) - best[L - 1].begin());
    const double sum = best[L - 1][static_cast<size_t>(k)];
    for (int l = L - 1; l >= 0; --l) {
        const int j = l > 0 ? from[l][k] : kLevels - 1;
        parts[l] = layers[l].sim_parts_s[j][k];
        k = j;
    }
    return sum;
}

// One iteration's layers [L]: the least sum of sim_pairs_s over every sequence of classes, layer l-1's class being
// the level layer l is charged (docs/bounds.md "Pairs of layers"); parts[l] gets layer l's piece. Returns the sum.
double choose_sim_pairs(const LayerBound* layers, int L, double* parts) {
    constexpr int G = LayerBound::kFecLevels;
    std::vector<std::array<double, G>> best(static_cast<size_t>(L));  // [l][k]: the least sum up to l, l in class k
    std::vector<std::array<int, G>> from(static_cast<size_t>(L));     // [l][k]: layer l-1's class there
    for (int k = 0; k < G; ++k) best[0][k] = layers[0].sim_pairs_s[0][k];  // layer 0: every row alike
    for (int l = 1; l < L; ++l)
        for (int k = 0; k < G; ++k) {
            best[l][k] = kUnlimited, from[l][k] = 0;
            for (int j = 0; j < G; ++j) {
                const double v = best[l - 1][j] + layers[l].sim_pairs_s[j][k];
                if (v < best[l][k]) best[l][k] = v, from[l][k] = j;
            }
        }
    int k = static_cast<int>(std::min_element(best[L - 1].begin(), best[L - 1].end()) - best[L - 1].begin());
    const double sum = best[L - 1][static_cast<size_t>(k)];
    for (int l = L - 1; l >= 0; --l) {
        const int j = l > 0 ? from[l][k] : 0;
        parts[l] = layers[l].sim_pairs_s[j][k];
        k = j;
    }
    return sum;
}

// Each layer's sim_s. A run simulates every layer under one schedule, so the iteration's sum is at least the least
// of: the blockwise sum (the larger of the two piece sums, each bounds it), the none sum (Eq 6 bounds) and the
// fastermoe sum (fastermoe_s bounds); each layer gets its piece of that least sum.
void choose_sim_pieces(LayerBound* layers, int L) {
    std::vector<double> levels(static_cast<size_t>(L)), pairs(static_cast<size_t>(L));
    const double by_pairs = choose_sim_pairs(layers, L, pairs.data());
    const double by_levels = choose_sim_parts(layers, L, levels.data());
    double none = 0, fastermoe = 0;
    for (int l = 0; l < L; ++l) none += layers[l].sim_none_s, fastermoe += layers[l].sim_fastermoe_s;
    const double blockwise = std::max(by_pairs, by_levels);
    for (int l = 0; l < L; ++l) {
        LayerBound& b = layers[l];
        if (blockwise <= std::min(none, fastermoe))
            b.sim_s = by_pairs > by_levels ? pairs[static_cast<size_t>(l)] : levels[static_cast<size_t>(l)];
        else
            b.sim_s = none <= fastermoe ? b.sim_none_s : b.sim_fastermoe_s;
    }
}

}  // namespace
}  // namespace bound_detail

TraceBounds trace_bounds(const TraceView& trace, const CostModel& cost, const BoundBudget& budget) {
    const int I = trace.num_iterations, L = trace.num_layers, D = trace.num_devices, E = trace.num_experts;
    TraceBounds out;
    std::vector<double> us;
    const CostModel first = model_for_layer(cost, 0), later = model_for_layer(cost, 1);
    for (int it = 0; it < I; ++it) {
        for (int l = 0; l < L; ++l) {
            const int64_t t0 = now_ns();
            const double* prev = l > 0 ? out.layers.back().hide_s : nullptr;
            const double* prev_fec = l > 0 ? out.layers.back().fec_level_s : nullptr;
            out.layers.push_back(
                layer_bound(l == 0 ? first : later, trace.layer(it, l), D, E, budget, l, L, prev, prev_fec));
            us.push_back((now_ns() - t0) * 1e-3);
        }
        bound_detail::choose_sim_pieces(&out.layers[static_cast<size_t>(it) * L], L);
    }
    const double n = static_cast<double>(out.layers.size());
    double receivers = 0;
    LayerBound& m = out.mean;
    for (const LayerBound& b : out.layers) {
        for (auto field : {&LayerBound::eq6_s, &LayerBound::eq8_s, &LayerBound::fastermoe_s, &LayerBound::sim_s,
                           &LayerBound::eq6_l2l_s, &LayerBound::eq8_l2l_s, &LayerBound::fastermoe_l2l_s,
                           &LayerBound::compute_tokens, &LayerBound::a2a_s, &LayerBound::one_transfer_s})
            m.*field += b.*field / n;
        receivers += static_cast<double>(b.eq6_receivers) / n;
    }
    m.eq6_receivers = static_cast<int64_t>(std::llround(receivers));
    out.median_us = median(us);
    return out;
}

}  // namespace prophet
