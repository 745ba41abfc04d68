// moetuner_ilp2.cpp: MoETuner's ILP 2 (clusters onto GPUs by layer-to-layer traffic, memory balanced by Eq 13),
// solved exactly for D <= balance.ilp2_exact_max_devices: the heuristic incumbent (moetuner_ilp2_search.h), the
// chain DP bound, then CBC on the compact or the z-RLT model. The formulation is in policy_moetuner.cpp's header.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "balance/ilp_cbc.h"
#include "balance/moetuner_ilp2_search.h"
#include "balance/policies.h"
#include "core/error.h"
#include "core/timer.h"

namespace prophet {

using namespace moetuner_detail;

namespace {

// The chain DP: exact minimum over one permutation per layer of sum_l u_l (Eq 13 ignored), by dynamic
// programming along the layer chain: V_{l+1}(s) = min_p V_l(p) + u_l(p, s), u_l(p, s) = max_{g1 != g2} link[g1,g2] *
// C[l, p^-1(g1), s^-1(g2)] (one cluster per GPU). L * (D!)^2 * D^2 work, so only for D <= kChainDpMaxDevices.
// Ties go to the lexicographically smaller permutation (identity first).
constexpr int kChainDpMaxDevices = 6;

struct ChainDp {
    int D = 0;
    std::vector<std::vector<int>> perms, inverse;  // perms[k][c] = GPU of cluster c; inverse[k][g] = cluster on g
    std::vector<std::pair<int, int>> pairs;        // ordered GPU pairs with a link cost

    explicit ChainDp(const Ilp2Data& data) : D(data.D) {
        std::vector<int> p(D);
        std::iota(p.begin(), p.end(), 0);
        do {
            perms.push_back(p);
            std::vector<int> inv(D);
            for (int c = 0; c < D; ++c) inv[p[c]] = c;
            inverse.push_back(inv);
        } while (std::next_permutation(p.begin(), p.end()));
        for (int g1 = 0; g1 < D; ++g1)
            for (int g2 = 0; g2 < D; ++g2)
                if (g1 != g2 && data.link[static_cast<size_t>(g1) * D + g2] > 0) pairs.push_back({g1, g2});
    }

    // returns the minimum; gpu [L*D] the argmin
    double solve(const Ilp2Data& data, std::vector<int>& gpu) const {
        const int L = data.L, P = static_cast<int>(perms.size());
        std::vector<double> V(P, 0.0), next(P);
        std::vector<int> parent(static_cast<size_t>(L) * P, 0);  // [l][s]: best p of layer l-1
        for (int l = 0; l + 1 < L; ++l) {
            const double* C = data.C.data() + static_cast<size_t>(l) * D * D;
            for (int s = 0; s < P; ++s) {
                double best = kInf;
                int arg = 0;
                for (int q = 0; q < P; ++q) {
                    if (!(V[q] < best)) continue;  // u >= 0: cannot beat best
                    double u = 0;
                    for (const auto& [g1, g2] : pairs) {
                        u = std::max(u, data.link[static_cast<size_t>(g1) * D + g2] *
                                            C[inverse[q][g1] * D + inverse[s][g2]]);
                        if (V[q] + u >= best) break;
                    }
                    if (V[q] + u < best) {
                        best = V[q] + u;
                        arg = q;
                    }
                }
                next[s] = best;
                parent[static_cast<size_t>(l + 1) * P + s] = arg;
            }
            V.swap(next);
        }
        int s = static_cast<int>(std::min_element(V.begin(), V.end()) - V.begin());
        const double value = V[s];
        gpu.assign(static_cast<size_t>(L) * D, 0);
        for (int l = L - 1; l >= 0; --l) {
            for (int c = 0; c < D; ++c) gpu[static_cast<size_t>(l) * D + c] = perms[s][c];
            if (l > 0) s = parent[static_cast<size_t>(l) * P + s];
        }
        return value;
    }
};

// ILP 2 without Eq 13, solved exactly by the chain DP: its value bounds ILP 2 from below, and its answer is
// optimal for ILP 2 when it meets the memory band (it then replaces the incumbent if better). A Lagrangian
// version (memory prices per GPU in the DP, subgradient steps) was tried and dropped: on skewed cluster sizes
// its dual never rose above this unpriced value (3100 against an optimum of 5090 at D = 4, L = 8).
struct DpBound {
    bool ran = false;
    double bound = 0;
};
DpBound chain_dp_bound(const Ilp2Data& data, double band, double max_seconds, std::vector<int>& gpu, Ilp2Key& key) {
    DpBound out;
    if (data.D > kChainDpMaxDevices || data.L < 2 || !data.has_traffic) return out;
    const ChainDp dp(data);
    std::vector<int> candidate;
    out.ran = true;
    out.bound = dp.solve(data, candidate);
    // the DP answer, and the DP answer repaired for memory by the local search, as incumbents
    for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1) local_search(data, candidate, max_seconds);
        const Ilp2Key candidate_key = full_key(data, candidate);
        if (!less_tol(band, candidate_key.memory_dev) && less_tol(candidate_key.traffic, key.traffic)) {
            gpu = candidate;
            key = candidate_key;
        }
    }
    out.bound = std::min(out.bound, key.traffic);
    return out;
}

