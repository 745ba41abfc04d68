#include "balance/bound_models.h"

#include <algorithm>

namespace prophet::bound_detail {
namespace {

// Blockwise pieces: 4 A2A + the compute charged to this layer (3 min(FEC, own level)) + the transfers exposed
// beyond what layer l-1's FEC at its level, FNEC and BNEC can hide (layer 0: Trans and Agg whole).
void take_sim_min(LayerBound& b, const SimWindow& w, const Terms& t) {
    double core[kLevels], exposed[kLevels];
    for (int k = 0; k < kLevels; ++k) {
        core[k] = 3.0 * (w.last ? t.fec : std::min(t.fec, w.own_hide_s[k]));
        const double hide = w.prev_hide_s[k];
        exposed[k] = w.transfers_may_hide ? 0.0
                     : w.first            ? t.trans + t.agg
                                          : exposed_trans(t, w.fnec_s, hide, w.whole_experts) +
                                     exposed_agg(t, w.bnec_s, 2.0 * hide, w.whole_experts);
    }
    for (int j = 0; j < kLevels; ++j)
        for (int k = 0; k < kLevels; ++k) {
            const double v = 4.0 * t.a2a + core[k] + exposed[j];
            b.sim_parts_s[j][k] = std::min(b.sim_parts_s[j][k], v);
        }
}

// Pairwise pieces: 4 A2A + 3 x layer l-1's FEC level j + the transfers exposed beyond that level, FNEC and BNEC, into
// this placement's class (the largest own level at most t.fec); layer L-1 adds its own 3 FEC.
void take_sim_pairs(LayerBound& b, const SimWindow& w, const Terms& t) {
    constexpr int G = LayerBound::kFecLevels;
    int own = 0;
    while (own + 1 < G && w.own_fec_s[own + 1] <= t.fec) ++own;
    const double fixed = 4.0 * t.a2a + (w.last ? 3.0 * t.fec : 0.0);
    for (int j = 0; j < G; ++j) {
        const double level = w.prev_fec_s[j];
        const double exposed = w.transfers_may_hide ? 0.0
                               : w.first            ? t.trans + t.agg
                                                    : exposed_trans(t, w.fnec_s, level, w.whole_experts) +
                                               exposed_agg(t, w.bnec_s, 2.0 * level, w.whole_experts);
        const double v = fixed + (w.first ? 0.0 : 3.0 * level) + exposed;
        b.sim_pairs_s[j][own] = std::min(b.sim_pairs_s[j][own], v);
    }
}

}  // namespace

void take_min(LayerBound& b, const CostModel& m, const SimWindow& w, const Terms& t, int64_t n, BoundColumns columns) {
    const double core = 3.0 * t.fec;
    auto eq8_exposed = [&]() {
        // chunks: max(0, T - FEC - FNEC), at most what whole experts leave (cost_model.h); layer 0: none hidden
        if (m.first_block) return t.trans + t.agg;
        const bool whole = m.transfer_credit == TransferCredit::kWholeExperts;
        return exposed_trans(t, w.fnec_s, t.fec, whole) + exposed_agg(t, w.bnec_s, 2.0 * t.fec, whole);
    };
    auto fastermoe = [&](double a2a) {
        return 4.0 * a2a + core + std::max(0.0, t.trans - a2a) + std::max(0.0, t.agg - a2a);
    };
    const double eq6 = 4.0 * t.a2a + core + t.trans + t.agg, fm = fastermoe(t.a2a);
    if (columns != BoundColumns::kSim) {
        if (eq6 < b.eq6_s) b.eq6_s = eq6, b.eq6_receivers = n;
        b.eq8_s = std::min(b.eq8_s, 4.0 * t.a2a + core + eq8_exposed());
        b.fastermoe_s = std::min(b.fastermoe_s, fm);
        b.eq6_l2l_s = std::min(b.eq6_l2l_s, 4.0 * t.a2a_l2l + core + t.trans + t.agg);
        b.eq8_l2l_s = std::min(b.eq8_l2l_s, 4.0 * t.a2a_l2l + core + eq8_exposed());
        b.fastermoe_l2l_s = std::min(b.fastermoe_l2l_s, fastermoe(t.a2a_l2l));
    }
    // the Sim column: schedule none is Eq 6, fastermoe fastermoe_s, blockwise the pieces
    if (columns != BoundColumns::kModels) {
        b.sim_none_s = std::min(b.sim_none_s, eq6);
        b.sim_fastermoe_s = std::min(b.sim_fastermoe_s, fm);
        take_sim_min(b, w, t);
        take_sim_pairs(b, w, t);
    }
}

}  // namespace prophet::bound_detail
