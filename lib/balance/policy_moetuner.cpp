// policy_moetuner.cpp: MoETuner (Go & Mahajan, arXiv 2502.06643) two-stage ILP, in the corrected form of
// docs/policies-offline.md, solved with CBC; and the joint ILP that measures the two-stage gap.
//
// ILP 1 (per layer, layers are independent): partition E experts into D non-empty clusters (one per GPU)
//   x[c,e] in {0,1}, sum_c x[c,e] = 1 (the partition constraint the paper lacks), sum_e x[c,e] >= 1 (Eq 7),
//   T_c = sum_e P[e] x[c,e]; "minmax": min t, t >= T_c; "sumdev": min sum_c d_c, d_c >= |T_c - mean| (Eq 1,
//   linearised). Loads are divided by the mean cluster load, so objectives are O(1) for CBC.
//   Symmetry: clusters are labelled by their first member in descending-load order, so x[c, e] = 0 whenever
//   c > rank(e) (the heaviest expert is pinned to cluster 0). Both objectives are invariant under relabelling
//   clusters, so no optimum is lost. (The full ordering rows, x[c, rank r] <= sum_{r' < r} x[c-1, rank r'],
//   were measured: no gain up to E = 64 and a root LP that Clp could not finish in 16 s at E = 256, D = 32.)
//   Bound: t >= max(1, max_e w_e) (in mean units); sumdev: sum d >= 2 max(0, max_e w_e - 1).
//   Warm start: LPT plus move/swap local search.
// ILP 2 (all layers together): cluster c of layer l onto GPU g, y[l,c,g] a permutation per layer; minimise
//   sum_l u_l with u_l >= the link-cost-weighted tokens on every ordered GPU pair g1 != g2 between layers l and
//   l+1 (C from the transitions and ILP 1's clusters, with the l+1 index fix). Memory (Eq 13): each GPU holds
//   E*L/D experts over all layers; clusters have free sizes, so that may be infeasible: the planner first finds
//   the smallest achievable max_g |mem_g - E*L/D| (0 when reachable) and imposes it as a hard band.
//   Exact when D <= ilp2_exact_max_devices: a heuristic incumbent, the chain DP without Eq 13 (D <= 6: a lower
//   bound, and often the optimum), then CBC on the compact or the z-RLT model (build_phase_b) with the DP bound.
//   Above that limit the heuristic alone: three deterministic starts (identity, memory-LPT, layer-by-layer
//   traffic greedy), each improved by local search on the lexicographic key (memory deviation, sum of squared
//   memory deviations, sum_l u_l, total cross cost).
// Joint ILP (small instances): w[l,e,g] with the partition, >= 1 per GPU, Eq 13, the load epigraph and the
//   traffic epigraph over z = w w' (RLT rows); objective = the dimensionless J of moetuner_joint_objective;
//   warm-started from the two-stage answer, so J(joint) <= J(two-stage) always.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "balance/ilp_cbc.h"
#include "balance/policies.h"
#include "core/error.h"
#include "core/timer.h"

namespace prophet {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double seconds_since(int64_t start_ns) { return static_cast<double>(now_ns() - start_ns) * 1e-9; }

// a < b by more than a relative tolerance (so local searches terminate despite rounding)
bool less_tol(double a, double b) { return a < b - 1e-12 * std::max(1.0, std::max(std::fabs(a), std::fabs(b))); }

void validate_objective_options(const BalanceOptions& options) {
    if (options.ilp_objective != "minmax" && options.ilp_objective != "sumdev")
        throw_config_error("balance.ilp_objective", options.ilp_objective, "must be minmax or sumdev",
                           "--set balance.ilp_objective=minmax");
    if (!std::isfinite(options.ilp_gap) || options.ilp_gap < 0)
        throw_config_error("balance.ilp_gap", std::to_string(options.ilp_gap), "must be a finite value >= 0",
                           "e.g. 0.025 (MoETuner's Gurobi tolerance)");
    if (!std::isfinite(options.ilp_time_limit_s) || options.ilp_time_limit_s <= 0)
        throw_config_error("balance.ilp_time_limit_s", std::to_string(options.ilp_time_limit_s), "must be > 0",
                           "e.g. 10");
    if (options.ilp2_exact_max_devices < 0)
        throw_config_error("balance.ilp2_exact_max_devices", std::to_string(options.ilp2_exact_max_devices),
                           "must be >= 0", "e.g. 8");
}

void validate_values(const std::vector<double>& values, const std::string& name) {
    for (double v : values)
        if (!std::isfinite(v) || v < 0)
            throw_config_error(name, std::to_string(v), "values must be finite and >= 0", "");
}

void validate_moetuner(const std::vector<double>& loads, const std::vector<double>& transitions, int L, int D, int E,
                       const std::vector<double>& link_cost, const BalanceOptions& options) {
    if (L < 1 || D < 1 || E < 1)
        throw_config_error("model", "L=" + std::to_string(L) + " D=" + std::to_string(D) + " E=" + std::to_string(E),
                           "moetuner needs at least one layer, device and expert", "");
    if (E < D)
        throw_config_error("model.num_experts", std::to_string(E),
                           "moetuner puts at least one expert on each of the D = " + std::to_string(D) +
                               " GPUs (its Eq 7), so it needs E >= D",
                           "use fewer devices or another policy");
    if (loads.size() != static_cast<size_t>(L) * E)
        throw_config_error("moetuner.expert_loads", std::to_string(loads.size()) + " values",
                           "must hold L * E = " + std::to_string(static_cast<size_t>(L) * E), "pass loads [L][E]");
    if (!transitions.empty() && transitions.size() != static_cast<size_t>(L - 1) * E * E)
        throw_config_error("moetuner.transitions", std::to_string(transitions.size()) + " values",
                           "must be empty or hold (L-1) * E * E = " +
                               std::to_string(static_cast<size_t>(L - 1) * E * E),
                           "pass transitions [L-1][E][E]");
    if (link_cost.size() != static_cast<size_t>(D) * D)
        throw_config_error("moetuner.link_cost", std::to_string(link_cost.size()) + " values",
                           "must hold D * D = " + std::to_string(D * D), "pass link_cost [D][D]");
    validate_values(loads, "moetuner.expert_loads");
    validate_values(transitions, "moetuner.transitions");
    validate_values(link_cost, "moetuner.link_cost");
    validate_objective_options(options);
}

// ---- ILP 1 ---------------------------------------------------------------------------------------------------

// objective of cluster loads T [D] (raw units) around mean
double cluster_objective(const std::vector<double>& T, double mean, bool minmax) {
    double v = 0;
    for (double t : T) v = minmax ? std::max(v, t) : v + std::fabs(t - mean);
    return v;
}

// LPT (descending load to the lightest cluster; the first D experts open the D clusters, so none is empty),
// then first-improvement moves and swaps on the key (objective, sum of squared cluster loads).
std::vector<int> greedy_clusters(const std::vector<double>& w, int D, bool minmax) {
    const int E = static_cast<int>(w.size());
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
    std::vector<int> cluster(E, -1), size(D, 0);
    std::vector<double> T(D, 0.0);
    for (int e : order) {
        // an empty cluster first (keeps Eq 7), else the lightest
        int best = -1;
        for (int c = 0; c < D && best < 0; ++c)
            if (size[c] == 0) best = c;
        if (best < 0) {
            best = 0;
            for (int c = 1; c < D; ++c)
                if (T[c] < T[best]) best = c;
        }
        cluster[e] = best;
        T[best] += w[e];
        ++size[best];
    }
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    const double mean = total / D;
    auto key_of = [&](const std::vector<double>& loads) {
        double sq = 0;
        for (double t : loads) sq += t * t;
        return std::make_pair(cluster_objective(loads, mean, minmax), sq);
    };
    auto better = [](const std::pair<double, double>& a, const std::pair<double, double>& b) {
        if (less_tol(a.first, b.first)) return true;
        if (less_tol(b.first, a.first)) return false;
        return less_tol(a.second, b.second);
    };
    // bounded first-improvement search: every accepted step strictly lowers the key
    std::vector<std::vector<int>> members(D);
    for (int e = 0; e < E; ++e) members[cluster[e]].push_back(e);
    auto current = key_of(T);
    int64_t evaluations = 0;
    const int64_t max_evaluations = 20'000'000;
    bool improved = true;
    while (improved && evaluations < max_evaluations) {
        improved = false;
        for (int a = 0; a < D && !improved; ++a) {
            for (int b = 0; b < D && !improved; ++b) {
                if (a == b || !(T[a] > T[b])) continue;  // only heavier -> lighter can help either key
                for (size_t i = 0; i < members[a].size() && !improved; ++i) {
                    const int e = members[a][i];
                    // move e: a -> b
                    if (members[a].size() > 1) {
                        ++evaluations;
                        std::vector<double> trial = T;
                        trial[a] -= w[e];
                        trial[b] += w[e];
                        const auto key = key_of(trial);
                        if (better(key, current)) {
                            members[a].erase(members[a].begin() + i);
                            members[b].push_back(e);
                            cluster[e] = b;
                            T = trial;
                            current = key;
                            improved = true;
                            break;
                        }
                    }
                    // swap e (in a) with f (in b), f lighter
                    for (size_t j = 0; j < members[b].size(); ++j) {
                        const int f = members[b][j];
                        if (!(w[f] < w[e])) continue;
                        ++evaluations;
                        std::vector<double> trial = T;
                        trial[a] += w[f] - w[e];
                        trial[b] += w[e] - w[f];
                        const auto key = key_of(trial);
                        if (better(key, current)) {
                            members[a][i] = f;
                            members[b][j] = e;
                            cluster[e] = b;
                            cluster[f] = a;
                            T = trial;
                            current = key;
                            improved = true;
                            break;
                        }
                    }
                }
            }
        }
    }
    return cluster;
}

}  // namespace