// y[l,c,g]'s column: cluster c of layer l on GPU g (columns 0 .. L*D*D-1, add_y_columns)
inline int y_col(int D, int l, int c, int g) { return (l * D + c) * D + g; }

// gpu [L*D] from y values; empty when not a permutation per layer
std::vector<int> gpu_from_y(const std::vector<double>& values, int L, int D, int y0) {
    std::vector<int> gpu(static_cast<size_t>(L) * D, -1);
    for (int l = 0; l < L; ++l) {
        std::vector<uint8_t> used(D, 0);
        for (int c = 0; c < D; ++c) {
            for (int g = 0; g < D; ++g)
                if (values[y0 + y_col(D, l, c, g)] > 0.5) {
                    if (gpu[static_cast<size_t>(l) * D + c] >= 0 || used[g]) return {};
                    gpu[static_cast<size_t>(l) * D + c] = g;
                    used[g] = 1;
                }
            if (gpu[static_cast<size_t>(l) * D + c] < 0) return {};
        }
    }
    return gpu;
}

// y[l,c,g] binaries as columns 0 .. L*D*D-1 (call first, on an empty model)
void add_y_columns(ilp::MipModel& m, const Ilp2Data& data) {
    PROPHET_ASSERT(m.num_cols() == 0);
    for (int i = 0; i < data.L * data.D * data.D; ++i) m.add_binary();
}

// permutation rows per layer and the memory rows: |mem_g - target| <= v (v_col >= 0, phase A) or the integral
// band [target - band, target + band] (v_col < 0, phase B); mem_g = sum_l sum_c size[l,c] y[l,c,g]
void add_assignment_rows(ilp::MipModel& m, const Ilp2Data& data, double band, int v_col) {
    const int L = data.L, D = data.D;
    auto y = [&](int l, int c, int g) { return y_col(D, l, c, g); };
    std::vector<int> cols;
    std::vector<double> coefs;
    for (int l = 0; l < L; ++l)
        for (int a = 0; a < D; ++a) {
            cols.clear();
            for (int b = 0; b < D; ++b) cols.push_back(y(l, a, b));  // cluster a on one GPU
            m.add_row(cols, std::vector<double>(D, 1.0), 1.0, 1.0);
            cols.clear();
            for (int b = 0; b < D; ++b) cols.push_back(y(l, b, a));  // GPU a holds one cluster
            m.add_row(cols, std::vector<double>(D, 1.0), 1.0, 1.0);
        }
    for (int g = 0; g < D; ++g) {
        cols.clear();
        coefs.clear();
        for (int l = 0; l < L; ++l)
            for (int c = 0; c < D; ++c) {
                cols.push_back(y(l, c, g));
                coefs.push_back(data.size[static_cast<size_t>(l) * D + c]);
            }
        if (v_col >= 0) {
            cols.push_back(v_col);
            coefs.push_back(-1.0);
            m.add_row(cols, coefs, -ilp::infinity(), data.target);  // mem_g - v <= target
            coefs.back() = 1.0;
            m.add_row(cols, coefs, data.target, ilp::infinity());   // mem_g + v >= target
        } else {
            const double lo = std::ceil(data.target - band - 1e-9), hi = std::floor(data.target + band + 1e-9);
            m.add_row(cols, coefs, lo, hi);
        }
    }
}

std::vector<double> y_values(const std::vector<int>& gpu, int L, int D, int num_cols) {
    std::vector<double> values(num_cols, 0.0);
    for (int l = 0; l < L; ++l)
        for (int c = 0; c < D; ++c) values[y_col(D, l, c, gpu[static_cast<size_t>(l) * D + c])] = 1;
    return values;
}

