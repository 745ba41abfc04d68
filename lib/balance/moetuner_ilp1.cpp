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

// (objective, sum of squares) keys: a strictly better than b (by the tolerance of less_tol)
bool better_key(const std::pair<double, double>& a, const std::pair<double, double>& b) {
    if (less_tol(a.first, b.first)) return true;
    if (less_tol(b.first, a.first)) return false;
    return less_tol(a.second, b.second);
}

// LPT: experts by descending load to the lightest cluster; the first D experts open the D clusters, so none is
// empty. Returns cluster [E]; T [D] gets the cluster loads.
std::vector<int> lpt_clusters(const std::vector<double>& w, int D, std::vector<double>& T) {
    const int E = static_cast<int>(w.size());
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
    std::vector<int> cluster(E, -1), size(D, 0);
    T.assign(D, 0.0);
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
    return cluster;
}

// Bounded first-improvement search over one partition: every accepted step strictly lowers the key; a trial
// changes two clusters, so its key costs O(1) (ClusterKey), not a copy of T.
class ClusterSearch {
  public:
    ClusterSearch(const std::vector<double>& w, int D, bool minmax, std::vector<int>& cluster, std::vector<double>& T)
        : w_(w), D_(D), cluster_(cluster), T_(T), members_(D),
          key_(T, std::accumulate(w.begin(), w.end(), 0.0) / D, minmax), current_(key_.now()) {
        for (int e = 0; e < static_cast<int>(w.size()); ++e) members_[cluster_[e]].push_back(e);
    }

    int64_t evaluations() const { return evaluations_; }

    // the first improving move or swap, applied; false when none improves
    bool improve_once() {
        for (int a = 0; a < D_; ++a)
            for (int b = 0; b < D_; ++b) {
                if (a == b || !(T_[a] > T_[b])) continue;  // only heavier -> lighter can help either key
                if (improve_pair(a, b)) return true;
            }
        return false;
    }

  private:
    // moves of one expert from a to b, or swaps of e (in a) with a lighter f (in b)
    bool improve_pair(int a, int b) {
        for (size_t i = 0; i < members_[a].size(); ++i) {
            const int e = members_[a][i];
            if (members_[a].size() > 1) {  // move e: a -> b
                ++evaluations_;
                const double ta = T_[a] - w_[e], tb = T_[b] + w_[e];
                const auto trial = key_.after(a, ta, b, tb);
                if (better_key(trial, current_)) {
                    members_[a].erase(members_[a].begin() + i);
                    members_[b].push_back(e);
                    cluster_[e] = b;
                    accept(a, ta, b, tb, trial);
                    return true;
                }
            }
            for (size_t j = 0; j < members_[b].size(); ++j) {  // swap e (in a) with f (in b), f lighter
                const int f = members_[b][j];
                if (!(w_[f] < w_[e])) continue;
                ++evaluations_;
                const double ta = T_[a] + (w_[f] - w_[e]), tb = T_[b] + (w_[e] - w_[f]);
                const auto trial = key_.after(a, ta, b, tb);
                if (better_key(trial, current_)) {
                    members_[a][i] = f;
                    members_[b][j] = e;
                    cluster_[e] = b;
                    cluster_[f] = a;
                    accept(a, ta, b, tb, trial);
                    return true;
                }
            }
        }
        return false;
    }

    void accept(int a, double ta, int b, double tb, const std::pair<double, double>& trial) {
        T_[a] = ta;
        T_[b] = tb;
        key_.refresh();
        current_ = trial;
    }

    const std::vector<double>& w_;
    const int D_;
    std::vector<int>& cluster_;
    std::vector<double>& T_;
    std::vector<std::vector<int>> members_;  // [D] experts of each cluster
    ClusterKey key_;
    std::pair<double, double> current_;
    int64_t evaluations_ = 0;
};

