// moetuner_ilp2_search.cpp: ILP 2's data (moetuner_ilp2_search.h) and its heuristic: starts and local search.
#include "balance/moetuner_ilp2_search.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/timer.h"

namespace prophet::moetuner_detail {

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
    data.memory_lb = memory_rounding_deviation(total, D);
    return data;
}

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

namespace {

// The local search's state: gpu [L*D] (updated in place), its inverse, the memory per GPU and the key with its
// per-pair parts, kept incrementally while moves are tried.
class LocalSearch {
  public:
    LocalSearch(const Ilp2Data& data, std::vector<int>& gpu)
        : data_(data), L_(data.L), D_(data.D), gpu_(gpu), on_(static_cast<size_t>(L_) * D_), mem_(memory_of(data, gpu)),
          pair_worst_(std::max(0, L_ - 1)), pair_total_(std::max(0, L_ - 1)) {
        for (int l = 0; l < L_; ++l)
            for (int c = 0; c < D_; ++c) on_[static_cast<size_t>(l) * D_ + gpu_[static_cast<size_t>(l) * D_ + c]] = c;
        recompute();
    }

    // the key from scratch (once per pass, so incremental sums do not drift)
    void recompute() {
        key_ = Ilp2Key();
        memory_key(data_, mem_, key_);
        for (int l = 0; l + 1 < L_; ++l) {
            std::tie(pair_worst_[l], pair_total_[l]) = layer_pair_cost(data_, gpu_, l, scratch_);
            key_.traffic += pair_worst_[l];
            key_.total += pair_total_[l];
        }
    }

    // experts in the cluster of layer l on GPU g
    int size_on(int l, int g) const {
        return data_.size[static_cast<size_t>(l) * D_ + on_[static_cast<size_t>(l) * D_ + g]];
    }

    // try the swaps (layer, g1, g2) as one move; keep it if the key improves, else undo
    bool try_move(std::initializer_list<std::array<int, 3>> swaps) {
        for (const auto& s : swaps) swap_gpus(s[0], s[1], s[2]);
        Ilp2Key trial;
        memory_key(data_, mem_, trial);
        trial.traffic = key_.traffic;
        trial.total = key_.total;
        touched_.clear();
        trial_cost_.clear();
        if (data_.has_traffic) {
            for (const auto& s : swaps)
                for (int p : {s[0] - 1, s[0]})
                    if (p >= 0 && p + 1 < L_ && std::find(touched_.begin(), touched_.end(), p) == touched_.end())
                        touched_.push_back(p);
            for (int p : touched_) {
                trial_cost_.push_back(layer_pair_cost(data_, gpu_, p, scratch_));
                trial.traffic += trial_cost_.back().first - pair_worst_[p];
                trial.total += trial_cost_.back().second - pair_total_[p];
            }
        }
        if (trial < key_) {
            key_ = trial;
            for (size_t i = 0; i < touched_.size(); ++i)
                std::tie(pair_worst_[touched_[i]], pair_total_[touched_[i]]) = trial_cost_[i];
            return true;
        }
        for (auto it = std::rbegin(swaps); it != std::rend(swaps); ++it) swap_gpus((*it)[0], (*it)[1], (*it)[2]);
        return false;
    }

  private:
    // swap the GPUs g1, g2 in layer l (clusters, inverse map and memory)
    void swap_gpus(int l, int g1, int g2) {
        const size_t i1 = static_cast<size_t>(l) * D_ + g1, i2 = static_cast<size_t>(l) * D_ + g2;
        const int c1 = on_[i1], c2 = on_[i2];
        const int s1 = data_.size[static_cast<size_t>(l) * D_ + c1], s2 = data_.size[static_cast<size_t>(l) * D_ + c2];
        std::swap(gpu_[static_cast<size_t>(l) * D_ + c1], gpu_[static_cast<size_t>(l) * D_ + c2]);
        std::swap(on_[i1], on_[i2]);
        mem_[g1] += s2 - s1;
        mem_[g2] += s1 - s2;
    }

