// trace_generate.cpp: seeded synthetic routing traces (uniform, zipf, device_preference, drift, shift) from a
// small TOML file (its keys and checks: generator_params.h). Every token of every device draws top_k distinct
// experts per layer from its device's expert distribution (alias table, duplicates rejected), so transitions
// between consecutive layers are exact.
// All randomness comes from prophet::Rng streams derived from the seed: the same file gives the same trace,
// bit for bit, on every machine, and a longer run starts with the same iterations as a shorter one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "trace/generator_params.h"
#include "trace/multinomial.h"
#include "trace/trace.h"

namespace prophet {
namespace {

using trace_gen::Generator;
using trace_gen::Params;

constexpr int kRejectionTries = 16;  // duplicate draws before the exact renormalised draw

// Independent random streams, so that changing one aspect (e.g. num_iterations) leaves the others unchanged.
enum StreamTag : uint64_t { kStreamPopularity = 1, kStreamWindows = 2, kStreamTokens = 3, kStreamAffinity = 4 };

uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t stream_seed(uint64_t seed, uint64_t tag, uint64_t index) {
    return mix64(mix64(mix64(seed) + tag * 0x9E3779B97F4A7C15ull) + index * 0xD1B54A32D192ED03ull);
}

// Walker/Vose alias table: one uniform draw per sample.
class AliasTable {
  public:
    void build(const std::vector<double>& weights) {
        const int n = static_cast<int>(weights.size());
        threshold_.assign(n, 1.0);
        alias_.resize(n);
        std::iota(alias_.begin(), alias_.end(), 0);
        const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
        PROPHET_ASSERT_MSG(sum > 0.0 && std::isfinite(sum), "expert distribution has no mass");
        std::vector<double> scaled(n);  // [n] weight x n / sum
        std::vector<int> small;
        std::vector<int> large;
        int first_positive = -1;
        for (int i = 0; i < n; ++i) {
            scaled[i] = weights[i] * n / sum;
            (scaled[i] < 1.0 ? small : large).push_back(i);
            if (first_positive < 0 && weights[i] > 0.0) first_positive = i;
        }
        while (!small.empty() && !large.empty()) {
            const int s = small.back();
            small.pop_back();
            const int g = large.back();
            large.pop_back();
            threshold_[s] = scaled[s];
            alias_[s] = g;
            scaled[g] = (scaled[g] + scaled[s]) - 1.0;
            (scaled[g] < 1.0 ? small : large).push_back(g);
        }
        // leftovers are 1 up to rounding; an expert with no mass must never be returned
        for (int i : small) {
            threshold_[i] = weights[i] > 0.0 ? 1.0 : 0.0;
            alias_[i] = weights[i] > 0.0 ? i : first_positive;
        }
    }
    int draw(Rng& rng) const {
        const int n = static_cast<int>(threshold_.size());
        const double x = rng.uniform() * n;
        const int column = std::min(static_cast<int>(x), n - 1);
        return (x - column) < threshold_[column] ? column : alias_[column];
    }

  private:
    std::vector<double> threshold_;  // [n] probability of keeping the column
    std::vector<int> alias_;         // [n] the other expert of the column
};

// One expert distribution (a layer, or a layer and device) and its sampler.
class ExpertSampler {
  public:
    void build(std::vector<double> weights) {
        table_.build(weights);
        probability_ = std::move(weights);
    }
    const std::vector<double>& weights() const { return probability_; }
    // top_k distinct experts into out[0, k); chosen: [E] flags, all false on entry and on return
    void draw_distinct(Rng& rng, int k, int* out, std::vector<char>& chosen) const {
        for (int j = 0; j < k; ++j) {
            int expert = -1;
            for (int attempt = 0; attempt < kRejectionTries; ++attempt) {
                const int candidate = table_.draw(rng);
                if (!chosen[candidate]) {
                    expert = candidate;
                    break;
                }
            }
            if (expert < 0) expert = draw_remaining(rng, chosen);
            chosen[expert] = 1;
            out[j] = expert;
        }
        for (int j = 0; j < k; ++j) chosen[out[j]] = 0;
    }