// z-RLT's block of layer pair l: z[c1,g1,c2,g2] = y[l,c1,g1] y[l+1,c2,g2], D^4 columns from `first`
struct ZBlock {
    int first = -1, D = 0;
    int operator()(int c1, int g1, int c2, int g2) const { return first + ((c1 * D + g1) * D + c2) * D + g2; }
};

// Row scratch of one model being built: `cols`, `coefs` are reused row after row.
struct RowScratch {
    std::vector<int> cols;
    std::vector<double> coefs;
};

// compact formulation, layer pair l: u_l >= link (sum_{c2} C[c1,c2] y[l+1,c2,g2] - M_c1 (1 - y[l,c1,g1])) for
// every costly (g1, g2) and cluster c1 (side 0), and the mirror rows per c2 (side 1)
void add_compact_pair_rows(ilp::MipModel& m, const Ilp2Data& data, int l, int u_col, double scale, RowScratch& r) {
    const int D = data.D;
    const double* link = data.link.data();
    for (int side = 0; side < 2; ++side)
        for (int g1 = 0; g1 < D; ++g1)
            for (int g2 = 0; g2 < D; ++g2) {
                const double lc = link[g1 * D + g2];
                if (g1 == g2 || lc == 0) continue;
                for (int a = 0; a < D; ++a) {
                    // side 0: a = c1 fixed on g1, sum over c2 on g2; side 1: a = c2 fixed on g2
                    double big_m = 0;
                    r.cols.assign(1, u_col);
                    r.coefs.assign(1, 1.0);
                    for (int b = 0; b < D; ++b) {
                        const double c = side == 0 ? data.c_at(l, a, b) : data.c_at(l, b, a);
                        if (c == 0) continue;
                        big_m = std::max(big_m, c);
                        r.cols.push_back(side == 0 ? y_col(D, l + 1, b, g2) : y_col(D, l, b, g1));
                        r.coefs.push_back(-lc * c / scale);
                    }
                    if (big_m == 0) continue;
                    r.cols.push_back(side == 0 ? y_col(D, l, a, g1) : y_col(D, l + 1, a, g2));
                    r.coefs.push_back(-lc * big_m / scale);
                    m.add_row(r.cols, r.coefs, -lc * big_m / scale, ilp::infinity());
                }
            }
}

// Level-1 RLT of layer pair l: each assignment row of one layer times each y of the other layer. With them,
// z >= y1 + y2 - 1 holds in the LP too (z[g1,g2] = y1 - sum_{g2' != g2} z[g1,g2'] >= y1 - sum_{g2' != g2}
// y[l+1,c2,g2'] = y1 + y2 - 1), and the LP can no longer park every pair on the diagonal
// (sum_{c1,c2} z[.,g1,.,g2] = 1: one cluster pair per GPU pair).
void add_rlt_rows(ilp::MipModel& m, int D, int l, const ZBlock& z, RowScratch& r) {
    auto add_sum_row = [&](int y) {  // sum(cols) - y = 0
        r.cols.push_back(y);
        r.coefs.assign(r.cols.size(), 1.0);
        r.coefs.back() = -1.0;
        m.add_row(r.cols, r.coefs, 0.0, 0.0);
    };
    for (int c1 = 0; c1 < D; ++c1)
        for (int g1 = 0; g1 < D; ++g1) {
            for (int c2 = 0; c2 < D; ++c2) {
                r.cols.clear();
                for (int g2 = 0; g2 < D; ++g2) r.cols.push_back(z(c1, g1, c2, g2));
                add_sum_row(y_col(D, l, c1, g1));  // sum_g2 z = y[l,c1,g1]
            }
            for (int g2 = 0; g2 < D; ++g2) {
                r.cols.clear();
                for (int c2 = 0; c2 < D; ++c2) r.cols.push_back(z(c1, g1, c2, g2));
                add_sum_row(y_col(D, l, c1, g1));  // sum_c2 z = y[l,c1,g1]
            }
        }
    for (int c2 = 0; c2 < D; ++c2)
        for (int g2 = 0; g2 < D; ++g2) {
            for (int c1 = 0; c1 < D; ++c1) {
                r.cols.clear();
                for (int g1 = 0; g1 < D; ++g1) r.cols.push_back(z(c1, g1, c2, g2));
                add_sum_row(y_col(D, l + 1, c2, g2));  // sum_g1 z = y[l+1,c2,g2]
            }
            for (int g1 = 0; g1 < D; ++g1) {
                r.cols.clear();
                for (int c1 = 0; c1 < D; ++c1) r.cols.push_back(z(c1, g1, c2, g2));
                add_sum_row(y_col(D, l + 1, c2, g2));  // sum_c1 z = y[l+1,c2,g2]
            }
        }
}