    const Ilp2Data& data_;
    const int L_, D_;
    std::vector<int>& gpu_;
    std::vector<int> on_;  // on[l*D + g] = cluster of layer l on GPU g
    std::vector<double> mem_;
    std::vector<double> pair_worst_, pair_total_;  // [L-1] u_l and the total cross cost of each pair
    std::vector<double> scratch_;
    Ilp2Key key_;
    std::vector<int> touched_;  // try_move's scratch: the pairs a move touches and their trial costs
    std::vector<std::pair<double, double>> trial_cost_;
};

// one pass of move (1): every swap of two GPUs' clusters in one layer; returns whether any improved
bool single_swap_pass(const Ilp2Data& data, LocalSearch& s) {
    bool improved = false;
    for (int l = 0; l < data.L; ++l)
        for (int g1 = 0; g1 < data.D; ++g1)
            for (int g2 = g1 + 1; g2 < data.D; ++g2) {
                if (s.size_on(l, g1) == s.size_on(l, g2) && !data.has_traffic) continue;  // changes nothing
                improved |= s.try_move({{l, g1, g2}});
            }
    return improved;
}

// one pass of move (2): memory-neutral pairs of swaps on the same GPUs in two layers; returns whether any improved
bool paired_swap_pass(const Ilp2Data& data, LocalSearch& s) {
    bool improved = false;
    for (int l = 0; l < data.L; ++l)
        for (int g1 = 0; g1 < data.D; ++g1)
            for (int g2 = g1 + 1; g2 < data.D; ++g2) {
                const int delta = s.size_on(l, g1) - s.size_on(l, g2);
                if (delta == 0) continue;
                for (int l2 = l + 1; l2 < data.L; ++l2)
                    if (s.size_on(l2, g1) - s.size_on(l2, g2) == -delta)
                        improved |= s.try_move({{l, g1, g2}, {l2, g1, g2}});
            }
    return improved;
}

}  // namespace

// Local search on the key, first improvement, until no move improves it (or max_seconds pass; the result is
// then still valid, only less improved). Moves: (1) swap the GPUs of two clusters of one layer; (2) when
// traffic matters, a memory-neutral pair of swaps on the same two GPUs g1, g2 in two layers l < l' whose size
// differences cancel: with Eq 13 tight, single swaps of unequal clusters always break memory, so without (2)
// the traffic of such layers could never improve.
void local_search(const Ilp2Data& data, std::vector<int>& gpu, double max_seconds) {
    const int64_t start = now_ns();
    LocalSearch search(data, gpu);
    bool improved = true;
    for (int pass = 0; improved && pass < 1000; ++pass) {
        if (pass > 0 && seconds_since(start) > max_seconds) break;
        improved = single_swap_pass(data, search);
        if (data.has_traffic && !improved) improved = paired_swap_pass(data, search);
        search.recompute();
    }
}

namespace {

// memory LPT: per layer, clusters by descending size onto the GPU holding the fewest experts so far ([L*D])
std::vector<int> memory_lpt_start(const Ilp2Data& data) {
    const int L = data.L, D = data.D;
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
    return lpt;
}

// Layer l+1 of the traffic greedy: clusters by descending inflow, each to the free GPU that keeps the busiest pair
// cheapest (then the total cross cost, then the lower index). greedy [L*D]: layer l set, layer l+1 filled here.
void greedy_next_layer(const Ilp2Data& data, int l, std::vector<int>& greedy) {
    const int D = data.D;
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
        PROPHET_ASSERT(best >= 0);  // D >= 1 free GPUs remain for every cluster
        used[best] = 1;
        greedy[static_cast<size_t>(l + 1) * D + c2] = best;
        worst = best_worst;
        for (int c1 = 0; c1 < D; ++c1)
            pair[static_cast<size_t>(greedy[static_cast<size_t>(l) * D + c1]) * D + best] += data.c_at(l, c1, c2);
    }
}

}  // namespace

// the three deterministic starts: identity, memory-LPT per layer, traffic greedy layer by layer
std::vector<std::vector<int>> heuristic_starts(const Ilp2Data& data) {
    const int L = data.L, D = data.D;
    std::vector<std::vector<int>> starts;
    std::vector<int> identity(static_cast<size_t>(L) * D);
    for (int l = 0; l < L; ++l)
        for (int c = 0; c < D; ++c) identity[static_cast<size_t>(l) * D + c] = c;
    starts.push_back(identity);
    starts.push_back(memory_lpt_start(data));
    if (data.has_traffic) {
        std::vector<int> greedy = identity;  // layer 0 as identity
        for (int l = 0; l + 1 < L; ++l) greedy_next_layer(data, l, greedy);
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

}  // namespace prophet::moetuner_detail
