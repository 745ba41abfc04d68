// generator_params.cpp: the synthetic generator's [trace] keys (trace_generator_schema), their values and the rules
// between them, and the caps on what one generator file may ask for.
#include "trace/generator_params.h"

#include <optional>

#include "core/enum_table.h"
#include "core/error.h"
#include "core/key_spec.h"
#include "trace/trace.h"

namespace prophet {
namespace trace_gen {
namespace {

constexpr uint64_t kMaxElements = 1ull << 31;  // per array (counts, transitions)
// What one generator TOML may ask for (exit 4 beyond): the counts and transitions together at most 2^28 int64
// (2 GiB; 8 lines once asked for 32 GiB), and at most 2^32 expert draws (iterations x layers x tokens x top_k,
// one draw per token, layer and choice; 8 lines once asked for 2^40 tokens per iteration, hours of work). The
// largest shipped generator (experiments/) needs 1.6e7 draws and 5e5 counts.
constexpr double kMaxGeneratedElements = 0x1p28;
constexpr double kMaxDraws = 0x1p32;

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
        throw_config_error(
            "trace.tokens_per_iteration", std::to_string(p.tokens_per_iteration),
            "must be divisible by trace.num_devices (" + std::to_string(p.num_devices) +
                "): each device routes tokens_per_iteration / num_devices tokens" + in,
            "use a multiple of " + std::to_string(p.num_devices) + ", e.g. " +
                std::to_string(std::max<int64_t>(1, p.tokens_per_iteration / p.num_devices) * p.num_devices));
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
    const double num_transitions =
        static_cast<double>(p.num_iterations) * (p.num_layers - 1) * static_cast<double>(p.num_experts) * p.num_experts;
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
    const double draws =
        static_cast<double>(p.num_iterations) * p.num_layers * static_cast<double>(p.tokens_per_iteration) * p.top_k;
    if (!p.count_sampling && draws > kMaxDraws)
        throw_resource_error(origin, "trace.tokens_per_iteration", p.tokens_per_iteration,
                             "num_iterations x num_layers x tokens_per_iteration x top_k = " +
                                 std::to_string(static_cast<uint64_t>(draws)) +
                                 " expert draws, beyond the generator's limit of 2^32 (it draws every token)",
                             "lower tokens_per_iteration (the loads' shape does not need more than ~1e6 tokens), "
                             "num_iterations or num_layers");
}

}  // namespace

Params read_params(const Config& config, const std::string& origin) {
    config.check_required();
    const Params p = param_values(config);
    const std::string in = " in " + origin;
    if (p.count_sampling) check_count_sampling(p, in);
    check_param_shape(p, in);
    check_param_sizes(p, origin);
    return p;
}

}  // namespace trace_gen

namespace {

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
        generator.help =
            "routing model: uniform; zipf (skewed, static); device_preference (zipf, each device "
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

}  // namespace prophet