  private:
    // exact draw from the distribution renormalised over the experts not chosen yet (uniform if they have no mass)
    int draw_remaining(Rng& rng, const std::vector<char>& chosen) const {
        const int n = static_cast<int>(probability_.size());
        double mass = 0.0;
        int remaining = 0;
        int last_positive = -1;
        for (int e = 0; e < n; ++e) {
            if (chosen[e]) continue;
            ++remaining;
            mass += probability_[e];
            if (probability_[e] > 0.0) last_positive = e;
        }
        PROPHET_ASSERT(remaining > 0);
        if (mass > 0.0) {
            double target = rng.uniform() * mass;
            for (int e = 0; e < n; ++e) {
                if (chosen[e] || probability_[e] <= 0.0) continue;
                target -= probability_[e];
                if (target < 0.0) return e;
            }
            return last_positive;
        }
        uint64_t pick = rng.below(static_cast<uint64_t>(remaining));
        for (int e = 0; e < n; ++e) {
            if (chosen[e]) continue;
            if (pick-- == 0) return e;
        }
        PROPHET_ASSERT(false);
        return -1;
    }

    AliasTable table_;
    std::vector<double> probability_;  // [E] weights (not necessarily normalised)
};

// Generator state: each layer's popularity as log-weights, evolved iteration by iteration.
class PopularityModel {
  public:
    explicit PopularityModel(const Params& p)
        : p_(p), rng_(stream_seed(p.seed, kStreamPopularity, 0)), order_(p.num_layers),
          log_weight_(static_cast<size_t>(p.num_layers) * p.num_experts, 0.0) {
        const int num_experts = p.num_experts;
        for (int l = 0; l < p.num_layers; ++l) {
            order_[l].resize(num_experts);
            std::iota(order_[l].begin(), order_[l].end(), 0);
            rng_.shuffle(order_[l].data(), num_experts);
            set_zipf(l);
        }
        // affinity mapping: the expert of rank r at layer l goes to the expert of rank rank_to[r] at layer l+1;
        // "rank": rank_to[r] = r (popular follows popular); "random": a random permutation per layer pair (its own
        // stream, so the popularity and token draws are those of "rank"), as real routing's affinities are
        mapping_.assign(static_cast<size_t>(std::max(0, p.num_layers - 1)) * num_experts, 0);
        Rng affinity(stream_seed(p.seed, kStreamAffinity, 0));
        std::vector<int> rank_to(num_experts);
        for (int l = 0; l + 1 < p.num_layers; ++l) {
            std::iota(rank_to.begin(), rank_to.end(), 0);
            if (p.random_affinity) affinity.shuffle(rank_to.data(), num_experts);
            for (int r = 0; r < num_experts; ++r)
                mapping_[static_cast<size_t>(l) * num_experts + order_[l][r]] = order_[l + 1][rank_to[r]];
        }
    }

    // moves the popularity to `iteration` (called with 0, 1, 2, ... in order)
    void advance(int iteration) {
        if (iteration == 0) return;
        if (p_.generator == Generator::kDrift) {
            for (double& w : log_weight_) w += p_.drift_rate * rng_.normal();
        } else if (p_.generator == Generator::kShift && iteration % p_.shift_period == 0) {
            for (int l = 0; l < p_.num_layers; ++l) {
                const std::vector<int> old = order_[l];
                do {
                    rng_.shuffle(order_[l].data(), p_.num_experts);
                } while (p_.num_experts > 1 && order_[l] == old);
                set_zipf(l);
            }
        }
    }

    // popularity of layer l as weights (not normalised) with the largest weight 1: [E]
    std::vector<double> weights(int l) const {
        const double* lw = log_weight_.data() + static_cast<size_t>(l) * p_.num_experts;
        const double top = *std::max_element(lw, lw + p_.num_experts);
        std::vector<double> w(p_.num_experts);
        for (int e = 0; e < p_.num_experts; ++e) w[e] = std::exp(lw[e] - top);
        return w;
    }

    // [L-1][E]: expert at layer l+1 that expert e at layer l maps to
    const std::vector<int>& mapping() const { return mapping_; }

  private:
    void set_zipf(int l) {
        const bool flat = p_.generator == Generator::kUniform;
        double* lw = log_weight_.data() + static_cast<size_t>(l) * p_.num_experts;
        for (int r = 0; r < p_.num_experts; ++r) lw[order_[l][r]] = flat ? 0.0 : -p_.zipf_s * std::log(r + 1.0);
    }