// z-RLT's epigraph of layer pair l: u_l >= sum_{c1,c2} C link z / scale for every ordered pair g1 != g2 with a cost
void add_rlt_epigraph(ilp::MipModel& m, const Ilp2Data& data, int l, int u_col, const ZBlock& z, double scale,
                      RowScratch& r) {
    const int D = data.D;
    for (int g1 = 0; g1 < D; ++g1)
        for (int g2 = 0; g2 < D; ++g2) {
            const double lc = data.link[g1 * D + g2];
            if (g1 == g2 || lc == 0) continue;
            r.cols.assign(1, u_col);
            r.coefs.assign(1, 1.0);
            for (int c1 = 0; c1 < D; ++c1)
                for (int c2 = 0; c2 < D; ++c2) {
                    if (data.c_at(l, c1, c2) == 0) continue;
                    r.cols.push_back(z(c1, g1, c2, g2));
                    r.coefs.push_back(-data.c_at(l, c1, c2) * lc / scale);
                }
            if (r.cols.size() > 1) m.add_row(r.cols, r.coefs, 0.0, ilp::infinity());
        }
}

// z-RLT's valid cuts of layer pair l. (a) One (g1, g2) carries all of C[c1,c2], and that pair costs at least this
// share: u_l >= C[c1,c2] sum_{g1 != g2} link z[c1,.,c2,.]. (b) A source cluster's outflow (a target's inflow) is
// spread over at most D - 1 ordered pairs: (D - 1) u_l >= its total cost.
void add_rlt_cuts(ilp::MipModel& m, const Ilp2Data& data, int l, int u_col, const ZBlock& z, double scale,
                  RowScratch& r) {
    const int D = data.D;
    // the terms of cluster pair (c1, c2) over every ordered device pair with a cost: C[c1,c2] link z
    auto add_cluster_pair_terms = [&](int c1, int c2) {
        for (int g1 = 0; g1 < D; ++g1)
            for (int g2 = 0; g2 < D; ++g2) {
                const double lc = data.link[g1 * D + g2];
                if (g1 == g2 || lc == 0) continue;
                r.cols.push_back(z(c1, g1, c2, g2));
                r.coefs.push_back(-data.c_at(l, c1, c2) * lc / scale);
            }
    };
    for (int c1 = 0; c1 < D; ++c1)
        for (int c2 = 0; c2 < D; ++c2) {
            if (data.c_at(l, c1, c2) == 0) continue;
            r.cols.assign(1, u_col);
            r.coefs.assign(1, 1.0);
            add_cluster_pair_terms(c1, c2);
            if (r.cols.size() > 1) m.add_row(r.cols, r.coefs, 0.0, ilp::infinity());
        }
    for (int side = 0; side < 2 && D > 2; ++side)
        for (int a = 0; a < D; ++a) {
            r.cols.assign(1, u_col);
            r.coefs.assign(1, D - 1.0);
            for (int b = 0; b < D; ++b) {
                const int c1 = side == 0 ? a : b, c2 = side == 0 ? b : a;
                if (data.c_at(l, c1, c2) != 0) add_cluster_pair_terms(c1, c2);
            }
            if (r.cols.size() > 1) m.add_row(r.cols, r.coefs, 0.0, ilp::infinity());
        }
}

// the objective's unit: the largest layer pair's total traffic times the largest link cost, so that every
// coefficient C * link / scale is <= 1; pair_has_traffic [L-1] gets which pairs carry any traffic
double phase_b_scale(const Ilp2Data& data, std::vector<uint8_t>& pair_has_traffic) {
    const int L = data.L, D = data.D;
    double max_link = 0;
    for (double v : data.link) max_link = std::max(max_link, v);
    double scale = 0;
    pair_has_traffic.assign(std::max(0, L - 1), 0);
    for (int l = 0; l + 1 < L; ++l) {
        double total = 0;
        for (int i = 0; i < D * D; ++i) total += data.C[static_cast<size_t>(l) * D * D + i];
        scale = std::max(scale, total * max_link);
        pair_has_traffic[l] = total > 0;
    }
    return scale;
}

