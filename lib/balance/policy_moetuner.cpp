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

namespace {

// the largest link cost between two distinct GPUs (link_cost [D*D], g1 * D + g2); 0 when none
double max_off_diagonal_link(const std::vector<double>& link_cost, int D) {
    double max_link = 0;
    for (int g1 = 0; g1 < D; ++g1)
        for (int g2 = 0; g2 < D; ++g2)
            if (g1 != g2) max_link = std::max(max_link, link_cost[static_cast<size_t>(g1) * D + g2]);
    return max_link;
}

// layer pair (a, b)'s traffic objective in units of U = volume * max_link (R [E*E] the pair's transitions)
double pair_traffic_term(const Placement& a, const Placement& b, const double* R, int E,
                         const std::vector<double>& link_cost, double volume, double max_link) {
    const std::vector<Placement> pair = {a, b};
    const std::vector<double> one(R, R + static_cast<size_t>(E) * E);
    return moetuner_traffic_objective(pair, one, link_cost) / (volume * max_link);
}

}  // namespace

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
    const double max_link = max_off_diagonal_link(link_cost, D);
    if (!transitions.empty() && max_link > 0) {
        for (int l = 0; l + 1 < L; ++l) {
            const double* R = transitions.data() + static_cast<size_t>(l) * E * E;
            const double volume = std::accumulate(R, R + static_cast<size_t>(E) * E, 0.0);
            if (volume <= 0) continue;
            j.traffic_term += pair_traffic_term(placements[l], placements[l + 1], R, E, link_cost, volume, max_link);
        }
    }
    j.objective = j.load_term + j.traffic_term;
    return j;
}

