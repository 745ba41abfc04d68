// policy_moetuner.cpp: MoETuner (Go & Mahajan, arXiv 2502.06643) two-stage ILP, in the corrected form of
// docs/policies-offline.md, solved with CBC; and the joint ILP that measures the two-stage gap.
// Files: moetuner_ilp1.cpp (ILP 1 and the input checks), moetuner_ilp2_search.* (ILP 2's data and heuristic),
// moetuner_ilp2.cpp (ILP 2 exact), this file (plan_moetuner, the traffic objective, the joint ILP).
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
#include "balance/moetuner_internal.h"
#include "balance/policies.h"
#include "core/error.h"
#include "core/timer.h"

namespace prophet {

using namespace moetuner_detail;

std::vector<Placement> plan_moetuner(const std::vector<double>& expert_loads, const std::vector<double>& transitions,
                                     int num_layers, int num_devices, int num_experts,
                                     const std::vector<double>& link_cost, const BalanceOptions& options,
                                     IlpReport* report) {
    const int L = num_layers, D = num_devices, E = num_experts;
    validate_moetuner(expert_loads, transitions, L, D, E, link_cost, options);
    const int64_t start = now_ns();
    IlpReport r;
    std::vector<int> clusters(static_cast<size_t>(L) * E);  // [L][E]
    // balance.ilp_time_limit_s is ILP 1's budget for all layers together: each layer may use what is left over the
    // layers left (at least kMinLayerSolveS, so a late layer still gets its warm start checked); ILP 2 has its own
    constexpr double kMinLayerSolveS = 0.01;
    BalanceOptions layer_options = options;
    for (int l = 0; l < L; ++l) {
        const double left = options.ilp_time_limit_s - seconds_since(start);
        layer_options.ilp_time_limit_s = std::max(kMinLayerSolveS, left / (L - l));
        const Ilp1Result one =
            moetuner_ilp1_layer(expert_loads.data() + static_cast<size_t>(l) * E, E, D, layer_options);
        std::copy(one.cluster.begin(), one.cluster.end(), clusters.begin() + static_cast<size_t>(l) * E);
        r.ilp1_objective += one.objective;
        r.ilp1_bound += one.bound;
        r.ilp1_layers += 1;
        r.ilp1_layers_optimal += one.optimal ? 1 : 0;
    }
    // without the traffic term (balance.ilp2_traffic = false) ILP 2 only balances memory (Eq 13)
    const std::vector<double> traffic = options.ilp2_traffic ? transitions : std::vector<double>{};
    const Ilp2Result two = moetuner_ilp2(clusters, traffic, L, D, E, link_cost, options);
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
