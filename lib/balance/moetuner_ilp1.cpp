// moetuner_ilp1.cpp: MoETuner's ILP 1 (load-balanced expert clustering, one layer at a time) and the input
// checks every MoETuner stage shares. The formulation is in policy_moetuner.cpp's header comment.
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

namespace moetuner_detail {

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


namespace {

void validate_values(const std::vector<double>& values, const std::string& name) {
    for (double v : values)
        if (!std::isfinite(v) || v < 0)
            throw_config_error(name, std::to_string(v), "values must be finite and >= 0", "");
}

}  // namespace

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

// objective of cluster loads T [D] (raw units) around mean
double cluster_objective(const std::vector<double>& T, double mean, bool minmax) {
    double v = 0;
    for (double t : T) v = minmax ? std::max(v, t) : v + std::fabs(t - mean);
    return v;
}

}  // namespace moetuner_detail

using namespace moetuner_detail;

namespace {

// The local search's key of cluster loads T: (ILP 1's objective, sum of squared loads), and the key after two clusters
// change, in O(1): the sums by their two changed terms, the maximum from the three largest loads.
class ClusterKey {
  public:
    ClusterKey(const std::vector<double>& T, double mean, bool minmax) : T_(T), mean_(mean), minmax_(minmax) {
        refresh();
    }
    void refresh() {  // after T changed
        sq_ = dev_ = 0;
        top_[0] = top_[1] = top_[2] = -1;
        for (int c = 0; c < static_cast<int>(T_.size()); ++c) {
            sq_ += T_[c] * T_[c];
            dev_ += std::fabs(T_[c] - mean_);
            for (int k = 0; k < 3; ++k)
                if (top_[k] < 0 || T_[c] > T_[top_[k]]) {
                    for (int j = 2; j > k; --j) top_[j] = top_[j - 1];
                    top_[k] = c;
                    break;
                }
        }
    }
    std::pair<double, double> now() const { return {cluster_objective(T_, mean_, minmax_), sq_}; }
    // the key with T[a] = ta and T[b] = tb
    std::pair<double, double> after(int a, double ta, int b, double tb) const {
        const double sq = sq_ - T_[a] * T_[a] - T_[b] * T_[b] + ta * ta + tb * tb;
        if (!minmax_)
            return {dev_ - std::fabs(T_[a] - mean_) - std::fabs(T_[b] - mean_) + std::fabs(ta - mean_) +
                        std::fabs(tb - mean_),
                    sq};
        double top = std::max({0.0, ta, tb});
        for (int c : top_)
            if (c >= 0 && c != a && c != b) {
                top = std::max(top, T_[c]);
                break;
            }
        return {top, sq};
    }

  private:
    const std::vector<double>& T_;
    double mean_;
    bool minmax_;
    double sq_ = 0, dev_ = 0;
    int top_[3];  // the three largest loads' clusters (-1: fewer clusters)
};

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
    auto better = [](const std::pair<double, double>& a, const std::pair<double, double>& b) {
        if (less_tol(a.first, b.first)) return true;
        if (less_tol(b.first, a.first)) return false;
        return less_tol(a.second, b.second);
    };
    // bounded first-improvement search: every accepted step strictly lowers the key; a trial changes two clusters,
    // so its key costs O(1) (ClusterKey), not a copy of T
    std::vector<std::vector<int>> members(D);
    for (int e = 0; e < E; ++e) members[cluster[e]].push_back(e);
    ClusterKey key(T, mean, minmax);
    auto current = key.now();
    int64_t evaluations = 0;
    const int64_t max_evaluations = 20'000'000;
    auto accept = [&](int a, double ta, int b, double tb, const std::pair<double, double>& trial) {
        T[a] = ta;
        T[b] = tb;
        key.refresh();
        current = trial;
    };
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
                        const double ta = T[a] - w[e], tb = T[b] + w[e];
                        const auto trial = key.after(a, ta, b, tb);
                        if (better(trial, current)) {
                            members[a].erase(members[a].begin() + i);
                            members[b].push_back(e);
                            cluster[e] = b;
                            accept(a, ta, b, tb, trial);
                            improved = true;
                            break;
                        }
                    }
                    // swap e (in a) with f (in b), f lighter
                    for (size_t j = 0; j < members[b].size(); ++j) {
                        const int f = members[b][j];
                        if (!(w[f] < w[e])) continue;
                        ++evaluations;
                        const double ta = T[a] + (w[f] - w[e]), tb = T[b] + (w[e] - w[f]);
                        const auto trial = key.after(a, ta, b, tb);
                        if (better(trial, current)) {
                            members[a][i] = f;
                            members[b][j] = e;
                            cluster[e] = b;
                            cluster[f] = a;
                            accept(a, ta, b, tb, trial);
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

}  // namespace prophet