// LPT, then first-improvement moves and swaps on the key (objective, sum of squared cluster loads).
std::vector<int> greedy_clusters(const std::vector<double>& w, int D, bool minmax) {
    std::vector<double> T;
    std::vector<int> cluster = lpt_clusters(w, D, T);
    ClusterSearch search(w, D, minmax, cluster, T);
    const int64_t max_evaluations = 20'000'000;
    while (search.evaluations() < max_evaluations && search.improve_once()) {
    }
    return cluster;
}

// ILP 1's model: x[c,e] (columns 0 .. D*E-1, c > rank(e) fixed to 0), then t (minmax) or d[D] (sumdev)
struct Ilp1Model {
    ilp::MipModel m;
    int E = 0, D = 0;
    int t_col = -1;
    std::vector<int> d_cols;
    int x(int c, int e) const { return c * E + e; }
};

// w [E] loads in mean units, rank [E] each expert's place by descending load, w_max the largest w
Ilp1Model build_ilp1(const std::vector<double>& w, const std::vector<int>& rank, int D, bool minmax, double w_max) {
    const int E = static_cast<int>(w.size());
    Ilp1Model out;
    out.E = E;
    out.D = D;
    ilp::MipModel& m = out.m;
    for (int c = 0; c < D; ++c)
        for (int e = 0; e < E; ++e) {
            const int col = m.add_binary();
            if (c > rank[e]) m.col_ub[col] = 0.0;  // cluster c's first member has rank >= c
        }
    if (minmax) {
        out.t_col = m.add_col(std::max(1.0, w_max), ilp::infinity(), 1.0, false);
    } else {
        for (int c = 0; c < D; ++c) out.d_cols.push_back(m.add_col(0.0, ilp::infinity(), 1.0, false));
    }
    std::vector<int> cols;
    std::vector<double> coefs;
    for (int e = 0; e < E; ++e) {  // partition: sum_c x[c,e] = 1
        cols.clear();
        for (int c = 0; c < D; ++c) cols.push_back(out.x(c, e));
        m.add_row(cols, std::vector<double>(D, 1.0), 1.0, 1.0);
    }
    for (int c = 0; c < D; ++c) {
        cols.clear();  // Eq 7: sum_e x[c,e] >= 1
        for (int e = 0; e < E; ++e) cols.push_back(out.x(c, e));
        m.add_row(cols, std::vector<double>(E, 1.0), 1.0, ilp::infinity());
        cols.clear();  // -T_c = -sum_e w_e x[c,e]
        coefs.clear();
        for (int e = 0; e < E; ++e) {
            if (w[e] == 0) continue;
            cols.push_back(out.x(c, e));
            coefs.push_back(-w[e]);
        }
        cols.push_back(minmax ? out.t_col : out.d_cols[c]);
        coefs.push_back(1.0);
        if (minmax) {
            m.add_row(cols, coefs, 0.0, ilp::infinity());  // t - T_c >= 0
            continue;
        }
        m.add_row(cols, coefs, -1.0, ilp::infinity());                       // d_c - T_c >= -1
        for (size_t k = 0; k + 1 < coefs.size(); ++k) coefs[k] = -coefs[k];  // d_c + T_c >= 1
        m.add_row(cols, coefs, 1.0, ilp::infinity());
    }
    if (!minmax) m.add_row(out.d_cols, std::vector<double>(D, 1.0), 2.0 * std::max(0.0, w_max - 1.0), ilp::infinity());
    return out;
}

// the warm start: partition cluster [E] and its objective columns
std::vector<double> ilp1_warm_start(const Ilp1Model& model, const std::vector<int>& cluster,
                                    const std::vector<double>& w, double w_max) {
    const int E = model.E, D = model.D;
    std::vector<double> values(model.m.num_cols(), 0.0);
    std::vector<double> T(D, 0.0);
    for (int e = 0; e < E; ++e) {
        values[model.x(cluster[e], e)] = 1.0;
        T[cluster[e]] += w[e];
    }
    if (model.t_col >= 0) {
        values[model.t_col] = std::max(std::max(1.0, w_max), *std::max_element(T.begin(), T.end()));
    } else {
        for (int c = 0; c < D; ++c) values[model.d_cols[c]] = std::fabs(T[c] - 1.0);
    }
    return values;
}

