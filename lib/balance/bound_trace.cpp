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

// One iteration's layers [L]: each layer's sim_s becomes one of its sim_parts_s, layer l's level being layer l+1's
// credit level, chosen so that their sum is the largest (any consistent choice bounds the sum: docs/bounds.md).
void choose_sim_parts(LayerBound* layers, int L) {
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
    for (int l = L - 1; l >= 0; --l) {
        const int j = l > 0 ? from[l][k] : kLevels - 1;
        layers[l].sim_s = layers[l].sim_parts_s[j][k];
        k = j;
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
            out.layers.push_back(layer_bound(l == 0 ? first : later, trace.layer(it, l), D, E, budget, l, L, prev));
            us.push_back((now_ns() - t0) * 1e-3);
        }
        bound_detail::choose_sim_parts(&out.layers[static_cast<size_t>(it) * L], L);
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