Ilp1Result moetuner_ilp1_layer(const double* loads, int num_experts, int num_devices, const BalanceOptions& options) {
    return moetuner_ilp1_layer(loads, num_experts, num_devices, options, false);
}

Ilp1Result moetuner_ilp1_layer(const double* loads, int num_experts, int num_devices, const BalanceOptions& options,
                               bool ilp_only) {
    const int E = num_experts, D = num_devices;
    validate_objective_options(options);
    if (D < 1 || E < D)
        throw_config_error("model.num_experts", std::to_string(E),
                           "ILP 1 needs E >= D = " + std::to_string(D) + " (one non-empty cluster per GPU)", "");
    const bool minmax = options.ilp_objective == "minmax";
    const int64_t start = now_ns();
    Ilp1Result out;
    const double total = std::accumulate(loads, loads + E, 0.0);
    const double mean = total / D;  // T̄ of Eq 3
    std::vector<double> w(E);       // loads in units of the mean cluster load
    for (int e = 0; e < E; ++e) w[e] = mean > 0 ? loads[e] / mean : 0.0;

    std::vector<int> greedy = greedy_clusters(w, D, minmax);
    auto evaluate = [&](const std::vector<int>& cluster) {
        std::vector<double> T(D, 0.0);
        for (int e = 0; e < E; ++e) T[cluster[e]] += loads[e];
        return cluster_objective(T, mean, minmax);
    };
    if (!(mean > 0) || D == 1) {
        // nothing to balance (no load, or one cluster)
        out.cluster = greedy;
        out.objective = out.bound = evaluate(greedy);
        out.optimal = true;
        out.solve_s = seconds_since(start);
        return out;
    }

    // experts by descending load: rank r -> expert order[r]; symmetry breaking works on ranks
    std::vector<int> order(E), rank(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
    for (int r = 0; r < E; ++r) rank[order[r]] = r;
    const double w_max = w[order[0]];

    // relabel a partition so that clusters are numbered by their first member in rank order
    auto canonical = [&](const std::vector<int>& cluster) {
        std::vector<int> label(D, -1);
        int next = 0;
        for (int r = 0; r < E; ++r) {
            const int c = cluster[order[r]];
            if (label[c] < 0) label[c] = next++;
        }
        std::vector<int> out_cluster(E);
        for (int e = 0; e < E; ++e) out_cluster[e] = label[cluster[e]];
        return out_cluster;
    };
    greedy = canonical(greedy);

    ilp::MipModel m;
    auto x = [&](int c, int e) { return c * E + e; };  // x[c,e], columns 0 .. D*E-1
    for (int c = 0; c < D; ++c)
        for (int e = 0; e < E; ++e) {
            const int col = m.add_binary();
            if (c > rank[e]) m.col_ub[col] = 0.0;  // cluster c's first member has rank >= c
        }
    int t_col = -1;
    std::vector<int> d_cols;
    if (minmax) {
        t_col = m.add_col(std::max(1.0, w_max), ilp::infinity(), 1.0, false);
    } else {
        for (int c = 0; c < D; ++c) d_cols.push_back(m.add_col(0.0, ilp::infinity(), 1.0, false));
    }
    std::vector<int> cols;
    std::vector<double> coefs;
    // partition: sum_c x[c,e] = 1
    for (int e = 0; e < E; ++e) {
        cols.clear();
        coefs.clear();
        for (int c = 0; c < D; ++c) {
            cols.push_back(x(c, e));
            coefs.push_back(1.0);
        }
        m.add_row(cols, coefs, 1.0, 1.0);
    }
    // Eq 7: sum_e x[c,e] >= 1; load rows
    for (int c = 0; c < D; ++c) {
        cols.clear();
        coefs.clear();
        for (int e = 0; e < E; ++e) {
            cols.push_back(x(c, e));
            coefs.push_back(1.0);
        }
        m.add_row(cols, coefs, 1.0, ilp::infinity());
        // T_c = sum_e w_e x[c,e]
        cols.clear();
        coefs.clear();
        for (int e = 0; e < E; ++e) {
            if (w[e] == 0) continue;
            cols.push_back(x(c, e));
            coefs.push_back(-w[e]);
        }
        if (minmax) {
            cols.push_back(t_col);  // t - T_c >= 0
            coefs.push_back(1.0);
            m.add_row(cols, coefs, 0.0, ilp::infinity());
        } else {
            cols.push_back(d_cols[c]);  // d_c - T_c >= -1
            coefs.push_back(1.0);
            m.add_row(cols, coefs, -1.0, ilp::infinity());
            for (size_t k = 0; k + 1 < coefs.size(); ++k) coefs[k] = -coefs[k];  // d_c + T_c >= 1
            m.add_row(cols, coefs, 1.0, ilp::infinity());
        }
    }
    if (!minmax) {
        cols.assign(d_cols.begin(), d_cols.end());
        coefs.assign(D, 1.0);
        m.add_row(cols, coefs, 2.0 * std::max(0.0, w_max - 1.0), ilp::infinity());
    }
    // warm start: the canonical greedy partition and its objective columns
    std::vector<double> start_values(m.num_cols(), 0.0);
    {
        std::vector<double> T(D, 0.0);
        for (int e = 0; e < E; ++e) {
            start_values[x(greedy[e], e)] = 1.0;
            T[greedy[e]] += w[e];
        }
        if (minmax) {
            start_values[t_col] = std::max(std::max(1.0, w_max), *std::max_element(T.begin(), T.end()));
        } else {
            for (int c = 0; c < D; ++c) start_values[d_cols[c]] = std::fabs(T[c] - 1.0);
        }
    }
    ilp::MipSettings settings;
    settings.relative_gap = options.ilp_gap;
    settings.time_limit_s = options.ilp_time_limit_s;
    settings.initial = ilp_only ? nullptr : &start_values;
    const ilp::MipResult result = ilp::solve_mip(m, settings);

    std::vector<int> cluster = greedy;
    if (ilp_only) cluster.assign(E, -1);  // tests: CBC's answer or nothing
    if (result.has_solution) {
        std::vector<int> candidate(E, -1);
        std::vector<int> size(D, 0);
        bool valid = true;
        for (int e = 0; e < E && valid; ++e) {
            int found = -1;
            for (int c = 0; c < D; ++c)
                if (result.values[x(c, e)] > 0.5) found = found < 0 ? c : -2;
            valid = found >= 0;
            candidate[e] = found;
            if (valid) ++size[found];
        }
        for (int c = 0; c < D && valid; ++c) valid = size[c] > 0;
        if (ilp_only || (valid && !less_tol(evaluate(greedy), evaluate(candidate)))) cluster = candidate;
    }
    out.cluster = cluster;
    if (std::find(cluster.begin(), cluster.end(), -1) != cluster.end() ||
        std::find(cluster.begin(), cluster.end(), -2) != cluster.end()) {
        out.objective = kInf;  // ilp_only and CBC's answer is not a partition
        out.solve_s = seconds_since(start);
        return out;
    }
    out.objective = evaluate(cluster);
    out.bound = std::min(out.objective, result.has_solution ? result.bound * mean : 0.0);
    out.optimal = result.optimal;  // CBC proved its incumbent (its own or the warm start) within the gap
    out.solve_s = seconds_since(start);
    return out;
}

namespace {

// ---- ILP 2 ---------------------------------------------------------------------------------------------------

struct Ilp2Data {
    int L = 0, D = 0, E = 0;
    std::vector<int> size;     // [L*D] experts in cluster c of layer l
    std::vector<double> C;     // [(L-1)*D*D] tokens from cluster c1 (layer l) to cluster c2 (layer l+1)
    std::vector<double> link;  // [D*D] link cost, diagonal forced to 0
    bool has_traffic = false;  // some C * link > 0
    double target = 0;         // E*L/D experts per GPU over all layers (Eq 13)
    double memory_lb = 0;      // smallest possible max_g |mem_g - target| (rounding)

    double c_at(int l, int c1, int c2) const { return C[(static_cast<size_t>(l) * D + c1) * D + c2]; }
};

Ilp2Data make_ilp2_data(const std::vector<int>& clusters, const std::vector<double>& transitions, int L, int D, int E,
                        const std::vector<double>& link_cost) {
    Ilp2Data data;
    data.L = L;
    data.D = D;
    data.E = E;
    data.size.assign(static_cast<size_t>(L) * D, 0);
    for (int l = 0; l < L; ++l)
        for (int e = 0; e < E; ++e) ++data.size[static_cast<size_t>(l) * D + clusters[static_cast<size_t>(l) * E + e]];
    data.link = link_cost;
    for (int g = 0; g < D; ++g) data.link[static_cast<size_t>(g) * D + g] = 0.0;
    data.C.assign(static_cast<size_t>(std::max(0, L - 1)) * D * D, 0.0);
    if (!transitions.empty()) {
        // C[l,c1,c2] = sum_{e1,e2} R[l,e1,e2] [cluster_l(e1) = c1] [cluster_{l+1}(e2) = c2]  (Eq 9 with l+1)
        for (int l = 0; l + 1 < L; ++l)
            for (int e1 = 0; e1 < E; ++e1) {
                const int c1 = clusters[static_cast<size_t>(l) * E + e1];
                for (int e2 = 0; e2 < E; ++e2) {
                    const double r = transitions[(static_cast<size_t>(l) * E + e1) * E + e2];
                    if (r == 0) continue;
                    const int c2 = clusters[static_cast<size_t>(l + 1) * E + e2];
                    data.C[(static_cast<size_t>(l) * D + c1) * D + c2] += r;
                }
            }
    }
    double max_link = 0, total_c = 0;
    for (double v : data.link) max_link = std::max(max_link, v);
    for (double v : data.C) total_c += v;
    data.has_traffic = max_link > 0 && total_c > 0;
    const int64_t total = static_cast<int64_t>(E) * L;
    data.target = static_cast<double>(total) / D;
    data.memory_lb = total % D == 0 ? 0.0 : std::max(std::ceil(data.target) - data.target,
                                                     data.target - std::floor(data.target));
    return data;
}

// lexicographic quality of an assignment
struct Ilp2Key {
    double memory_dev = 0;  // max_g |mem_g - target|
    double memory_sq = 0;   // sum_g (mem_g - target)^2
    double traffic = 0;     // sum_l u_l
    double total = 0;       // sum_l sum_{g1 != g2} link * traffic (tie-breaker for the bottleneck plateaus)
    bool operator<(const Ilp2Key& o) const {
        if (less_tol(memory_dev, o.memory_dev)) return true;
        if (less_tol(o.memory_dev, memory_dev)) return false;
        if (less_tol(memory_sq, o.memory_sq)) return true;
        if (less_tol(o.memory_sq, memory_sq)) return false;
        if (less_tol(traffic, o.traffic)) return true;
        if (less_tol(o.traffic, traffic)) return false;
        return less_tol(total, o.total);
    }
};

// (u_l, total cross cost) of layer pair l under gpu [L*D]
std::pair<double, double> layer_pair_cost(const Ilp2Data& data, const std::vector<int>& gpu, int l,
                                          std::vector<double>& scratch) {
    const int D = data.D;
    scratch.assign(static_cast<size_t>(D) * D, 0.0);
    for (int c1 = 0; c1 < D; ++c1) {
        const int g1 = gpu[static_cast<size_t>(l) * D + c1];
        for (int c2 = 0; c2 < D; ++c2) {
            const double v = data.c_at(l, c1, c2);
            if (v != 0) scratch[static_cast<size_t>(g1) * D + gpu[static_cast<size_t>(l + 1) * D + c2]] += v;
        }
    }
    double worst = 0, total = 0;
    for (int i = 0; i < D * D; ++i) {
        const double cost = scratch[i] * data.link[i];
        worst = std::max(worst, cost);
        total += cost;
    }
    return {worst, total};
}

std::vector<double> memory_of(const Ilp2Data& data, const std::vector<int>& gpu) {
    std::vector<double> mem(data.D, 0.0);
    for (int l = 0; l < data.L; ++l)
        for (int c = 0; c < data.D; ++c)
            mem[gpu[static_cast<size_t>(l) * data.D + c]] += data.size[static_cast<size_t>(l) * data.D + c];
    return mem;
}

void memory_key(const Ilp2Data& data, const std::vector<double>& mem, Ilp2Key& key) {
    key.memory_dev = 0;
    key.memory_sq = 0;
    for (double v : mem) {
        key.memory_dev = std::max(key.memory_dev, std::fabs(v - data.target));
        key.memory_sq += (v - data.target) * (v - data.target);
    }
}

Ilp2Key full_key(const Ilp2Data& data, const std::vector<int>& gpu) {
    Ilp2Key key;
    memory_key(data, memory_of(data, gpu), key);
    std::vector<double> scratch;
    for (int l = 0; l + 1 < data.L; ++l) {
        const auto [worst, total] = layer_pair_cost(data, gpu, l, scratch);
        key.traffic += worst;
        key.total += total;
    }
    return key;
}

// Local search on the key, first improvement, until no move improves it (or max_seconds pass; the result is
// then still valid, only less improved). Moves: (1) swap the GPUs of two clusters of one layer; (2) when
// traffic matters, a memory-neutral pair of swaps on the same two GPUs g1, g2 in two layers l < l' whose size
// differences cancel: with Eq 13 tight, single swaps of unequal clusters always break memory, so without (2)
// the traffic of such layers could never improve.
void local_search(const Ilp2Data& data, std::vector<int>& gpu, double max_seconds) {
    const int L = data.L, D = data.D;
    const int64_t start = now_ns();
    std::vector<int> on(static_cast<size_t>(L) * D);  // on[l*D + g] = cluster of layer l on GPU g
    for (int l = 0; l < L; ++l)
        for (int c = 0; c < D; ++c) on[static_cast<size_t>(l) * D + gpu[static_cast<size_t>(l) * D + c]] = c;
    std::vector<double> mem = memory_of(data, gpu);
    std::vector<double> pair_worst(std::max(0, L - 1)), pair_total(std::max(0, L - 1));
    std::vector<double> scratch;
    Ilp2Key key;
    auto recompute = [&] {
        key = Ilp2Key();
        memory_key(data, mem, key);
        for (int l = 0; l + 1 < L; ++l) {
            std::tie(pair_worst[l], pair_total[l]) = layer_pair_cost(data, gpu, l, scratch);
            key.traffic += pair_worst[l];
            key.total += pair_total[l];
        }
    };
    recompute();
    // swap the GPUs g1, g2 in layer l (clusters, inverse map and memory)
    auto swap_gpus = [&](int l, int g1, int g2) {
        const size_t i1 = static_cast<size_t>(l) * D + g1, i2 = static_cast<size_t>(l) * D + g2;
        const int c1 = on[i1], c2 = on[i2];
        const int s1 = data.size[static_cast<size_t>(l) * D + c1], s2 = data.size[static_cast<size_t>(l) * D + c2];
        std::swap(gpu[static_cast<size_t>(l) * D + c1], gpu[static_cast<size_t>(l) * D + c2]);
        std::swap(on[i1], on[i2]);
        mem[g1] += s2 - s1;
        mem[g2] += s1 - s2;
    };
    // try the swaps (layer, g1, g2) as one move; keep it if the key improves, else undo
    std::vector<int> touched;
    std::vector<std::pair<double, double>> trial_cost;
    auto try_move = [&](std::initializer_list<std::array<int, 3>> swaps) {
        for (const auto& s : swaps) swap_gpus(s[0], s[1], s[2]);
        Ilp2Key trial;
        memory_key(data, mem, trial);
        trial.traffic = key.traffic;
        trial.total = key.total;
        touched.clear();
        trial_cost.clear();
        if (data.has_traffic) {
            for (const auto& s : swaps)
                for (int p : {s[0] - 1, s[0]})
                    if (p >= 0 && p + 1 < L && std::find(touched.begin(), touched.end(), p) == touched.end())
                        touched.push_back(p);
            for (int p : touched) {
                trial_cost.push_back(layer_pair_cost(data, gpu, p, scratch));
                trial.traffic += trial_cost.back().first - pair_worst[p];
                trial.total += trial_cost.back().second - pair_total[p];
            }
        }
        if (trial < key) {
            key = trial;
            for (size_t i = 0; i < touched.size(); ++i)
                std::tie(pair_worst[touched[i]], pair_total[touched[i]]) = trial_cost[i];
            return true;
        }
        for (auto it = std::rbegin(swaps); it != std::rend(swaps); ++it) swap_gpus((*it)[0], (*it)[1], (*it)[2]);
        return false;
    };
    auto size_on = [&](int l, int g) {
        return data.size[static_cast<size_t>(l) * D + on[static_cast<size_t>(l) * D + g]];
    };
    bool improved = true;
    for (int pass = 0; improved && pass < 1000; ++pass) {
        improved = false;
        if (pass > 0 && seconds_since(start) > max_seconds) break;
        for (int l = 0; l < L; ++l)
            for (int g1 = 0; g1 < D; ++g1)
                for (int g2 = g1 + 1; g2 < D; ++g2) {
                    if (size_on(l, g1) == size_on(l, g2) && !data.has_traffic) continue;  // changes nothing
                    improved |= try_move({{l, g1, g2}});
                }
        if (data.has_traffic && !improved) {
            for (int l = 0; l < L; ++l)
                for (int g1 = 0; g1 < D; ++g1)
                    for (int g2 = g1 + 1; g2 < D; ++g2) {
                        const int delta = size_on(l, g1) - size_on(l, g2);
                        if (delta == 0) continue;
                        for (int l2 = l + 1; l2 < L; ++l2)
                            if (size_on(l2, g1) - size_on(l2, g2) == -delta)
                                improved |= try_move({{l, g1, g2}, {l2, g1, g2}});
                    }
        }
        recompute();  // from scratch once per pass so incremental sums do not drift
    }
}

// the three deterministic starts: identity, memory-LPT per layer, traffic greedy layer by layer
std::vector<std::vector<int>> heuristic_starts(const Ilp2Data& data) {
    const int L = data.L, D = data.D;
    std::vector<std::vector<int>> starts;
    std::vector<int> identity(static_cast<size_t>(L) * D);
    for (int l = 0; l < L; ++l)
        for (int c = 0; c < D; ++c) identity[static_cast<size_t>(l) * D + c] = c;
    starts.push_back(identity);

    // memory LPT: per layer, clusters by descending size onto the GPU holding the fewest experts so far
    std::vector<int> lpt(static_cast<size_t>(L) * D, -1);
    std::vector<double> mem(D, 0.0);
    for (int l = 0; l < L; ++l) {
        std::vector<int> order(D);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return data.size[static_cast<size_t>(l) * D + a] > data.size[static_cast<size_t>(l) * D + b];
        });
        std::vector<uint8_t> used(D, 0);
        for (int c : order) {
            int best = -1;
            for (int g = 0; g < D; ++g)
                if (!used[g] && (best < 0 || mem[g] < mem[best])) best = g;
            used[best] = 1;
            lpt[static_cast<size_t>(l) * D + c] = best;
            mem[best] += data.size[static_cast<size_t>(l) * D + c];
        }
    }
    starts.push_back(lpt);

    if (data.has_traffic) {
        // layer 0 as identity; layer l+1: clusters by descending inflow, each to the free GPU that keeps the
        // busiest pair cheapest (then the total cross cost, then the lower index)
        std::vector<int> greedy = identity;
        for (int l = 0; l + 1 < L; ++l) {
            std::vector<double> inflow(D, 0.0);
            for (int c1 = 0; c1 < D; ++c1)
                for (int c2 = 0; c2 < D; ++c2) inflow[c2] += data.c_at(l, c1, c2);
            std::vector<int> order(D);
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return inflow[a] > inflow[b]; });
            std::vector<double> pair(static_cast<size_t>(D) * D, 0.0);  // [g1][g2] tokens so far
            std::vector<uint8_t> used(D, 0);
            double worst = 0;
            for (int c2 : order) {
                int best = -1;
                double best_worst = 0, best_total = 0;
                for (int g2 = 0; g2 < D; ++g2) {
                    if (used[g2]) continue;
                    double new_worst = worst, added = 0;
                    for (int c1 = 0; c1 < D; ++c1) {
                        const double v = data.c_at(l, c1, c2);
                        if (v == 0) continue;
                        const int g1 = greedy[static_cast<size_t>(l) * D + c1];
                        const double lc = data.link[static_cast<size_t>(g1) * D + g2];
                        new_worst = std::max(new_worst, (pair[static_cast<size_t>(g1) * D + g2] + v) * lc);
                        added += v * lc;
                    }
                    if (best < 0 || less_tol(new_worst, best_worst) ||
                        (!less_tol(best_worst, new_worst) && less_tol(added, best_total))) {
                        best = g2;
                        best_worst = new_worst;
                        best_total = added;
                    }
                }
                used[best] = 1;
                greedy[static_cast<size_t>(l + 1) * D + c2] = best;
                worst = best_worst;
                for (int c1 = 0; c1 < D; ++c1)
                    pair[static_cast<size_t>(greedy[static_cast<size_t>(l) * D + c1]) * D + best] +=
                        data.c_at(l, c1, c2);
            }
        }
        starts.push_back(greedy);
    }
    return starts;
}