// ILP 2's phase B model (min sum_l u_l inside the memory band), columns y first (see add_y_columns). Two exact
// formulations (both checked against brute force in tests/balance/test_moetuner_ilp2.cpp):
//  - "z-RLT" (formulation 1), the corrected ILP 2 of docs/policies-offline.md: z[l,c1,g1,c2,g2] =
//    y[l,c1,g1] y[l+1,c2,g2] with the four level-1 RLT families, u_l >= sum_{c1,c2} C link z / scale per ordered
//    GPU pair, plus two families of valid cuts; D^4 z per layer pair;
//  - "compact" (the default): one cluster per GPU means pair (g1, g2) carries exactly C[l, c1, c2] for the
//    clusters c1 on g1 and c2 on g2, so u_l >= link (sum_{c2} C[c1,c2] y[l+1,c2,g2] - M_c1 (1 - y[l,c1,g1])),
//    M_c1 = max_c2 C[c1,c2], for every (g1, g2, c1), and the mirror rows per c2, are exact for binary y; no z,
//    D^3 rows per layer pair. Its LP is weaker but solves in milliseconds where the z-RLT root LP takes Clp
//    0.2 s (D = 4, L = 4) to 50 s (D = 8, L = 4), so CBC explores far more nodes; measured, it proved more
//    instances and never ended worse (docs/policies-offline.md).
// Both also get sum_l u_l >= the chain DP's value when it ran. initial: the warm start from `gpu`.
struct PhaseBModel {
    ilp::MipModel model;
    double scale = 1;             // objective units: u_l = (traffic * link) / scale
    std::vector<double> initial;  // warm start
    bool rlt = false;
};

// the warm start from gpu [L*D]: its y, z (z-RLT) and u_l = the pair's cost / scale
void phase_b_warm_start(PhaseBModel& out, const Ilp2Data& data, const std::vector<int>& gpu,
                        const std::vector<uint8_t>& pair_has_traffic, const std::vector<int>& u_cols,
                        const std::vector<ZBlock>& z) {
    const int L = data.L, D = data.D;
    out.initial = y_values(gpu, L, D, out.model.num_cols());
    std::vector<double> scratch;
    for (int l = 0; l + 1 < L; ++l) {
        if (!pair_has_traffic[l]) continue;
        if (out.rlt) {
            for (int c1 = 0; c1 < D; ++c1)
                for (int c2 = 0; c2 < D; ++c2)
                    out.initial[z[l](c1, gpu[static_cast<size_t>(l) * D + c1], c2,
                                     gpu[static_cast<size_t>(l + 1) * D + c2])] = 1;
        }
        out.initial[u_cols[l]] = layer_pair_cost(data, gpu, l, scratch).first / out.scale;
    }
}

PhaseBModel build_phase_b(const Ilp2Data& data, double band, bool dp_ran, double dp_value, const std::vector<int>& gpu,
                          int formulation) {
    const int L = data.L, D = data.D;
    PhaseBModel out;
    ilp::MipModel& m = out.model;
    add_y_columns(m, data);
    add_assignment_rows(m, data, band, -1);
    std::vector<uint8_t> pair_has_traffic;
    const double scale = phase_b_scale(data, pair_has_traffic);
    out.scale = scale;
    out.rlt = formulation == 1;
    std::vector<int> u_cols(std::max(0, L - 1), -1);
    std::vector<ZBlock> z(std::max(0, L - 1));
    for (int l = 0; l + 1 < L; ++l) {
        if (!pair_has_traffic[l]) continue;
        u_cols[l] = m.add_col(0.0, ilp::infinity(), 1.0, false);
        if (out.rlt) {
            z[l] = {m.num_cols(), D};
            for (int i = 0; i < D * D * D * D; ++i) m.add_col(0.0, 1.0, 0.0, false);
        }
    }
    RowScratch r;
    for (int l = 0; l + 1 < L; ++l) {
        if (!pair_has_traffic[l]) continue;
        if (!out.rlt) {
            add_compact_pair_rows(m, data, l, u_cols[l], scale, r);
            continue;
        }
        add_rlt_rows(m, D, l, z[l], r);
        add_rlt_epigraph(m, data, l, u_cols[l], z[l], scale, r);
        add_rlt_cuts(m, data, l, u_cols[l], z[l], scale, r);
    }
    if (dp_ran) {
        // the DP value bounds sum_l u_l from below
        r.cols.clear();
        for (int l = 0; l + 1 < L; ++l)
            if (u_cols[l] >= 0) r.cols.push_back(u_cols[l]);
        m.add_row(r.cols, std::vector<double>(r.cols.size(), 1.0), dp_value / scale * (1 - 1e-9), ilp::infinity());
    }
    phase_b_warm_start(out, data, gpu, pair_has_traffic, u_cols, z);
    return out;
}

