// trace_generate.cpp: seeded synthetic routing traces (uniform, zipf, device_preference, drift, shift) from a
// small TOML file. Every token of every device draws top_k distinct experts per layer from its device's expert
// distribution (alias table, duplicates rejected), so transitions between consecutive layers are exact.
// All randomness comes from prophet::Rng streams derived from the seed: the same file gives the same trace,
// bit for bit, on every machine, and a longer run starts with the same iterations as a shorter one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/enum_table.h"
#include "core/error.h"
#include "core/key_spec.h"
#include "core/rng.h"
#include "trace/multinomial.h"
#include "trace/trace.h"

namespace prophet {
namespace {

constexpr uint64_t kMaxElements = 1ull << 31;  // per array (counts, transitions)
// What one generator TOML may ask for (exit 4 beyond): the counts and transitions together at most 2^28 int64
// (2 GiB; 8 lines once asked for 32 GiB), and at most 2^32 expert draws (iterations x layers x tokens x top_k,
// one draw per token, layer and choice; 8 lines once asked for 2^40 tokens per iteration, hours of work). The
// largest shipped generator (experiments/) needs 1.6e7 draws and 5e5 counts.
constexpr double kMaxGeneratedElements = 0x1p28;
constexpr double kMaxDraws = 0x1p32;
constexpr int kRejectionTries = 16;            // duplicate draws before the exact renormalised draw

enum class Generator { kUniform, kZipf, kDevicePreference, kDrift, kShift };

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

struct Params {
    Generator generator = Generator::kZipf;
    std::string generator_name;
    uint64_t seed = 0;
    int num_experts = 0;  // E
    int num_devices = 0;  // D
    int top_k = 1;        // K
    int64_t tokens_per_iteration = 0;
    int num_iterations = 0;  // I
    int num_layers = 0;      // L
    double zipf_s = 1.2;
    double preference_strength = 0.0;
    double drift_rate = 0.0;
    int shift_period = 1;
    bool record_transitions = true;
    double layer_affinity = 0.0;
    bool random_affinity = false;  // trace.affinity_mapping = "random": rank r -> a random rank at layer l+1
    bool count_sampling = false;   // trace.sampling = "counts": each (iteration, layer, device) row at once
    int d_model = 0;
    int d_ffn = 0;
    int seq_len = 0;
};

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

constexpr EnumName<Generator> kGeneratorNames[] = {{Generator::kUniform, "uniform"},
                                                   {Generator::kZipf, "zipf"},
                                                   {Generator::kDevicePreference, "device_preference"},
                                                   {Generator::kDrift, "drift"},
                                                   {Generator::kShift, "shift"}};

Generator parse_generator(const std::string& name) {
    const std::optional<Generator> generator = find_enum(kGeneratorNames, name);
    PROPHET_ASSERT_MSG(generator.has_value(), "generator not in the schema's choices: " + name);
    return *generator;
}

// A request beyond the generator's limits (memory or work): exit 4 naming the file, the key and the limit.
[[noreturn]] void throw_resource_error(const std::string& origin, const std::string& key, int64_t value,
                                       const std::string& rule, const std::string& fix) {
    throw Error(kExitResource, "resource error: " + origin + ": " + key + " = " + std::to_string(value) + ": " + rule +
                                   "; fix: " + fix);
}

// trace.sampling = "counts" draws a row's counts as one multinomial: the law of the per-token path only when every
// token makes one independent categorical draw per layer (top_k = 1, no layer affinity) and no token-level record
// (transitions) is asked for.
void check_count_sampling(const Params& p, const std::string& in) {
    const std::string fix = "set trace.sampling = \"per_token\" (draws every token), or ";
    if (p.top_k != 1)
        throw_config_error("trace.top_k", std::to_string(p.top_k),
                           "trace.sampling = \"counts\" needs top_k = 1 (a token's top_k distinct experts have no "
                           "count-level equivalent)" +
                               in,
                           fix + "top_k = 1");
    if (p.num_layers > 1 && p.record_transitions)
        throw_config_error("trace.record_transitions", "true",
                           "trace.sampling = \"counts\" draws no tokens, so it records no transitions" + in,
                           fix + "record_transitions = false");
    if (p.num_layers > 1 && p.layer_affinity > 0.0)
        throw_config_error("trace.layer_affinity", std::to_string(p.layer_affinity),
                           "trace.sampling = \"counts\" needs layer_affinity = 0 (affinity follows each token)" + in,
                           fix + "layer_affinity = 0.0");
}

// The [trace] table's values as read (the schema has checked each key's type and range).
Params param_values(const Config& config) {
    Params p;
    p.generator_name = config.get_string("trace.generator");
    p.generator = parse_generator(p.generator_name);
    p.seed = static_cast<uint64_t>(config.get_int("trace.seed"));
    p.num_experts = static_cast<int>(config.get_int("trace.num_experts"));
    p.num_devices = static_cast<int>(config.get_int("trace.num_devices"));
    p.top_k = static_cast<int>(config.get_int("trace.top_k"));
    p.tokens_per_iteration = config.get_int("trace.tokens_per_iteration");
    p.num_iterations = static_cast<int>(config.get_int("trace.num_iterations"));
    p.num_layers = static_cast<int>(config.get_int("trace.num_layers"));
    p.zipf_s = config.get_float("trace.zipf_s");
    p.preference_strength = config.get_float("trace.preference_strength");
    p.drift_rate = config.get_float("trace.drift_rate");
    p.shift_period = static_cast<int>(config.get_int("trace.shift_period"));
    p.record_transitions = config.get_bool("trace.record_transitions");
    p.layer_affinity = config.get_float("trace.layer_affinity");
    p.random_affinity = config.get_string("trace.affinity_mapping") == "random";
    p.d_model = static_cast<int>(config.get_int("trace.d_model"));
    p.d_ffn = static_cast<int>(config.get_int("trace.d_ffn"));
    p.seq_len = static_cast<int>(config.get_int("trace.seq_len"));
    p.count_sampling = config.get_string("trace.sampling") == "counts";
    return p;
}

// The rules between keys: top_k within the experts and the transition sums, whole tokens per device.
void check_param_shape(const Params& p, const std::string& in) {
    if (p.top_k > p.num_experts)
        throw_config_error("trace.top_k", std::to_string(p.top_k),
                           "must be <= trace.num_experts (" + std::to_string(p.num_experts) + ")" + in,
                           "a token picks top_k distinct experts; lower top_k or raise num_experts");
    if (static_cast<double>(p.tokens_per_iteration) * p.top_k * p.top_k > 0x1p62)
        throw_config_error("trace.top_k", std::to_string(p.top_k),
                           "tokens_per_iteration x top_k^2 must stay below 2^62 (transition sums)" + in,
                           "lower top_k or tokens_per_iteration");
    if (p.tokens_per_iteration % p.num_devices != 0)
        throw_config_error("trace.tokens_per_iteration", std::to_string(p.tokens_per_iteration),
                           "must be divisible by trace.num_devices (" + std::to_string(p.num_devices) +
                               "): each device routes tokens_per_iteration / num_devices tokens" + in,
                           "use a multiple of " + std::to_string(p.num_devices) + ", e.g. " +
                               std::to_string(std::max<int64_t>(1, p.tokens_per_iteration / p.num_devices) *
                                              p.num_devices));
}

// The arrays and the draws the trace needs, within the trace format's and the generator's limits.
void check_param_sizes(const Params& p, const std::string& origin) {
    const std::string in = " in " + origin;
    const double num_counts =
        static_cast<double>(p.num_iterations) * p.num_layers * p.num_devices * static_cast<double>(p.num_experts);
    if (num_counts > static_cast<double>(kMaxElements))
        throw_config_error("trace.num_iterations", std::to_string(p.num_iterations),
                           "num_iterations x num_layers x num_devices x num_experts = " +
                               std::to_string(static_cast<uint64_t>(num_counts)) + " exceeds 2^31 counts" + in,
                           "generate fewer iterations or layers");
    const double num_transitions = static_cast<double>(p.num_iterations) * (p.num_layers - 1) *
                                   static_cast<double>(p.num_experts) * p.num_experts;
    if (p.record_transitions && num_transitions > static_cast<double>(kMaxElements))
        throw_config_error("trace.record_transitions", "true",
                           "num_iterations x (num_layers - 1) x num_experts^2 = " +
                               std::to_string(static_cast<uint64_t>(num_transitions)) + " exceeds 2^31 transitions" +
                               in,
                           "set record_transitions = false or generate fewer iterations");
    const double elements = num_counts + (p.record_transitions && p.num_layers > 1 ? num_transitions : 0.0);
    if (elements > kMaxGeneratedElements)
        throw_resource_error(origin, "trace.num_iterations", p.num_iterations,
                             "the trace would hold " + std::to_string(static_cast<uint64_t>(elements)) +
                                 " counts and transitions (num_iterations x num_layers x (num_devices x num_experts "
                                 "+ num_experts^2)), beyond the generator's limit of 2^28 (2 GiB)",
                             "generate fewer iterations, layers or experts, or set record_transitions = false");
    const double draws = static_cast<double>(p.num_iterations) * p.num_layers *
                         static_cast<double>(p.tokens_per_iteration) * p.top_k;
    if (!p.count_sampling && draws > kMaxDraws)
        throw_resource_error(origin, "trace.tokens_per_iteration", p.tokens_per_iteration,
                             "num_iterations x num_layers x tokens_per_iteration x top_k = " +
                                 std::to_string(static_cast<uint64_t>(draws)) +
                                 " expert draws, beyond the generator's limit of 2^32 (it draws every token)",
                             "lower tokens_per_iteration (the loads' shape does not need more than ~1e6 tokens), "
                             "num_iterations or num_layers");
}

Params read_params(const Config& config, const std::string& origin) {
    config.check_required();
    const Params p = param_values(config);
    const std::string in = " in " + origin;
    if (p.count_sampling) check_count_sampling(p, in);
    check_param_shape(p, in);
    check_param_sizes(p, origin);
    return p;
}

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

// The per-token path's inputs and scratch, shared by every (iteration, device) of one generate().
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

Trace generate(const Params& p) {
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
    const int64_t tokens_per_device = p.tokens_per_iteration / p.num_devices;
    TokenRouting routing{p,
                         popularity.mapping(),
                         samplers,
                         num_tables,
                         p.layer_affinity > 0.0 && num_layers > 1,
                         record,
                         std::vector<int>(static_cast<size_t>(2) * p.top_k),
                         std::vector<char>(num_experts, 0),
                         std::vector<int64_t*>(num_layers)};
    for (int i = 0; i < p.num_iterations; ++i) {
        popularity.advance(i);
        rebuild_samplers(p, popularity, per_device, window_start, samplers);
        int64_t* transitions = record ? trace.transitions.data() + static_cast<size_t>(i) * (num_layers - 1) * pairs
                                      : nullptr;  // [L-1][E][E] of this iteration
        for (int d = 0; d < p.num_devices; ++d) {
            Rng rng(stream_seed(p.seed, kStreamTokens, static_cast<uint64_t>(i) * p.num_devices + d));
            for (int l = 0; l < num_layers; ++l)
                routing.count_rows[l] = trace.layer_counts(i, l) + static_cast<size_t>(d) * num_experts;
            const int table = per_device ? d : 0;
            if (!p.count_sampling) {
                route_tokens(routing, rng, table, transitions);
                continue;
            }
            for (int l = 0; l < num_layers; ++l)  // top_k = 1, no affinity, no transitions (check_count_sampling)
                multinomial(rng, tokens_per_device, samplers[static_cast<size_t>(l) * num_tables + table].weights(),
                            routing.count_rows[l]);
        }
    }
    return trace;
}

KeySpec required_int(const std::string& key, int64_t example, double min, double max, const std::string& help) {
    KeySpec spec = bounded_key(key, ValueType::kInt, min, max, false, help);
    spec.default_value = example;  // shown in "write it as" hints only
    spec.required = true;
    return spec;
}

}  // namespace

const Schema& trace_generator_schema() {
    static const Schema schema = [] {
        Schema s;
        KeySpec generator;
        generator.key = "trace.generator";
        generator.type = ValueType::kString;
        generator.default_value = std::string("zipf");
        generator.choices = {"uniform", "zipf", "device_preference", "drift", "shift"};
        generator.help = "routing model: uniform; zipf (skewed, static); device_preference (zipf, each device "
                         "favours its own window of experts); drift (zipf whose log-popularity random-walks); "
                         "shift (zipf re-permuted every shift_period iterations)";
        generator.required = true;
        s.add(generator);
        s.add_int("trace.seed", 1, std::nullopt, std::nullopt, "seed of every random draw (same seed: same trace)");
        s.add(required_int("trace.num_experts", 16, 1, 65536, "E: experts per MoE layer"));
        s.add(required_int("trace.num_devices", 16, 1, 65536, "D: expert-parallel devices"));
        s.add_int("trace.top_k", 1, 1, 65536, "K: distinct experts per token and layer, 1..num_experts");
        s.add(required_int("trace.tokens_per_iteration", 16384, 1, static_cast<double>(1ll << 40),
                           "global tokens per iteration (before top-k), divisible by num_devices"));
        s.add(required_int("trace.num_iterations", 20, 1, 1000000, "I: iterations"));
        s.add(required_int("trace.num_layers", 12, 1, 4096, "L: MoE layers"));
        s.add_float("trace.zipf_s", 1.2, 0.0, 10.0,
                    "Zipf exponent s: popularity of rank r is proportional to r^-s (0: uniform); not used by uniform");
        s.add_float("trace.preference_strength", 0.5, 0.0, 1.0,
                    "device_preference: share of a device's routing probability moved onto its own window of "
                    "max(1, E/D) experts (0: plain zipf, 1: only its window)");
        s.add_float("trace.drift_rate", 0.05, 0.0, 10.0,
                    "drift: std of each expert's per-iteration Gaussian log-popularity step (nats)");
        s.add_int("trace.shift_period", 5, 1, 1000000,
                  "shift: iterations between fresh random permutations of expert popularity");
        s.add_bool("trace.record_transitions", true,
                   "record the E x E layer-to-layer transition counts (every pair of a token's choices)");
        s.add_float("trace.layer_affinity", 0.5, 0.0, 1.0,
                    "probability a token's next-layer experts are a fixed per-layer mapping of its current ones "
                    "(else drawn fresh); makes transitions informative");
        s.add_string("trace.affinity_mapping", "rank", {"rank", "random"},
                     "layer_affinity's mapping: rank = the expert of popularity rank r goes to rank r of the next "
                     "layer; random = to a random rank (a fixed permutation per layer pair), as real routing's "
                     "affinities do not follow popularity");
        s.add_string("trace.sampling", "per_token", {"per_token", "counts"},
                     "per_token: every token draws its experts (transitions and affinity exact); counts: each "
                     "(iteration, layer, device) row drawn at once as a multinomial by conditional binomials, the "
                     "same law for top_k = 1 without transitions or layer affinity (refused otherwise), O(E sqrt(n)) "
                     "instead of O(n) per row");
        s.add_int("trace.d_model", 1024, 0, 1 << 20, "C: model width for the cost model (0: unknown)");
        s.add_int("trace.d_ffn", 2048, 0, 1 << 22, "F: expert hidden size for the cost model (0: unknown)");
        s.add_int("trace.seq_len", 256, 0, 1 << 22, "T: sequence length in tokens for the cost model (0: unknown)");
        return s;
    }();
    return schema;
}

Trace generate_trace(const Config& config, const std::string& origin) {
    const Params params = read_params(config, origin);
    Trace trace = generate(params);
    validate_trace(trace, origin);
    return trace;
}

Trace generate_trace_from_toml_string(const std::string& toml_text, const std::string& origin) {
    Config config(trace_generator_schema(), "trace generator " + origin);
    config.merge_toml_string(toml_text, origin);
    return generate_trace(config, origin);
}

Trace generate_trace_from_toml(const std::string& toml_path) {
    Config config(trace_generator_schema(), "trace generator " + toml_path);
    config.merge_toml_file(toml_path);
    return generate_trace(config, toml_path);
}

}  // namespace prophet