namespace {

void check_joint_limits(int L, int D, int E) {
    if (D > kJointMaxDevices || E > kJointMaxExperts || L > kJointMaxLayers)
        throw_config_error("balance.policy", "moetuner-joint",
                           "the joint ILP is limited to D <= " + std::to_string(kJointMaxDevices) + ", E <= " +
                               std::to_string(kJointMaxExperts) + ", L <= " + std::to_string(kJointMaxLayers) +
                               " (here D = " + std::to_string(D) + ", E = " + std::to_string(E) +
                               ", L = " + std::to_string(L) + ")",
                           "use moetuner (two-stage) for larger instances");
}

// The joint ILP's model and the columns its warm start and decoder need. Column indices: w[l,e,g] first
// (binary, expert e on GPU g at layer l), then per layer t (minmax) or d[D] (sumdev), then per layer pair u and
// its z blocks of D*D (z[g1,g2] = w[l,e1,g1] w[l+1,e2,g2]).
struct JointIlp {
    int L = 0, D = 0, E = 0;
    ilp::MipModel m;
    std::vector<double> mean, w_max;       // [L] mean GPU load and heaviest expert (raw load units)
    double max_link = 0;                   // the largest off-diagonal link cost
    std::vector<int> t_cols;               // [L] minmax epigraph column, -1 when absent
    std::vector<std::vector<int>> d_cols;  // [L][D] sumdev deviation columns
    std::vector<int> u_cols;               // [L-1] traffic epigraph column, -1 when the pair has no traffic
    std::vector<int> z_first;              // [L-1][E][E] first of the pair's D*D z columns, -1 when R[e1,e2] = 0
    std::vector<int> cols;                 // row scratch
    std::vector<double> coefs;
    int w(int l, int e, int g) const { return (l * E + e) * D + g; }
};

// the memory band (Eq 13, experts per GPU over all layers) that the two-stage answer meets: at least the rounding
// of E*L/D, so the warm start is feasible for the joint ILP
double joint_memory_band(const std::vector<Placement>& two_stage, int L, int D, int E) {
    std::vector<double> mem(D, 0.0);
    for (const Placement& p : two_stage)
        for (int g : p.owner) mem[g] += 1;
    const int64_t total_experts = static_cast<int64_t>(E) * L;
    const double target = static_cast<double>(total_experts) / D;
    double band = memory_rounding_deviation(total_experts, D);
    for (double v : mem) band = std::max(band, std::fabs(v - target));
    return band;
}

// the partition (each expert on one GPU), >= 1 expert per GPU per layer, and the memory band over all layers
void add_joint_assignment_rows(JointIlp& j, double band) {
    const int L = j.L, D = j.D, E = j.E;
    std::vector<int>& cols = j.cols;
    for (int l = 0; l < L; ++l) {
        for (int e = 0; e < E; ++e) {
            cols.clear();
            for (int g = 0; g < D; ++g) cols.push_back(j.w(l, e, g));
            j.m.add_row(cols, std::vector<double>(D, 1.0), 1.0, 1.0);
        }
        for (int g = 0; g < D; ++g) {
            cols.clear();
            for (int e = 0; e < E; ++e) cols.push_back(j.w(l, e, g));
            j.m.add_row(cols, std::vector<double>(E, 1.0), 1.0, ilp::infinity());
        }
    }
    const double target = static_cast<double>(static_cast<int64_t>(E) * L) / D;
    for (int g = 0; g < D; ++g) {
        cols.clear();
        for (int l = 0; l < L; ++l)
            for (int e = 0; e < E; ++e) cols.push_back(j.w(l, e, g));
        j.m.add_row(cols, std::vector<double>(cols.size(), 1.0), std::ceil(target - band - 1e-9),
                    std::floor(target + band + 1e-9));
    }
}

// the load term of layer l (loads in units of the layer's mean GPU load): t >= T_g (minmax) or d_g >= |T_g - 1|
void add_joint_load_term(JointIlp& j, const std::vector<double>& expert_loads, int l, bool minmax) {
    const int D = j.D, E = j.E;
    std::vector<int>& cols = j.cols;
    std::vector<double>& coefs = j.coefs;
    auto load_row = [&](int g) {  // cols/coefs = -T_g
        cols.clear();
        coefs.clear();
        for (int e = 0; e < E; ++e) {
            const double v = expert_loads[static_cast<size_t>(l) * E + e] / j.mean[l];
            if (v == 0) continue;
            cols.push_back(j.w(l, e, g));
            coefs.push_back(-v);
        }
    };
    if (minmax) {
        j.t_cols[l] = j.m.add_col(std::max(1.0, j.w_max[l] / j.mean[l]), ilp::infinity(), 1.0, false);
        for (int g = 0; g < D; ++g) {
            load_row(g);
            cols.push_back(j.t_cols[l]);
            coefs.push_back(1.0);
            j.m.add_row(cols, coefs, 0.0, ilp::infinity());
        }
        return;
    }
    for (int g = 0; g < D; ++g) j.d_cols[l].push_back(j.m.add_col(0.0, ilp::infinity(), 1.0, false));
    for (int g = 0; g < D; ++g) {
        load_row(g);
        cols.push_back(j.d_cols[l][g]);
        coefs.push_back(1.0);
        j.m.add_row(cols, coefs, -1.0, ilp::infinity());  // d - T >= -1
        for (size_t k = 0; k + 1 < coefs.size(); ++k) coefs[k] = -coefs[k];
        j.m.add_row(cols, coefs, 1.0, ilp::infinity());  // d + T >= 1
    }
}

// z = w[l,e1,.] w[l+1,e2,.]' for one expert pair (RLT rows: z's rows and columns sum to the w's, and
// z >= w + w' - 1 on the links that cost); returns the first of its D*D columns
int add_joint_product(JointIlp& j, const std::vector<double>& link_cost, int l, int e1, int e2) {
    const int D = j.D;
    std::vector<int>& cols = j.cols;
    std::vector<double>& coefs = j.coefs;
    const int z0 = j.m.num_cols();
    for (int i = 0; i < D * D; ++i) j.m.add_col(0.0, 1.0, 0.0, false);
    for (int g1 = 0; g1 < D; ++g1) {
        cols.clear();
        for (int g2 = 0; g2 < D; ++g2) cols.push_back(z0 + g1 * D + g2);
        cols.push_back(j.w(l, e1, g1));
        coefs.assign(D, 1.0);
        coefs.push_back(-1.0);
        j.m.add_row(cols, coefs, 0.0, 0.0);
    }
    for (int g2 = 0; g2 < D; ++g2) {
        cols.clear();
        for (int g1 = 0; g1 < D; ++g1) cols.push_back(z0 + g1 * D + g2);
        cols.push_back(j.w(l + 1, e2, g2));
        coefs.assign(D, 1.0);
        coefs.push_back(-1.0);
        j.m.add_row(cols, coefs, 0.0, 0.0);
    }
    for (int g1 = 0; g1 < D; ++g1)
        for (int g2 = 0; g2 < D; ++g2)
            if (g1 != g2 && link_cost[static_cast<size_t>(g1) * D + g2] > 0)
                j.m.add_row({z0 + g1 * D + g2, j.w(l, e1, g1), j.w(l + 1, e2, g2)}, {1.0, -1.0, -1.0}, -1.0,
                            ilp::infinity());
    return z0;
}

// the traffic term of layer pair (l, l+1): u_l >= the link-weighted tokens on every costly link, in units of
// U_l = volume * max_link (R [E*E] the pair's transitions)
void add_joint_traffic_term(JointIlp& j, const std::vector<double>& link_cost, int l, const double* R, double volume) {
    const int D = j.D, E = j.E;
    j.u_cols[l] = j.m.add_col(0.0, ilp::infinity(), 1.0, false);
    for (int e1 = 0; e1 < E; ++e1)
        for (int e2 = 0; e2 < E; ++e2)
            if (R[e1 * E + e2] != 0)
                j.z_first[(static_cast<size_t>(l) * E + e1) * E + e2] = add_joint_product(j, link_cost, l, e1, e2);
    for (int g1 = 0; g1 < D; ++g1)
        for (int g2 = 0; g2 < D; ++g2) {
            const double lc = link_cost[static_cast<size_t>(g1) * D + g2];
            if (g1 == g2 || lc == 0) continue;
            j.cols.assign(1, j.u_cols[l]);
            j.coefs.assign(1, 1.0);
            for (int e1 = 0; e1 < E; ++e1)
                for (int e2 = 0; e2 < E; ++e2) {
                    const int z0 = j.z_first[(static_cast<size_t>(l) * E + e1) * E + e2];
                    if (z0 < 0) continue;
                    j.cols.push_back(z0 + g1 * D + g2);
                    j.coefs.push_back(-R[e1 * E + e2] * lc / (volume * j.max_link));
                }
            j.m.add_row(j.cols, j.coefs, 0.0, ilp::infinity());
        }
}

JointIlp build_joint_ilp(const std::vector<double>& expert_loads, const std::vector<double>& transitions, int L, int D,
                         int E, const std::vector<double>& link_cost, bool minmax, double band) {
    JointIlp j;
    j.L = L;
    j.D = D;
    j.E = E;
    for (int i = 0; i < L * E * D; ++i) j.m.add_binary();
    j.mean.assign(L, 0.0);
    j.w_max.assign(L, 0.0);
    for (int l = 0; l < L; ++l) {
        for (int e = 0; e < E; ++e) {
            j.mean[l] += expert_loads[static_cast<size_t>(l) * E + e] / D;
            j.w_max[l] = std::max(j.w_max[l], expert_loads[static_cast<size_t>(l) * E + e]);
        }
    }
    j.max_link = max_off_diagonal_link(link_cost, D);
    add_joint_assignment_rows(j, band);
    j.t_cols.assign(L, -1);
    j.d_cols.assign(L, {});
    for (int l = 0; l < L; ++l)
        if (j.mean[l] > 0) add_joint_load_term(j, expert_loads, l, minmax);
    j.u_cols.assign(std::max(0, L - 1), -1);
    j.z_first.assign(static_cast<size_t>(std::max(0, L - 1)) * E * E, -1);
    if (!transitions.empty() && j.max_link > 0) {
        for (int l = 0; l + 1 < L; ++l) {
            const double* R = transitions.data() + static_cast<size_t>(l) * E * E;
            const double volume = std::accumulate(R, R + static_cast<size_t>(E) * E, 0.0);
            if (volume > 0) add_joint_traffic_term(j, link_cost, l, R, volume);
        }
    }
    return j;
}

// every column's value under the two-stage placements (the warm start)
std::vector<double> joint_warm_start(const JointIlp& j, const std::vector<Placement>& two_stage,
                                     const std::vector<double>& expert_loads, const std::vector<double>& transitions,
                                     const std::vector<double>& link_cost) {
    const int L = j.L, D = j.D, E = j.E;
    std::vector<double> initial(j.m.num_cols(), 0.0);
    for (int l = 0; l < L; ++l) {
        std::vector<double> T(D, 0.0);
        for (int e = 0; e < E; ++e) {
            const int g = two_stage[l].owner[e];
            initial[j.w(l, e, g)] = 1.0;
            if (j.mean[l] > 0) T[g] += expert_loads[static_cast<size_t>(l) * E + e] / j.mean[l];
        }
        if (j.t_cols[l] >= 0)
            initial[j.t_cols[l]] = std::max(j.m.col_lb[j.t_cols[l]], *std::max_element(T.begin(), T.end()));
        for (size_t g = 0; g < j.d_cols[l].size(); ++g) initial[j.d_cols[l][g]] = std::fabs(T[g] - 1.0);
    }
    for (int l = 0; l + 1 < L; ++l) {
        if (j.u_cols[l] < 0) continue;
        const double* R = transitions.data() + static_cast<size_t>(l) * E * E;
        const double volume = std::accumulate(R, R + static_cast<size_t>(E) * E, 0.0);
        for (int e1 = 0; e1 < E; ++e1)
            for (int e2 = 0; e2 < E; ++e2) {
                const int z0 = j.z_first[(static_cast<size_t>(l) * E + e1) * E + e2];
                if (z0 >= 0) initial[z0 + two_stage[l].owner[e1] * D + two_stage[l + 1].owner[e2]] = 1.0;
            }
        initial[j.u_cols[l]] = pair_traffic_term(two_stage[l], two_stage[l + 1], R, E, link_cost, volume, j.max_link);
    }
    return initial;
}

// the placements a MIP solution's w columns give; false when some expert has no GPU or some GPU no expert
bool decode_joint_solution(const JointIlp& j, const std::vector<double>& values, std::vector<Placement>& out) {
    const int L = j.L, D = j.D, E = j.E;
    out.clear();
    for (int l = 0; l < L; ++l) {
        std::vector<int> owner(E, -1);
        std::vector<int> count(D, 0);
        for (int e = 0; e < E; ++e)
            for (int g = 0; g < D; ++g)
                if (values[j.w(l, e, g)] > 0.5) owner[e] = g;
        for (int e = 0; e < E; ++e)
            if (owner[e] < 0) return false;
        for (int g : owner) ++count[g];
        for (int g = 0; g < D; ++g)
            if (count[g] == 0) return false;
        out.push_back(Placement::make_owners(D, owner));
    }
    return true;
}

}  // namespace