void check_clusters(const std::vector<int>& clusters, int L, int D, int E) {
    if (clusters.size() != static_cast<size_t>(L) * E)
        throw_config_error("moetuner.clusters", std::to_string(clusters.size()) + " values",
                           "must hold L * E = " + std::to_string(static_cast<size_t>(L) * E), "");
    for (int c : clusters)
        if (c < 0 || c >= D)
            throw_config_error("moetuner.clusters", std::to_string(c), "clusters must be in [0, D)", "");
}

// The incumbent assignment gpu [L*D] and its key, improved by the exact phases in place.
struct Ilp2Incumbent {
    std::vector<int> gpu;
    Ilp2Key key;
};

// Phase A: the smallest achievable memory deviation (GPUs are interchangeable here, so layer 0's clusters are
// fixed to the identity). Takes the answer when its key is better; returns whether the deviation is proven least.
bool solve_phase_a(const Ilp2Data& data, ilp::MipSettings settings, const Ilp2Switches& switches, double search_s,
                   Ilp2Incumbent& best) {
    const int L = data.L, D = data.D;
    ilp::MipModel m;
    add_y_columns(m, data);
    const int v_col = m.add_col(data.memory_lb, ilp::infinity(), 1.0, false);
    add_assignment_rows(m, data, 0.0, v_col);
    // symmetry: GPUs are interchangeable for memory, so relabel any solution to put layer 0 on identity
    std::vector<int> start_gpu = best.gpu;
    {
        std::vector<int> relabel(D);
        for (int c = 0; c < D; ++c) relabel[best.gpu[c]] = c;  // layer 0: GPU gpu[c] -> c
        for (auto& g : start_gpu) g = relabel[g];
    }
    for (int c = 0; c < D; ++c)
        for (int g = 0; g < D; ++g)
            if (g != c) m.col_ub[y_col(D, 0, c, g)] = 0.0;  // layer 0 on the identity
    std::vector<double> initial = y_values(start_gpu, L, D, m.num_cols());
    initial[v_col] = best.key.memory_dev;
    settings.initial = &initial;
    const ilp::MipResult phase_a = ilp::solve_mip(m, settings);
    if (!phase_a.has_solution) return false;
    std::vector<int> candidate = gpu_from_y(phase_a.values, L, D, 0);
    if (!candidate.empty()) {
        if (!switches.ilp_only) local_search(data, candidate, search_s);  // keeps memory
        const Ilp2Key candidate_key = full_key(data, candidate);
        if (candidate_key < best.key) best = {candidate, candidate_key};
    }
    return phase_a.optimal;
}

// What phase B proved: a lower bound on sum_l u_l (raw units) and whether the incumbent is optimal.
struct PhaseBOutcome {
    bool solved = false;  // CBC returned a solution
    double bound = 0;
    bool optimal = false;
};

// Phase B: min sum_l u_l inside the memory band, from the incumbent; takes the answer when it keeps the band and
// (unless ilp_only) lowers the traffic
PhaseBOutcome solve_phase_b(const Ilp2Data& data, ilp::MipSettings settings, const Ilp2Switches& switches, double band,
                            bool dp_ran, double dp_value, Ilp2Incumbent& best) {
    const int L = data.L, D = data.D;
    const PhaseBModel pb = build_phase_b(data, band, dp_ran, dp_value, best.gpu, switches.formulation);
    settings.initial = &pb.initial;
    // measured (docs/policies-offline.md): strong branching probes are slow hot-started dual simplex runs on this
    // degenerate LP; cuts help prove small instances and stall the root above D = 4
    settings.strong_branching = false;
    settings.cuts = D <= 4;
    const ilp::MipResult phase_b = ilp::solve_mip(pb.model, settings);
    PhaseBOutcome out;
    if (!phase_b.has_solution) return out;
    std::vector<int> candidate = gpu_from_y(phase_b.values, L, D, 0);
    if (!candidate.empty()) {
        const Ilp2Key candidate_key = full_key(data, candidate);
        if (!less_tol(band, candidate_key.memory_dev) &&
            (switches.ilp_only || less_tol(candidate_key.traffic, best.key.traffic)))
            best = {candidate, candidate_key};
    }
    out.solved = true;
    out.bound = phase_b.bound * pb.scale;
    out.optimal = phase_b.optimal;
    return out;
}