// A MIP solution's partition [E]: the cluster of every expert, up to the first expert with none (-1) or several
// (-2), the rest -1. Returns whether it is a partition into D non-empty clusters.
bool decode_ilp1(const Ilp1Model& model, const std::vector<double>& values, std::vector<int>& candidate) {
    const int E = model.E, D = model.D;
    candidate.assign(E, -1);
    std::vector<int> size(D, 0);
    for (int e = 0; e < E; ++e) {
        int found = -1;
        for (int c = 0; c < D; ++c)
            if (values[model.x(c, e)] > 0.5) found = found < 0 ? c : -2;
        candidate[e] = found;
        if (found < 0) return false;
        ++size[found];
    }
    for (int c = 0; c < D; ++c)
        if (size[c] == 0) return false;
    return true;
}

// order [E]: experts by descending w (stable), rank [E] its inverse
void rank_experts(const std::vector<double>& w, std::vector<int>& order, std::vector<int>& rank) {
    const int E = static_cast<int>(w.size());
    order.resize(E);
    rank.resize(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
    for (int r = 0; r < E; ++r) rank[order[r]] = r;
}

// cluster [E] relabelled so that clusters are numbered by their first member in rank order (order [E])
std::vector<int> canonical_labels(const std::vector<int>& cluster, const std::vector<int>& order, int D) {
    const int E = static_cast<int>(cluster.size());
    std::vector<int> label(D, -1);
    int next = 0;
    for (int r = 0; r < E; ++r) {
        const int c = cluster[order[r]];
        if (label[c] < 0) label[c] = next++;
    }
    std::vector<int> out(E);
    for (int e = 0; e < E; ++e) out[e] = label[cluster[e]];
    return out;
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
    auto evaluate = [&](const std::vector<int>& cluster) {
        std::vector<double> T(D, 0.0);
        for (int e = 0; e < E; ++e) T[cluster[e]] += loads[e];
        return cluster_objective(T, mean, minmax);
    };

    std::vector<int> greedy = greedy_clusters(w, D, minmax);
    if (!(mean > 0) || D == 1) {  // nothing to balance (no load, or one cluster)
        out.cluster = greedy;
        out.objective = out.bound = evaluate(greedy);
        out.optimal = true;
        out.solve_s = seconds_since(start);
        return out;
    }
    std::vector<int> order, rank;  // symmetry breaking works on ranks
    rank_experts(w, order, rank);
    const double w_max = w[order[0]];
    greedy = canonical_labels(greedy, order, D);
    const Ilp1Model model = build_ilp1(w, rank, D, minmax, w_max);
    const std::vector<double> start_values = ilp1_warm_start(model, greedy, w, w_max);
    ilp::MipSettings settings;
    settings.relative_gap = options.ilp_gap;
    settings.time_limit_s = options.ilp_time_limit_s;
    settings.initial = ilp_only ? nullptr : &start_values;
    const ilp::MipResult result = ilp::solve_mip(model.m, settings);

    out.cluster = greedy;
    if (ilp_only) out.cluster.assign(E, -1);  // tests: CBC's answer or nothing
    std::vector<int> candidate;
    if (result.has_solution) {
        const bool valid = decode_ilp1(model, result.values, candidate);
        if (ilp_only || (valid && !less_tol(evaluate(greedy), evaluate(candidate)))) out.cluster = candidate;
    }
    if (std::find_if(out.cluster.begin(), out.cluster.end(), [](int c) { return c < 0; }) != out.cluster.end()) {
        out.objective = kInf;  // ilp_only and CBC's answer is not a partition
        out.solve_s = seconds_since(start);
        return out;
    }
    out.objective = evaluate(out.cluster);
    out.bound = std::min(out.objective, result.has_solution ? result.bound * mean : 0.0);
    out.optimal = result.optimal;  // CBC proved its incumbent (its own or the warm start) within the gap
    out.solve_s = seconds_since(start);
    return out;
}

}  // namespace prophet