std::vector<Placement> plan_moetuner_joint(const std::vector<double>& expert_loads,
                                           const std::vector<double>& transitions, int num_layers, int num_devices,
                                           int num_experts, const std::vector<double>& link_cost,
                                           const BalanceOptions& options, IlpReport* report) {
    const int L = num_layers, D = num_devices, E = num_experts;
    check_joint_limits(L, D, E);
    validate_moetuner(expert_loads, transitions, L, D, E, link_cost, options);
    const int64_t start = now_ns();
    const bool minmax = options.ilp_objective == "minmax";

    // the two-stage answer: warm start, and it fixes the memory band so that it is feasible for the joint ILP
    std::vector<Placement> two_stage = plan_moetuner(expert_loads, transitions, L, D, E, link_cost, options);
    const JointObjective two_stage_j =
        moetuner_joint_objective(two_stage, expert_loads, transitions, link_cost, options);
    const JointIlp j =
        build_joint_ilp(expert_loads, transitions, L, D, E, link_cost, minmax, joint_memory_band(two_stage, L, D, E));
    const std::vector<double> initial = joint_warm_start(j, two_stage, expert_loads, transitions, link_cost);
    ilp::MipSettings settings;
    settings.relative_gap = options.ilp_gap;
    settings.time_limit_s = options.ilp_time_limit_s;
    settings.initial = &initial;
    const ilp::MipResult result = ilp::solve_mip(j.m, settings);

    std::vector<Placement> out = two_stage;
    JointObjective best = two_stage_j;
    std::vector<Placement> candidate;
    if (result.has_solution && decode_joint_solution(j, result.values, candidate)) {
        const JointObjective cj = moetuner_joint_objective(candidate, expert_loads, transitions, link_cost, options);
        if (!less_tol(best.objective, cj.objective)) {
            out = candidate;
            best = cj;
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