// The traffic half of the exact solve inside the memory band: the chain DP bound, then phase B unless the DP
// already settled it. bound, optimal: what was proven (memory_proven: whether the band itself is least).
void solve_traffic_exactly(const Ilp2Data& data, const ilp::MipSettings& settings, const Ilp2Switches& switches,
                           double gap, double band, double search_s, bool memory_proven, Ilp2Incumbent& best,
                           double& bound, bool& optimal) {
    // ILP 2 without Eq 13 by the chain DP (small D only): a lower bound, often the optimum itself
    DpBound dp;
    if (switches.chain_dp && !switches.ilp_only) dp = chain_dp_bound(data, band, search_s, best.gpu, best.key);
    if (dp.ran) {
        bound = std::min(dp.bound, best.key.traffic);
        if (best.key.traffic <= dp.bound * (1.0 + gap) + 1e-12 * std::max(1.0, dp.bound)) {
            optimal = memory_proven;
            return;
        }
    }
    const PhaseBOutcome b = solve_phase_b(data, settings, switches, band, dp.ran, dp.bound, best);
    if (!b.solved) return;
    bound = std::min(best.key.traffic, std::max(bound, b.bound));
    optimal = memory_proven && b.optimal;
}

}  // namespace

Ilp2Result moetuner_ilp2(const std::vector<int>& clusters, const std::vector<double>& transitions, int num_layers,
                         int num_devices, int num_experts, const std::vector<double>& link_cost,
                         const BalanceOptions& options) {
    return moetuner_ilp2(clusters, transitions, num_layers, num_devices, num_experts, link_cost, options,
                         Ilp2Switches());
}

Ilp2Result moetuner_ilp2(const std::vector<int>& clusters, const std::vector<double>& transitions, int num_layers,
                         int num_devices, int num_experts, const std::vector<double>& link_cost,
                         const BalanceOptions& options, const Ilp2Switches& switches) {
    const int L = num_layers, D = num_devices, E = num_experts;
    const int64_t start = now_ns();
    std::vector<double> dummy_loads(static_cast<size_t>(L) * E, 0.0);
    validate_moetuner(dummy_loads, transitions, L, D, E, link_cost, options);
    check_clusters(clusters, L, D, E);

    const Ilp2Data data = make_ilp2_data(clusters, transitions, L, D, E, link_cost);
    Ilp2Result out;
    out.exact = D <= options.ilp2_exact_max_devices;
    // each local search may take a quarter of the time limit (3 starts, plus one from the DP or phase A)
    const double search_s = options.ilp_time_limit_s / 4;
    Ilp2Incumbent best;
    best.gpu = switches.ilp_only ? heuristic_starts(data)[0] : heuristic_assignment(data, search_s);
    best.key = full_key(data, best.gpu);
    bool optimal = out.exact && !data.has_traffic && !less_tol(data.memory_lb, best.key.memory_dev);
    double bound = 0;

    if (out.exact) {
        ilp::MipSettings settings;
        settings.relative_gap = options.ilp_gap;
        settings.time_limit_s = options.ilp_time_limit_s;
        bool memory_proven = !less_tol(data.memory_lb, best.key.memory_dev);
        if (!memory_proven) memory_proven = solve_phase_a(data, settings, switches, search_s, best);
        const double band = best.key.memory_dev;
        if (data.has_traffic)
            solve_traffic_exactly(data, settings, switches, options.ilp_gap, band, search_s, memory_proven, best, bound,
                                  optimal);
        else
            optimal = memory_proven;
    }
    out.gpu_of_cluster = best.gpu;
    out.objective = best.key.traffic;
    out.bound = data.has_traffic ? bound : 0.0;
    out.memory_deviation = best.key.memory_dev;
    out.optimal = optimal;
    out.solve_s = seconds_since(start);
    return out;
}

}  // namespace prophet