std::vector<int> heuristic_assignment(const Ilp2Data& data, double max_seconds) {
    std::vector<int> best;
    Ilp2Key best_key;
    for (std::vector<int> gpu : heuristic_starts(data)) {
        local_search(data, gpu, max_seconds);
        const Ilp2Key key = full_key(data, gpu);
        if (best.empty() || key < best_key) {
            best = gpu;
            best_key = key;
        }
    }
    return best;
}

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

// gpu [L*D] from y values; empty when not a permutation per layer
std::vector<int> gpu_from_y(const std::vector<double>& values, int L, int D, int y0) {
    std::vector<int> gpu(static_cast<size_t>(L) * D, -1);
    for (int l = 0; l < L; ++l) {
        std::vector<uint8_t> used(D, 0);
        for (int c = 0; c < D; ++c) {
            for (int g = 0; g < D; ++g)
                if (values[y0 + (static_cast<size_t>(l) * D + c) * D + g] > 0.5) {
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
    auto y = [&](int l, int c, int g) { return (l * D + c) * D + g; };
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
        for (int c = 0; c < D; ++c)
            values[(static_cast<size_t>(l) * D + c) * D + gpu[static_cast<size_t>(l) * D + c]] = 1;
    return values;
}

// ILP 2's phase B model (min sum_l u_l inside the memory band), columns y first (see add_y_columns). Two exact
// formulations (both checked against brute force in tests/balance/test_moetuner.cpp):
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

PhaseBModel build_phase_b(const Ilp2Data& data, double band, bool dp_ran, double dp_value, const std::vector<int>& gpu,
                          int formulation) {
    const int L = data.L, D = data.D;
    PhaseBModel out;
    ilp::MipModel& m = out.model;
    add_y_columns(m, data);
    add_assignment_rows(m, data, band, -1);
    auto y = [&](int l, int c, int g) { return (l * D + c) * D + g; };
    double max_link = 0;
    for (double v : data.link) max_link = std::max(max_link, v);
    double scale = 0;  // coefficients C * link / scale are <= 1
    std::vector<uint8_t> pair_has_traffic(std::max(0, L - 1), 0);
    int pairs_with_traffic = 0;
    for (int l = 0; l + 1 < L; ++l) {
        double total = 0;
        for (int i = 0; i < D * D; ++i) total += data.C[static_cast<size_t>(l) * D * D + i];
        scale = std::max(scale, total * max_link);
        pair_has_traffic[l] = total > 0;
        pairs_with_traffic += total > 0;
    }
    out.scale = scale;
    out.rlt = formulation == 1;
    (void)pairs_with_traffic;
    const double* link = data.link.data();
    std::vector<int> u_cols(std::max(0, L - 1), -1), z_first(std::max(0, L - 1), -1);
    auto z = [&](int l, int c1, int g1, int c2, int g2) { return z_first[l] + ((c1 * D + g1) * D + c2) * D + g2; };
    for (int l = 0; l + 1 < L; ++l) {
        if (!pair_has_traffic[l]) continue;
        u_cols[l] = m.add_col(0.0, ilp::infinity(), 1.0, false);
        if (out.rlt) {
            z_first[l] = m.num_cols();
            for (int i = 0; i < D * D * D * D; ++i) m.add_col(0.0, 1.0, 0.0, false);
        }
    }
    std::vector<int> cols;
    std::vector<double> coefs;
    auto add_sum_row = [&](int y_col) {  // sum(cols) - y = 0
        cols.push_back(y_col);
        coefs.assign(cols.size(), 1.0);
        coefs.back() = -1.0;
        m.add_row(cols, coefs, 0.0, 0.0);
    };
    for (int l = 0; l + 1 < L; ++l) {
        if (!pair_has_traffic[l]) continue;
        if (!out.rlt) {
            for (int side = 0; side < 2; ++side)
                for (int g1 = 0; g1 < D; ++g1)
                    for (int g2 = 0; g2 < D; ++g2) {
                        const double lc = link[g1 * D + g2];
                        if (g1 == g2 || lc == 0) continue;
                        for (int a = 0; a < D; ++a) {
                            // side 0: a = c1 fixed on g1, sum over c2 on g2; side 1: a = c2 fixed on g2
                            double big_m = 0;
                            cols.assign(1, u_cols[l]);
                            coefs.assign(1, 1.0);
                            for (int b = 0; b < D; ++b) {
                                const double c = side == 0 ? data.c_at(l, a, b) : data.c_at(l, b, a);
                                if (c == 0) continue;
                                big_m = std::max(big_m, c);
                                cols.push_back(side == 0 ? y(l + 1, b, g2) : y(l, b, g1));
                                coefs.push_back(-lc * c / scale);
                            }
                            if (big_m == 0) continue;
                            cols.push_back(side == 0 ? y(l, a, g1) : y(l + 1, a, g2));
                            coefs.push_back(-lc * big_m / scale);
                            m.add_row(cols, coefs, -lc * big_m / scale, ilp::infinity());
                        }
                    }
            continue;
        }
        // level-1 RLT: each assignment row of one layer times each y of the other layer. With them,
        // z >= y1 + y2 - 1 holds in the LP too (z[g1,g2] = y1 - sum_{g2' != g2} z[g1,g2'] >= y1 - sum_{g2' != g2}
        // y[l+1,c2,g2'] = y1 + y2 - 1), and the LP can no longer park every pair on the diagonal
        // (sum_{c1,c2} z[.,g1,.,g2] = 1: one cluster pair per GPU pair).
        for (int c1 = 0; c1 < D; ++c1)
            for (int g1 = 0; g1 < D; ++g1) {
                for (int c2 = 0; c2 < D; ++c2) {
                    cols.clear();
                    for (int g2 = 0; g2 < D; ++g2) cols.push_back(z(l, c1, g1, c2, g2));
                    add_sum_row(y(l, c1, g1));  // sum_g2 z = y[l,c1,g1]
                }
                for (int g2 = 0; g2 < D; ++g2) {
                    cols.clear();
                    for (int c2 = 0; c2 < D; ++c2) cols.push_back(z(l, c1, g1, c2, g2));
                    add_sum_row(y(l, c1, g1));  // sum_c2 z = y[l,c1,g1]
                }
            }
        for (int c2 = 0; c2 < D; ++c2)
            for (int g2 = 0; g2 < D; ++g2) {
                for (int c1 = 0; c1 < D; ++c1) {
                    cols.clear();
                    for (int g1 = 0; g1 < D; ++g1) cols.push_back(z(l, c1, g1, c2, g2));
                    add_sum_row(y(l + 1, c2, g2));  // sum_g1 z = y[l+1,c2,g2]
                }
                for (int g1 = 0; g1 < D; ++g1) {
                    cols.clear();
                    for (int c1 = 0; c1 < D; ++c1) cols.push_back(z(l, c1, g1, c2, g2));
                    add_sum_row(y(l + 1, c2, g2));  // sum_c1 z = y[l+1,c2,g2]
                }
            }
        // epigraph: u_l >= sum_{c1,c2} C link z for every ordered pair g1 != g2 with a cost
        for (int g1 = 0; g1 < D; ++g1)
            for (int g2 = 0; g2 < D; ++g2) {
                const double lc = link[g1 * D + g2];
                if (g1 == g2 || lc == 0) continue;
                cols.assign(1, u_cols[l]);
                coefs.assign(1, 1.0);
                for (int c1 = 0; c1 < D; ++c1)
                    for (int c2 = 0; c2 < D; ++c2) {
                        if (data.c_at(l, c1, c2) == 0) continue;
                        cols.push_back(z(l, c1, g1, c2, g2));
                        coefs.push_back(-data.c_at(l, c1, c2) * lc / scale);
                    }
                if (cols.size() > 1) m.add_row(cols, coefs, 0.0, ilp::infinity());
            }
        // valid cuts. (a) One (g1, g2) carries all of C[c1,c2], and that pair costs at least this share:
        // u_l >= C[c1,c2] sum_{g1 != g2} link z[c1,.,c2,.]. (b) A source cluster's outflow (a target's inflow) is
        // spread over at most D - 1 ordered pairs: (D - 1) u_l >= its total cost.
        for (int c1 = 0; c1 < D; ++c1)
            for (int c2 = 0; c2 < D; ++c2) {
                if (data.c_at(l, c1, c2) == 0) continue;
                cols.assign(1, u_cols[l]);
                coefs.assign(1, 1.0);
                for (int g1 = 0; g1 < D; ++g1)
                    for (int g2 = 0; g2 < D; ++g2) {
                        const double lc = link[g1 * D + g2];
                        if (g1 == g2 || lc == 0) continue;
                        cols.push_back(z(l, c1, g1, c2, g2));
                        coefs.push_back(-data.c_at(l, c1, c2) * lc / scale);
                    }
                if (cols.size() > 1) m.add_row(cols, coefs, 0.0, ilp::infinity());
            }
        for (int side = 0; side < 2 && D > 2; ++side)
            for (int a = 0; a < D; ++a) {
                cols.assign(1, u_cols[l]);
                coefs.assign(1, D - 1.0);
                for (int b = 0; b < D; ++b) {
                    const int c1 = side == 0 ? a : b, c2 = side == 0 ? b : a;
                    if (data.c_at(l, c1, c2) == 0) continue;
                    for (int g1 = 0; g1 < D; ++g1)
                        for (int g2 = 0; g2 < D; ++g2) {
                            const double lc = link[g1 * D + g2];
                            if (g1 == g2 || lc == 0) continue;
                            cols.push_back(z(l, c1, g1, c2, g2));
                            coefs.push_back(-data.c_at(l, c1, c2) * lc / scale);
                        }
                }
                if (cols.size() > 1) m.add_row(cols, coefs, 0.0, ilp::infinity());
            }
    }
    if (dp_ran) {
        // the DP value bounds sum_l u_l from below
        cols.clear();
        for (int l = 0; l + 1 < L; ++l)
            if (u_cols[l] >= 0) cols.push_back(u_cols[l]);
        m.add_row(cols, std::vector<double>(cols.size(), 1.0), dp_value / scale * (1 - 1e-9), ilp::infinity());
    }
    // warm start from gpu
    out.initial = y_values(gpu, L, D, m.num_cols());
    std::vector<double> scratch;
    for (int l = 0; l + 1 < L; ++l) {
        if (!pair_has_traffic[l]) continue;
        if (out.rlt) {
            for (int c1 = 0; c1 < D; ++c1)
                for (int c2 = 0; c2 < D; ++c2)
                    out.initial[z(l, c1, gpu[static_cast<size_t>(l) * D + c1], c2,
                                  gpu[static_cast<size_t>(l + 1) * D + c2])] = 1;
        }
        out.initial[u_cols[l]] = layer_pair_cost(data, gpu, l, scratch).first / scale;
    }
    return out;
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
    if (clusters.size() != static_cast<size_t>(L) * E)
        throw_config_error("moetuner.clusters", std::to_string(clusters.size()) + " values",
                           "must hold L * E = " + std::to_string(static_cast<size_t>(L) * E), "");
    for (int c : clusters)
        if (c < 0 || c >= D)
            throw_config_error("moetuner.clusters", std::to_string(c), "clusters must be in [0, D)", "");

    const Ilp2Data data = make_ilp2_data(clusters, transitions, L, D, E, link_cost);
    Ilp2Result out;
    out.exact = D <= options.ilp2_exact_max_devices;
    // each local search may take a quarter of the time limit (3 starts, plus one from the DP or phase A)
    const double search_s = options.ilp_time_limit_s / 4;
    std::vector<int> gpu = switches.ilp_only ? heuristic_starts(data)[0] : heuristic_assignment(data, search_s);
    Ilp2Key key = full_key(data, gpu);
    bool optimal = out.exact && !data.has_traffic && !less_tol(data.memory_lb, key.memory_dev);
    double bound = 0;

    if (out.exact) {
        ilp::MipSettings settings;
        settings.relative_gap = options.ilp_gap;
        settings.time_limit_s = options.ilp_time_limit_s;
        double band = key.memory_dev;
        bool memory_proven = !less_tol(data.memory_lb, key.memory_dev);
        if (!memory_proven) {
            // phase A: the smallest achievable memory deviation (GPUs are interchangeable here, so layer 0's
            // clusters are fixed to the identity)
            ilp::MipModel m;
            add_y_columns(m, data);
            const int v_col = m.add_col(data.memory_lb, ilp::infinity(), 1.0, false);
            add_assignment_rows(m, data, 0.0, v_col);
            // symmetry: GPUs are interchangeable for memory, so relabel any solution to put layer 0 on identity
            std::vector<int> start_gpu = gpu;
            {
                std::vector<int> relabel(D);
                for (int c = 0; c < D; ++c) relabel[gpu[c]] = c;  // layer 0: GPU gpu[c] -> c
                for (auto& g : start_gpu) g = relabel[g];
            }
            for (int c = 0; c < D; ++c)
                for (int g = 0; g < D; ++g)
                    if (g != c) m.col_ub[static_cast<size_t>(c) * D + g] = 0.0;
            std::vector<double> initial = y_values(start_gpu, L, D, m.num_cols());
            initial[v_col] = key.memory_dev;
            settings.initial = &initial;
            const ilp::MipResult phase_a = ilp::solve_mip(m, settings);
            if (phase_a.has_solution) {
                std::vector<int> candidate = gpu_from_y(phase_a.values, L, D, 0);
                if (!candidate.empty()) {
                    if (!switches.ilp_only) local_search(data, candidate, search_s);  // keeps memory
                    const Ilp2Key candidate_key = full_key(data, candidate);
                    if (candidate_key < key) {
                        gpu = candidate;
                        key = candidate_key;
                    }
                }
                memory_proven = phase_a.optimal;
            }
            band = key.memory_dev;
        }

        if (data.has_traffic) {
            // ILP 2 without Eq 13 by the chain DP (small D only): a lower bound, often the optimum itself
            DpBound dp;
            if (switches.chain_dp && !switches.ilp_only) dp = chain_dp_bound(data, band, search_s, gpu, key);
            const bool dp_ran = dp.ran;
            const double dp_value = dp.bound;
            bool settled = false;
            if (dp_ran) {
                bound = std::min(dp_value, key.traffic);
                settled = key.traffic <= dp_value * (1.0 + options.ilp_gap) + 1e-12 * std::max(1.0, dp_value);
                if (settled) optimal = memory_proven;
            }
            if (!settled) {
                // phase B: min sum_l u_l inside the memory band
                const PhaseBModel pb = build_phase_b(data, band, dp_ran, dp_value, gpu, switches.formulation);
                const ilp::MipModel& m = pb.model;
                const double scale = pb.scale;
                const std::vector<double>& initial = pb.initial;
                settings.initial = &initial;
                // measured (docs/policies-offline.md): strong branching probes are slow hot-started dual simplex
                // runs on this degenerate LP; cuts help prove small instances and stall the root above D = 4
                settings.strong_branching = false;
                settings.cuts = D <= 4;
                const ilp::MipResult phase_b = ilp::solve_mip(m, settings);
                if (phase_b.has_solution) {
                    std::vector<int> candidate = gpu_from_y(phase_b.values, L, D, 0);
                    if (!candidate.empty()) {
                        const Ilp2Key candidate_key = full_key(data, candidate);
                        if (!less_tol(band, candidate_key.memory_dev) &&
                            (switches.ilp_only || less_tol(candidate_key.traffic, key.traffic))) {
                            gpu = candidate;
                            key = candidate_key;
                        }
                    }
                    bound = std::min(key.traffic, std::max(bound, phase_b.bound * scale));
                    optimal = memory_proven && phase_b.optimal;
                }
            }
        } else {
            optimal = memory_proven;
        }
    }
    out.gpu_of_cluster = gpu;
    out.objective = key.traffic;
    out.bound = data.has_traffic ? bound : 0.0;
    out.memory_deviation = key.memory_dev;
    out.optimal = optimal;
    out.solve_s = seconds_since(start);
    return out;
}

std::vector<Placement> plan_moetuner(const std::vector<double>& expert_loads, const std::vector<double>& transitions,
                                     int num_layers, int num_devices, int num_experts,
                                     const std::vector<double>& link_cost, const BalanceOptions& options,
                                     IlpReport* report) {
    const int L = num_layers, D = num_devices, E = num_experts;
    validate_moetuner(expert_loads, transitions, L, D, E, link_cost, options);
    const int64_t start = now_ns();
    IlpReport r;
    std::vector<int> clusters(static_cast<size_t>(L) * E);  // [L][E]
    for (int l = 0; l < L; ++l) {
        const Ilp1Result one = moetuner_ilp1_layer(expert_loads.data() + static_cast<size_t>(l) * E, E, D, options);
        std::copy(one.cluster.begin(), one.cluster.end(), clusters.begin() + static_cast<size_t>(l) * E);
        r.ilp1_objective += one.objective;
        r.ilp1_bound += one.bound;
        r.ilp1_layers += 1;
        r.ilp1_layers_optimal += one.optimal ? 1 : 0;
    }
    const Ilp2Result two = moetuner_ilp2(clusters, transitions, L, D, E, link_cost, options);
    r.ilp2_objective = two.objective;
    r.ilp2_bound = two.bound;
    r.ilp2_exact = two.exact;
    r.ilp2_optimal = two.optimal;
    std::vector<Placement> out;
    out.reserve(L);
    for (int l = 0; l < L; ++l) {
        std::vector<int> owner(E);
        for (int e = 0; e < E; ++e)
            owner[e] = two.gpu_of_cluster[static_cast<size_t>(l) * D + clusters[static_cast<size_t>(l) * E + e]];
        out.push_back(Placement::make_owners(D, owner));
    }
    r.solve_s = seconds_since(start);
    if (report) *report = r;
    return out;
}

double moetuner_traffic_objective(const std::vector<Placement>& placements, const std::vector<double>& transitions,
                                  const std::vector<double>& link_cost) {
    const int L = static_cast<int>(placements.size());
    if (L < 2 || transitions.empty()) return 0.0;
    const int D = placements[0].num_devices, E = placements[0].num_experts;
    PROPHET_ASSERT(transitions.size() == static_cast<size_t>(L - 1) * E * E);
    PROPHET_ASSERT(link_cost.size() == static_cast<size_t>(D) * D);
    double total = 0;
    std::vector<double> pair(static_cast<size_t>(D) * D);
    for (int l = 0; l + 1 < L; ++l) {
        std::fill(pair.begin(), pair.end(), 0.0);
        for (int e1 = 0; e1 < E; ++e1)
            for (int e2 = 0; e2 < E; ++e2)
                pair[static_cast<size_t>(placements[l].owner[e1]) * D + placements[l + 1].owner[e2]] +=
                    transitions[(static_cast<size_t>(l) * E + e1) * E + e2];
        double worst = 0;
        for (int g1 = 0; g1 < D; ++g1)
            for (int g2 = 0; g2 < D; ++g2)
                if (g1 != g2)
                    worst = std::max(worst, pair[static_cast<size_t>(g1) * D + g2] *
                                                link_cost[static_cast<size_t>(g1) * D + g2]);
        total += worst;
    }
    return total;
}

JointObjective moetuner_joint_objective(const std::vector<Placement>& placements,
                                        const std::vector<double>& expert_loads,
                                        const std::vector<double>& transitions, const std::vector<double>& link_cost,
                                        const BalanceOptions& options) {
    JointObjective j;
    const int L = static_cast<int>(placements.size());
    if (L == 0) return j;
    const int D = placements[0].num_devices, E = placements[0].num_experts;
    PROPHET_ASSERT(expert_loads.size() == static_cast<size_t>(L) * E);
    const bool minmax = options.ilp_objective == "minmax";
    for (int l = 0; l < L; ++l) {
        std::vector<double> T(D, 0.0);
        double total = 0;
        for (int e = 0; e < E; ++e) {
            T[placements[l].owner[e]] += expert_loads[static_cast<size_t>(l) * E + e];
            total += expert_loads[static_cast<size_t>(l) * E + e];
        }
        const double mean = total / D;
        if (mean > 0) j.load_term += cluster_objective(T, mean, minmax) / mean;
    }
    double max_link = 0;
    for (int g1 = 0; g1 < D; ++g1)
        for (int g2 = 0; g2 < D; ++g2)
            if (g1 != g2) max_link = std::max(max_link, link_cost[static_cast<size_t>(g1) * D + g2]);
    if (!transitions.empty() && max_link > 0) {
        for (int l = 0; l + 1 < L; ++l) {
            double volume = 0;
            for (size_t i = 0; i < static_cast<size_t>(E) * E; ++i)
                volume += transitions[static_cast<size_t>(l) * E * E + i];
            if (volume <= 0) continue;
            std::vector<Placement> pair = {placements[l], placements[l + 1]};
            std::vector<double> one(transitions.begin() + static_cast<size_t>(l) * E * E,
                                    transitions.begin() + static_cast<size_t>(l + 1) * E * E);
            j.traffic_term += moetuner_traffic_objective(pair, one, link_cost) / (volume * max_link);
        }
    }
    j.objective = j.load_term + j.traffic_term;
    return j;
}

std::vector<Placement> plan_moetuner_joint(const std::vector<double>& expert_loads,
                                           const std::vector<double>& transitions, int num_layers, int num_devices,
                                           int num_experts, const std::vector<double>& link_cost,
                                           const BalanceOptions& options, IlpReport* report) {
    const int L = num_layers, D = num_devices, E = num_experts;
    if (D > kJointMaxDevices || E > kJointMaxExperts || L > kJointMaxLayers)
        throw_config_error("balance.policy", "moetuner-joint",
                           "the joint ILP is limited to D <= " + std::to_string(kJointMaxDevices) + ", E <= " +
                               std::to_string(kJointMaxExperts) + ", L <= " + std::to_string(kJointMaxLayers) +
                               " (here D = " + std::to_string(D) + ", E = " + std::to_string(E) +
                               ", L = " + std::to_string(L) + ")",
                           "use moetuner (two-stage) for larger instances");
    validate_moetuner(expert_loads, transitions, L, D, E, link_cost, options);
    const int64_t start = now_ns();
    const bool minmax = options.ilp_objective == "minmax";

    // the two-stage answer: warm start, and it fixes the memory band so that it is feasible for the joint ILP
    std::vector<Placement> two_stage = plan_moetuner(expert_loads, transitions, L, D, E, link_cost, options);
    const JointObjective two_stage_j =
        moetuner_joint_objective(two_stage, expert_loads, transitions, link_cost, options);
    std::vector<double> mem(D, 0.0);
    for (const Placement& p : two_stage)
        for (int g : p.owner) mem[g] += 1;
    const int64_t total_experts = static_cast<int64_t>(E) * L;
    const double target = static_cast<double>(total_experts) / D;
    double band = total_experts % D == 0 ? 0.0 : std::max(std::ceil(target) - target, target - std::floor(target));
    for (double v : mem) band = std::max(band, std::fabs(v - target));

    ilp::MipModel m;
    auto w = [&](int l, int e, int g) { return (l * E + e) * D + g; };  // w[l,e,g]: expert e on GPU g at layer l
    for (int i = 0; i < L * E * D; ++i) m.add_binary();
    std::vector<double> mean(L, 0.0), w_max(L, 0.0);
    for (int l = 0; l < L; ++l) {
        for (int e = 0; e < E; ++e) {
            mean[l] += expert_loads[static_cast<size_t>(l) * E + e] / D;
            w_max[l] = std::max(w_max[l], expert_loads[static_cast<size_t>(l) * E + e]);
        }
    }
    double max_link = 0;
    for (int g1 = 0; g1 < D; ++g1)
        for (int g2 = 0; g2 < D; ++g2)
            if (g1 != g2) max_link = std::max(max_link, link_cost[static_cast<size_t>(g1) * D + g2]);
    std::vector<int> cols;
    std::vector<double> coefs;
    // partition, >= 1 per GPU, memory band
    for (int l = 0; l < L; ++l) {
        for (int e = 0; e < E; ++e) {
            cols.clear();
            for (int g = 0; g < D; ++g) cols.push_back(w(l, e, g));
            m.add_row(cols, std::vector<double>(D, 1.0), 1.0, 1.0);
        }
        for (int g = 0; g < D; ++g) {
            cols.clear();
            for (int e = 0; e < E; ++e) cols.push_back(w(l, e, g));
            m.add_row(cols, std::vector<double>(E, 1.0), 1.0, ilp::infinity());
        }
    }
    for (int g = 0; g < D; ++g) {
        cols.clear();
        for (int l = 0; l < L; ++l)
            for (int e = 0; e < E; ++e) cols.push_back(w(l, e, g));
        m.add_row(cols, std::vector<double>(cols.size(), 1.0), std::ceil(target - band - 1e-9),
                  std::floor(target + band + 1e-9));
    }
    // load term per layer (loads in units of the layer's mean GPU load)
    std::vector<int> t_cols(L, -1);
    std::vector<std::vector<int>> d_cols(L);
    for (int l = 0; l < L; ++l) {
        if (!(mean[l] > 0)) continue;
        auto load_row = [&](int g) {
            cols.clear();
            coefs.clear();
            for (int e = 0; e < E; ++e) {
                const double v = expert_loads[static_cast<size_t>(l) * E + e] / mean[l];
                if (v == 0) continue;
                cols.push_back(w(l, e, g));
                coefs.push_back(-v);
            }
        };
        if (minmax) {
            t_cols[l] = m.add_col(std::max(1.0, w_max[l] / mean[l]), ilp::infinity(), 1.0, false);
            for (int g = 0; g < D; ++g) {
                load_row(g);
                cols.push_back(t_cols[l]);
                coefs.push_back(1.0);
                m.add_row(cols, coefs, 0.0, ilp::infinity());
            }
        } else {
            for (int g = 0; g < D; ++g) d_cols[l].push_back(m.add_col(0.0, ilp::infinity(), 1.0, false));
            for (int g = 0; g < D; ++g) {
                load_row(g);
                cols.push_back(d_cols[l][g]);
                coefs.push_back(1.0);
                m.add_row(cols, coefs, -1.0, ilp::infinity());  // d - T >= -1
                for (size_t k = 0; k + 1 < coefs.size(); ++k) coefs[k] = -coefs[k];
                m.add_row(cols, coefs, 1.0, ilp::infinity());   // d + T >= 1
            }
        }
    }
    // traffic term per layer pair (transitions in units of U_l = volume_l * max_link)
    std::vector<int> u_cols(std::max(0, L - 1), -1);
    std::vector<int> z_first(static_cast<size_t>(std::max(0, L - 1)) * E * E, -1);  // [l][e1][e2] -> D*D z columns
    if (!transitions.empty() && max_link > 0) {
        for (int l = 0; l + 1 < L; ++l) {
            const double* R = transitions.data() + static_cast<size_t>(l) * E * E;
            const double volume = std::accumulate(R, R + static_cast<size_t>(E) * E, 0.0);
            if (!(volume > 0)) continue;
            u_cols[l] = m.add_col(0.0, ilp::infinity(), 1.0, false);
            for (int e1 = 0; e1 < E; ++e1)
                for (int e2 = 0; e2 < E; ++e2) {
                    if (R[e1 * E + e2] == 0) continue;
                    const int z0 = m.num_cols();
                    z_first[(static_cast<size_t>(l) * E + e1) * E + e2] = z0;
                    for (int i = 0; i < D * D; ++i) m.add_col(0.0, 1.0, 0.0, false);
                    for (int g1 = 0; g1 < D; ++g1) {
                        cols.clear();
                        for (int g2 = 0; g2 < D; ++g2) cols.push_back(z0 + g1 * D + g2);
                        cols.push_back(w(l, e1, g1));
                        coefs.assign(D, 1.0);
                        coefs.push_back(-1.0);
                        m.add_row(cols, coefs, 0.0, 0.0);
                    }
                    for (int g2 = 0; g2 < D; ++g2) {
                        cols.clear();
                        for (int g1 = 0; g1 < D; ++g1) cols.push_back(z0 + g1 * D + g2);
                        cols.push_back(w(l + 1, e2, g2));
                        coefs.assign(D, 1.0);
                        coefs.push_back(-1.0);
                        m.add_row(cols, coefs, 0.0, 0.0);
                    }
                    for (int g1 = 0; g1 < D; ++g1)
                        for (int g2 = 0; g2 < D; ++g2)
                            if (g1 != g2 && link_cost[static_cast<size_t>(g1) * D + g2] > 0)
                                m.add_row({z0 + g1 * D + g2, w(l, e1, g1), w(l + 1, e2, g2)}, {1.0, -1.0, -1.0}, -1.0,
                                          ilp::infinity());
                }
            for (int g1 = 0; g1 < D; ++g1)
                for (int g2 = 0; g2 < D; ++g2) {
                    const double lc = link_cost[static_cast<size_t>(g1) * D + g2];
                    if (g1 == g2 || lc == 0) continue;
                    cols.assign(1, u_cols[l]);
                    coefs.assign(1, 1.0);
                    for (int e1 = 0; e1 < E; ++e1)
                        for (int e2 = 0; e2 < E; ++e2) {
                            const int z0 = z_first[(static_cast<size_t>(l) * E + e1) * E + e2];
                            if (z0 < 0) continue;
                            cols.push_back(z0 + g1 * D + g2);
                            coefs.push_back(-R[e1 * E + e2] * lc / (volume * max_link));
                        }
                    m.add_row(cols, coefs, 0.0, ilp::infinity());
                }
        }
    }
    // warm start: the two-stage placements
    std::vector<double> initial(m.num_cols(), 0.0);
    for (int l = 0; l < L; ++l) {
        std::vector<double> T(D, 0.0);
        for (int e = 0; e < E; ++e) {
            const int g = two_stage[l].owner[e];
            initial[w(l, e, g)] = 1.0;
            if (mean[l] > 0) T[g] += expert_loads[static_cast<size_t>(l) * E + e] / mean[l];
        }
        if (t_cols[l] >= 0) initial[t_cols[l]] = std::max(m.col_lb[t_cols[l]], *std::max_element(T.begin(), T.end()));
        for (size_t g = 0; g < d_cols[l].size(); ++g) initial[d_cols[l][g]] = std::fabs(T[g] - 1.0);
    }
    for (int l = 0; l + 1 < L; ++l) {
        if (u_cols[l] < 0) continue;
        const double* R = transitions.data() + static_cast<size_t>(l) * E * E;
        const double volume = std::accumulate(R, R + static_cast<size_t>(E) * E, 0.0);
        for (int e1 = 0; e1 < E; ++e1)
            for (int e2 = 0; e2 < E; ++e2) {
                const int z0 = z_first[(static_cast<size_t>(l) * E + e1) * E + e2];
                if (z0 >= 0) initial[z0 + two_stage[l].owner[e1] * D + two_stage[l + 1].owner[e2]] = 1.0;
            }
        std::vector<Placement> pair = {two_stage[l], two_stage[l + 1]};
        std::vector<double> one(R, R + static_cast<size_t>(E) * E);
        initial[u_cols[l]] = moetuner_traffic_objective(pair, one, link_cost) / (volume * max_link);
    }
    ilp::MipSettings settings;
    settings.relative_gap = options.ilp_gap;
    settings.time_limit_s = options.ilp_time_limit_s;
    settings.initial = &initial;
    const ilp::MipResult result = ilp::solve_mip(m, settings);

    std::vector<Placement> out = two_stage;
    JointObjective best = two_stage_j;
    if (result.has_solution) {
        std::vector<Placement> candidate;
        bool valid = true;
        for (int l = 0; l < L && valid; ++l) {
            std::vector<int> owner(E, -1);
            std::vector<int> count(D, 0);
            for (int e = 0; e < E; ++e)
                for (int g = 0; g < D; ++g)
                    if (result.values[w(l, e, g)] > 0.5) owner[e] = g;
            for (int e = 0; e < E && valid; ++e) valid = owner[e] >= 0;
            if (!valid) break;
            for (int g : owner) ++count[g];
            for (int g = 0; g < D && valid; ++g) valid = count[g] > 0;
            if (valid) candidate.push_back(Placement::make_owners(D, owner));
        }
        if (valid) {
            const JointObjective j = moetuner_joint_objective(candidate, expert_loads, transitions, link_cost, options);
            if (!less_tol(best.objective, j.objective)) {
                out = candidate;
                best = j;
            }
        }
    }
    if (report) {
        report->ilp1_objective = best.load_term;
        report->ilp2_objective = best.traffic_term;
        report->ilp1_bound = report->ilp2_bound = result.has_solution ? std::min(result.bound, best.objective) : 0.0;
        report->ilp2_exact = result.optimal;
        report->ilp2_optimal = result.optimal;
        report->solve_s = seconds_since(start);
    }
    return out;
}

}  // namespace prophet