    const Params& p_;
    Rng rng_;
    std::vector<std::vector<int>> order_;  // [L][E] expert of each popularity rank (0 = most popular)
    std::vector<double> log_weight_;       // [L][E] natural log of the unnormalised popularity
    std::vector<int> mapping_;             // [L-1][E]
};

// device_preference: device d moves a share `strength` of its probability onto its window of experts
// (mixture (1 - strength) p + strength p|window); windows rotate with the device and start at a per-layer offset.
std::vector<double> device_weights(const std::vector<double>& layer_weights, int device, int window_start,
                                   const Params& p) {
    const int num_experts = p.num_experts;
    const int window = std::max(1, num_experts / p.num_devices);
    const int start = (static_cast<int>(static_cast<int64_t>(device) * num_experts / p.num_devices) + window_start) %
                      num_experts;
    const double total = std::accumulate(layer_weights.begin(), layer_weights.end(), 0.0);
    double window_mass = 0.0;
    for (int j = 0; j < window; ++j) window_mass += layer_weights[(start + j) % num_experts];
    std::vector<double> w(num_experts);
    for (int e = 0; e < num_experts; ++e) w[e] = (1.0 - p.preference_strength) * layer_weights[e] / total;
    for (int j = 0; j < window; ++j) {
        const int e = (start + j) % num_experts;
        w[e] += p.preference_strength * (window_mass > 0.0 ? layer_weights[e] / window_mass : 1.0 / window);
    }
    return w;
}

TraceMeta generated_meta(const Params& p) {
    TraceMeta meta;
    meta.num_iterations = p.num_iterations;
    meta.num_layers = p.num_layers;
    meta.num_devices = p.num_devices;
    meta.num_experts = p.num_experts;
    meta.top_k = p.top_k;
    meta.tokens_per_iteration = p.tokens_per_iteration;
    meta.d_model = p.d_model;
    meta.d_ffn = p.d_ffn;
    meta.seq_len = p.seq_len;
    meta.source = "synthetic:" + p.generator_name;
    return meta;
}

// The per-token path's inputs and one thread's scratch (generate() keeps one per thread).
struct TokenRouting {
    const Params& p;
    const std::vector<int>& mapping;             // [L-1][E] the layer affinity's expert map
    const std::vector<ExpertSampler>& samplers;  // [L][num_tables]
    int num_tables;
    bool use_affinity;
    bool record;                       // transitions are recorded
    std::vector<int> experts;          // [2][K] this and the previous layer's choices
    std::vector<char> chosen;          // [E] scratch for distinct draws
    std::vector<int64_t*> count_rows;  // [L] -> [E] counts of this iteration and device
};

// Every layer's sampler [L][D or 1] from this iteration's popularity: one table per device when per_device
// (device_preference, each device's window from window_start [L]).
void rebuild_samplers(const Params& p, const PopularityModel& popularity, bool per_device,
                      const std::vector<int>& window_start, std::vector<ExpertSampler>& samplers) {
    const int num_tables = per_device ? p.num_devices : 1;
    for (int l = 0; l < p.num_layers; ++l) {
        std::vector<double> weights = popularity.weights(l);
        if (!per_device) {
            samplers[l].build(std::move(weights));
            continue;
        }
        for (int d = 0; d < p.num_devices; ++d)
            samplers[static_cast<size_t>(l) * num_tables + d].build(device_weights(weights, d, window_start[l], p));
    }
}

// One device's tokens of one iteration, each drawing top_k distinct experts per layer (or following the layer
// affinity from the previous layer's choice): adds to r.count_rows and, when recorded, to transitions [L-1][E][E].
void route_tokens(TokenRouting& r, Rng& rng, int table, int64_t* transitions) {
    const Params& p = r.p;
    const int num_experts = p.num_experts, num_layers = p.num_layers, top_k = p.top_k;
    const size_t pairs = static_cast<size_t>(num_experts) * num_experts;
    const int64_t tokens_per_device = p.tokens_per_iteration / p.num_devices;
    for (int64_t t = 0; t < tokens_per_device; ++t) {
        for (int l = 0; l < num_layers; ++l) {
            int* current = r.experts.data() + (l & 1) * top_k;
            const int* previous = r.experts.data() + ((l + 1) & 1) * top_k;
            if (l > 0 && r.use_affinity && rng.uniform() < p.layer_affinity) {
                const int* map = r.mapping.data() + static_cast<size_t>(l - 1) * num_experts;
                for (int j = 0; j < top_k; ++j) current[j] = map[previous[j]];
            } else {
                r.samplers[static_cast<size_t>(l) * r.num_tables + table].draw_distinct(rng, top_k, current, r.chosen);
            }
            int64_t* row = r.count_rows[l];
            for (int j = 0; j < top_k; ++j) ++row[current[j]];
            if (r.record && l > 0) {
                int64_t* pair_counts = transitions + static_cast<size_t>(l - 1) * pairs;
                for (int a = 0; a < top_k; ++a) {
                    int64_t* from = pair_counts + static_cast<size_t>(previous[a]) * num_experts;
                    for (int b = 0; b < top_k; ++b) ++from[current[b]];
                }
            }
        }
    }
}

// One device's tokens of iteration i: its rows of the trace's counts (and, when recorded, of the iteration's
// transitions [L-1][E][E]), from the device's own random stream.
void draw_device(TokenRouting& r, Trace& trace, int i, int d, int64_t* transitions) {
    const Params& p = r.p;
    Rng rng(stream_seed(p.seed, kStreamTokens, static_cast<uint64_t>(i) * p.num_devices + d));
    for (int l = 0; l < p.num_layers; ++l)
        r.count_rows[l] = trace.layer_counts(i, l) + static_cast<size_t>(d) * p.num_experts;
    const int table = r.num_tables > 1 ? d : 0;
    if (!p.count_sampling) {
        route_tokens(r, rng, table, transitions);
        return;
    }
    const int64_t tokens_per_device = p.tokens_per_iteration / p.num_devices;
    for (int l = 0; l < p.num_layers; ++l)  // top_k = 1, no affinity, no transitions (check_count_sampling)
        multinomial(rng, tokens_per_device, r.samplers[static_cast<size_t>(l) * r.num_tables + table].weights(),
                    r.count_rows[l]);
}

// The trace, its devices drawn on up to `threads` threads: each device has its own stream and rows, so the trace
// does not depend on the thread count; one thread when transitions are recorded (every device adds to them).
Trace generate(const Params& p, int threads) {
    Trace trace;
    trace.meta = generated_meta(p);
    const int num_experts = p.num_experts;
    const int num_layers = p.num_layers;
    const size_t matrix = static_cast<size_t>(p.num_devices) * num_experts;
    const size_t pairs = static_cast<size_t>(num_experts) * num_experts;
    trace.counts.assign(static_cast<size_t>(p.num_iterations) * num_layers * matrix, 0);
    const bool record = p.record_transitions && num_layers > 1;
    if (record) trace.transitions.assign(static_cast<size_t>(p.num_iterations) * (num_layers - 1) * pairs, 0);

    PopularityModel popularity(p);
    const bool per_device = p.generator == Generator::kDevicePreference;
    std::vector<int> window_start(num_layers, 0);  // [L]
    if (per_device) {
        Rng windows(stream_seed(p.seed, kStreamWindows, 0));
        for (int& start : window_start) start = static_cast<int>(windows.below(num_experts));
    }
    const int num_tables = per_device ? p.num_devices : 1;
    std::vector<ExpertSampler> samplers(static_cast<size_t>(num_layers) * num_tables);  // [L][D or 1]
    const int workers = record ? 1 : std::clamp(threads, 1, p.num_devices);
    const TokenRouting scratch{p,
                               popularity.mapping(),
                               samplers,
                               num_tables,
                               p.layer_affinity > 0.0 && num_layers > 1,
                               record,
                               std::vector<int>(static_cast<size_t>(2) * p.top_k),
                               std::vector<char>(num_experts, 0),
                               std::vector<int64_t*>(num_layers)};
    std::vector<TokenRouting> routing(static_cast<size_t>(workers), scratch);  // one per thread
    for (int i = 0; i < p.num_iterations; ++i) {
        popularity.advance(i);
        rebuild_samplers(p, popularity, per_device, window_start, samplers);
        int64_t* transitions = record ? trace.transitions.data() + static_cast<size_t>(i) * (num_layers - 1) * pairs
                                      : nullptr;  // [L-1][E][E] of this iteration
        parallel_for(p.num_devices, workers,
                     [&](int d, int worker) { draw_device(routing[worker], trace, i, d, transitions); });
    }
    return trace;
}

}  // namespace

Trace generate_trace(const Config& config, const std::string& origin, int threads) {
    const Params params = trace_gen::read_params(config, origin);
    Trace trace = generate(params, threads);
    validate_trace(trace, origin);
    return trace;
}

Trace generate_trace_from_toml_string(const std::string& toml_text, const std::string& origin, int threads) {
    Config config(trace_generator_schema(), "trace generator " + origin);
    config.merge_toml_string(toml_text, origin);
    return generate_trace(config, origin, threads);
}

Trace generate_trace_from_toml(const std::string& toml_path, int threads) {
    Config config(trace_generator_schema(), "trace generator " + toml_path);
    config.merge_toml_file(toml_path);
    return generate_trace(config, toml_path, threads);
}

}  // namespace prophet
