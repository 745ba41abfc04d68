// trace_generate_test.cpp: the synthetic generators: determinism, shapes and sums, distinct top-k experts,
// the statistical shape of each generator (Zipf slope, drift, shift, device preference, layer affinity), the
// shipped experiments/traces files and the validation of bad generator TOML.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "core/config.h"
#include "trace/trace.h"
#include "trace_test_util.h"

namespace prophet {
namespace {

using testing::expect_input_error;
using testing::shipped;

// A generator TOML: E = 8, D = 4, top_k = 2 unless `extra` sets it, plus the [trace] lines in `extra`.
std::string toml(const std::string& generator, const std::string& extra = "", int64_t tokens = 1024,
                 int iterations = 4, int layers = 3) {
    const std::string top_k = extra.find("top_k") == std::string::npos ? "top_k = 2\n" : "";
    return "[trace]\ngenerator = \"" + generator + "\"\nnum_experts = 8\nnum_devices = 4\n" + top_k +
           "tokens_per_iteration = " + std::to_string(tokens) + "\nnum_iterations = " + std::to_string(iterations) +
           "\nnum_layers = " + std::to_string(layers) + "\n" + extra;
}

Trace gen(const std::string& text) { return generate_trace_from_toml_string(text, "test.toml"); }

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

const std::vector<std::string> kGenerators = {"uniform", "zipf", "device_preference", "drift", "shift"};

TEST(TraceGenerate, ShippedZipfFileHasExactMetadata) {
    const auto start = std::chrono::steady_clock::now();
    const Trace trace = load_trace(shipped("zipf-e16-k2.toml"));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::testing::Test::RecordProperty("generate_seconds", std::to_string(seconds));
    std::printf("zipf-e16-k2.toml generated in %.3f s\n", seconds);
    const TraceMeta& m = trace.meta;
    EXPECT_EQ(m.num_iterations, 20);
    EXPECT_EQ(m.num_layers, 12);
    EXPECT_EQ(m.num_devices, 16);
    EXPECT_EQ(m.num_experts, 16);
    EXPECT_EQ(m.top_k, 2);
    EXPECT_EQ(m.tokens_per_iteration, 16384);
    EXPECT_EQ(m.d_model, 1024);
    EXPECT_EQ(m.d_ffn, 2048);
    EXPECT_EQ(m.seq_len, 256);
    EXPECT_EQ(m.source, "synthetic:zipf");
    EXPECT_EQ(trace.counts.size(), 20u * 12 * 16 * 16);
    EXPECT_EQ(trace.transitions.size(), 20u * 11 * 16 * 16);
    Config config(trace_generator_schema());
    config.merge_toml_file(shipped("zipf-e16-k2.toml"));
    EXPECT_EQ(config.get_int("trace.seed"), 1);
    EXPECT_DOUBLE_EQ(config.get_float("trace.zipf_s"), 1.2);
    EXPECT_EQ(config.get_string("trace.generator"), "zipf");
}

TEST(TraceGenerate, EveryShippedFileIsAValidTrace) {
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(shipped(""))) {
        if (entry.path().extension() != ".toml") continue;
        SCOPED_TRACE(entry.path().string());
        const std::string text = testing::read_bytes(entry.path().string());
        EXPECT_EQ(text.rfind("# ", 0), 0u) << "each shipped file starts with a comment saying what it is";
        const Trace trace = load_trace(entry.path().string());
        validate_trace(trace, entry.path().string());
        EXPECT_EQ(trace.meta.source.rfind("synthetic:", 0), 0u);
        ++files;
    }
    EXPECT_GE(files, 6);
    const Trace tiny = load_trace(shipped("tiny-e4-d4.toml"));
    EXPECT_EQ(tiny.meta.num_experts, 4);
    EXPECT_EQ(tiny.meta.num_devices, 4);
    EXPECT_EQ(tiny.meta.num_layers, 2);
    EXPECT_EQ(tiny.meta.num_iterations, 4);
    EXPECT_EQ(tiny.meta.tokens_per_iteration, 256);
}

TEST(TraceGenerate, SameSeedIsIdenticalDifferentSeedDiffers) {
    for (const std::string& generator : kGenerators) {
        SCOPED_TRACE(generator);
        const Trace a = gen(toml(generator, "seed = 11\n"));
        const Trace b = gen(toml(generator, "seed = 11\n"));
        const Trace c = gen(toml(generator, "seed = 12\n"));
        EXPECT_EQ(a.counts, b.counts);
        EXPECT_EQ(a.transitions, b.transitions);
        EXPECT_NE(a.counts, c.counts);
        EXPECT_NE(a.transitions, c.transitions);
    }
}

// A generator drawing its devices on several threads gives the trace it gives on one, bit for bit.
struct ThreadsCase {
    const char* name;
    std::string generator;
    std::string extra;  // [trace] lines
    int threads;
};

constexpr const char* kCountSampling =
    "record_transitions = false\ntop_k = 1\nlayer_affinity = 0.0\nsampling = \"counts\"\n";

class TraceGenerateThreads : public ::testing::TestWithParam<ThreadsCase> {};

TEST_P(TraceGenerateThreads, GivesTheOneThreadTrace) {
    const ThreadsCase& c = GetParam();
    const std::string text = toml(c.generator, "seed = 5\n" + c.extra, 4096, 3, 4);
    const Trace one = generate_trace_from_toml_string(text, "test.toml", 1);
    const Trace many = generate_trace_from_toml_string(text, "test.toml", c.threads);
    EXPECT_EQ(many.counts, one.counts);
    EXPECT_EQ(many.transitions, one.transitions);
}

INSTANTIATE_TEST_SUITE_P(
    Table, TraceGenerateThreads,
    ::testing::Values(ThreadsCase{"zipf_2", "zipf", "record_transitions = false\n", 2},
                      ThreadsCase{"zipf_more_threads_than_devices", "zipf", "record_transitions = false\n", 7},
                      ThreadsCase{"device_preference_3", "device_preference", "record_transitions = false\n", 3},
                      ThreadsCase{"drift_affinity_3", "drift", "record_transitions = false\nlayer_affinity = 0.5\n", 3},
                      ThreadsCase{"counts_sampling_2", "shift", std::string(kCountSampling), 2},
                      ThreadsCase{"transitions_recorded_2", "zipf", "layer_affinity = 0.5\n", 2}),
    [](const ::testing::TestParamInfo<ThreadsCase>& info) { return std::string(info.param.name); });

TEST(TraceGenerate, LongerRunStartsWithTheSameIterations) {
    const Trace short_run = gen(toml("drift", "seed = 3\n", 512, 3));
    const Trace long_run = gen(toml("drift", "seed = 3\n", 512, 6));
    ASSERT_EQ(short_run.counts.size() * 2, long_run.counts.size());
    EXPECT_TRUE(std::equal(short_run.counts.begin(), short_run.counts.end(), long_run.counts.begin()));
    EXPECT_TRUE(std::equal(short_run.transitions.begin(), short_run.transitions.end(), long_run.transitions.begin()));
}

TEST(TraceGenerate, EveryGeneratorKeepsTheShapeWithExactSums) {
    for (const std::string& generator : kGenerators) {
        SCOPED_TRACE(generator);
        const Trace trace = gen(toml(generator, "d_model = 48\n", 1024, 5, 3));
        const TraceMeta& m = trace.meta;
        EXPECT_EQ(m.source, "synthetic:" + generator);
        EXPECT_EQ(m.num_iterations, 5);
        EXPECT_EQ(m.num_layers, 3);
        EXPECT_EQ(m.num_devices, 4);
        EXPECT_EQ(m.num_experts, 8);
        EXPECT_EQ(m.top_k, 2);
        EXPECT_EQ(m.d_model, 48);
        EXPECT_EQ(m.d_ffn, 2048);
        EXPECT_EQ(m.seq_len, 256);
        ASSERT_EQ(trace.counts.size(), 5u * 3 * 4 * 8);
        ASSERT_EQ(trace.transitions.size(), 5u * 2 * 8 * 8);
        for (int i = 0; i < 5; ++i) {
            for (int l = 0; l < 3; ++l) {
                const int64_t* c = trace.layer_counts(i, l);
                for (int d = 0; d < 4; ++d) {  // each device routes tokens / D tokens, k each
                    int64_t device_sum = 0;
                    for (int e = 0; e < 8; ++e) device_sum += c[d * 8 + e];
                    EXPECT_EQ(device_sum, 1024 / 4 * 2);
                }
                const std::vector<int64_t> loads = expert_loads(trace, i, l);
                EXPECT_EQ(std::accumulate(loads.begin(), loads.end(), int64_t{0}), 1024 * 2);
                if (l + 1 < 3) {
                    const int64_t* t = trace.layer_transitions(i, l);
                    EXPECT_EQ(std::accumulate(t, t + 64, int64_t{0}), 1024 * 2 * 2);
                }
            }
        }
        const Trace without = gen(toml(generator, "record_transitions = false\n"));
        EXPECT_FALSE(without.has_transitions());
        EXPECT_EQ(without.counts, gen(toml(generator)).counts) << "recording transitions must not change counts";
    }
    EXPECT_FALSE(gen(toml("zipf", "", 1024, 4, 1)).has_transitions()) << "one layer has no layer pairs";
}

TEST(TraceGenerate, TopKExpertsAreDistinct) {
    // Very skewed: with replacement the top expert would get ~2.7 assignments per token; distinct allows 1.
    const Trace trace = gen(toml("zipf", "zipf_s = 4.0\ntop_k = 3\nlayer_affinity = 0.0\n", 4000, 2, 2));
    const int64_t tokens_per_device = 1000;
    int64_t top = 0;
    for (int64_t value : trace.counts) {
        EXPECT_LE(value, tokens_per_device);
        top = std::max(top, value);
    }
    EXPECT_GT(top, tokens_per_device * 9 / 10) << "the test needs a dominant expert to mean something";
    for (int64_t value : trace.transitions) EXPECT_LE(value, 4000) << "a token adds at most 1 per expert pair";

    // top_k = E: every token takes every expert exactly once
    const Trace all = gen(toml("device_preference", "zipf_s = 3.0\ntop_k = 8\npreference_strength = 1.0\n", 400));
    for (int64_t value : all.counts) EXPECT_EQ(value, 100);
    for (int64_t value : all.transitions) EXPECT_EQ(value, 400);
}

TEST(TraceGenerate, ZipfSlopeMatchesExponent) {
    for (double s : {0.8, 1.2}) {
        SCOPED_TRACE(s);
        const Trace trace = gen("[trace]\ngenerator = \"zipf\"\nnum_experts = 32\nnum_devices = 4\ntop_k = 1\n"
                                "tokens_per_iteration = 200000\nnum_iterations = 1\nnum_layers = 1\nseed = 5\n"
                                "zipf_s = " + std::to_string(s) + "\n");
        std::vector<int64_t> loads = expert_loads(trace, 0, 0);
        std::sort(loads.rbegin(), loads.rend());
        // least-squares slope of log(load) against log(rank)
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        const int n = static_cast<int>(loads.size());
        for (int r = 0; r < n; ++r) {
            const double x = std::log(r + 1.0);
            const double y = std::log(static_cast<double>(loads[r]));
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
        }
        const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        EXPECT_NEAR(slope, -s, 0.1);
    }
}

TEST(TraceGenerate, ZipfRanksArePermutedPerLayer) {
    const Trace trace = gen(toml("zipf", "zipf_s = 2.0\nlayer_affinity = 0.0\n", 4096, 1, 6));
    std::vector<int> top_experts;
    for (int l = 0; l < 6; ++l) {
        const std::vector<int64_t> loads = expert_loads(trace, 0, l);
        top_experts.push_back(static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin()));
    }
    std::sort(top_experts.begin(), top_experts.end());
    EXPECT_GT(std::unique(top_experts.begin(), top_experts.end()) - top_experts.begin(), 1);
}

std::string drift_toml(double rate) {
    return "[trace]\ngenerator = \"drift\"\nnum_experts = 16\nnum_devices = 4\ntop_k = 1\n"
           "tokens_per_iteration = 200000\nnum_iterations = 30\nnum_layers = 1\nseed = 9\nzipf_s = 1.2\n"
           "drift_rate = " + std::to_string(rate) + "\n";
}

TEST(TraceGenerate, DriftDivergenceGrowsWithRate) {
    double previous = -1.0;
    for (double rate : {0.0, 0.01, 0.05, 0.2}) {
        const double js = mean(consecutive_js_divergence(gen(drift_toml(rate))));
        SCOPED_TRACE(rate);
        EXPECT_GT(js, previous);
        previous = js;
    }
    // a static distribution only shows sampling noise: JS ~ (E - 1) / (4 N) for two samples of N tokens
    const double noise = 15.0 / (4.0 * 200000);
    const double static_js = mean(consecutive_js_divergence(gen(drift_toml(0.0))));
    EXPECT_LT(static_js, 2.0 * noise);
    EXPECT_GT(mean(consecutive_js_divergence(gen(drift_toml(0.2)))), 20.0 * noise);
}

TEST(TraceGenerate, DriftAtRateZeroIsTheStaticZipf) {
    std::string drift = drift_toml(0.0);
    std::string zipf = drift;
    zipf.replace(zipf.find("\"drift\""), 7, "\"zipf\"");
    zipf.erase(zipf.find("drift_rate"));
    EXPECT_EQ(gen(drift).counts, gen(zipf).counts);
}

TEST(TraceGenerate, ShiftSpikesAtMultiplesOfThePeriod) {
    const Trace trace = gen("[trace]\ngenerator = \"shift\"\nnum_experts = 16\nnum_devices = 4\ntop_k = 1\n"
                            "tokens_per_iteration = 50000\nnum_iterations = 20\nnum_layers = 2\nseed = 2\n"
                            "shift_period = 5\n");
    const std::vector<double> js = consecutive_js_divergence(trace);  // [(I-1) * L]
    ASSERT_EQ(js.size(), 19u * 2);
    for (int l = 0; l < 2; ++l) {
        double smallest_spike = 1.0;
        double largest_other = 0.0;
        for (int i = 1; i < 20; ++i) {
            const double value = js[(i - 1) * 2 + l];
            if (i % 5 == 0) smallest_spike = std::min(smallest_spike, value);
            else largest_other = std::max(largest_other, value);
        }
        EXPECT_GT(smallest_spike, 10.0 * largest_other) << "layer " << l;
    }
}

TEST(TraceGenerate, DevicePreferenceMakesDevicesDiffer) {
    auto device_js = [](double strength) {
        const Trace trace = gen("[trace]\ngenerator = \"device_preference\"\nnum_experts = 8\nnum_devices = 4\n"
                                "top_k = 1\ntokens_per_iteration = 40000\nnum_iterations = 1\nnum_layers = 1\n"
                                "preference_strength = " + std::to_string(strength) + "\n");
        const int64_t* c = trace.layer_counts(0, 0);
        double worst = 0.0;
        for (int a = 0; a < 4; ++a) {
            for (int b = a + 1; b < 4; ++b) {
                std::vector<double> p(c + a * 8, c + a * 8 + 8);
                std::vector<double> q(c + b * 8, c + b * 8 + 8);
                worst = std::max(worst, js_divergence(p.data(), q.data(), 8));
            }
        }
        return worst;
    };
    EXPECT_LT(device_js(0.0), 0.005);  // all devices share one distribution: sampling noise only
    EXPECT_GT(device_js(0.8), 0.2);
    // each device's most used experts are its own window (2 experts here), different for every device
    const Trace trace = gen(toml("device_preference", "preference_strength = 0.9\ntop_k = 1\n", 8000, 1, 1));
    const int64_t* c = trace.layer_counts(0, 0);
    std::vector<int> favourite;
    for (int d = 0; d < 4; ++d)
        favourite.push_back(static_cast<int>(std::max_element(c + d * 8, c + d * 8 + 8) - (c + d * 8)));
    std::sort(favourite.begin(), favourite.end());
    EXPECT_EQ(std::unique(favourite.begin(), favourite.end()) - favourite.begin(), 4);
}

TEST(TraceGenerate, LayerAffinityMakesTransitionsInformative) {
    // affinity 1, top-1: each expert at layer l always continues to the same expert at layer l+1
    const Trace mapped = gen(toml("zipf", "layer_affinity = 1.0\ntop_k = 1\n", 4096, 2, 4));
    // affinity 0: next-layer experts are drawn independently, so rows spread over many experts
    const Trace fresh = gen(toml("uniform", "layer_affinity = 0.0\ntop_k = 1\n", 4096, 2, 4));
    for (int i = 0; i < 2; ++i) {
        for (int l = 0; l < 3; ++l) {
            const int64_t* t = mapped.layer_transitions(i, l);
            const int64_t* u = fresh.layer_transitions(i, l);
            for (int e1 = 0; e1 < 8; ++e1) {
                EXPECT_LE(std::count_if(t + e1 * 8, t + e1 * 8 + 8, [](int64_t v) { return v > 0; }), 1);
                EXPECT_GE(std::count_if(u + e1 * 8, u + e1 * 8 + 8, [](int64_t v) { return v > 0; }), 6);
            }
        }
    }
    // the mapping is rank-aligned, so layer l+1 keeps the Zipf shape of layer l
    const std::vector<int64_t> first = expert_loads(mapped, 0, 0);
    const std::vector<int64_t> last = expert_loads(mapped, 0, 3);
    std::vector<int64_t> a = first, b = last;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b);
}

TEST(TraceGenerate, RandomAffinityMappingLeavesPopularityRanks) {
    // affinity 1, top-1, "random": still one successor per expert, but the most popular expert of layer 0 no longer
    // feeds the most popular of layer 1 in every layer pair (the rank mapping always does); the counts of layer 0
    // and the popularity ranks are those of "rank" (separate stream)
    const std::string base = "layer_affinity = 1.0\ntop_k = 1\nzipf_s = 1.5\n";
    const Trace ranked = gen(toml("zipf", base, 4096, 1, 8));
    const Trace shuffled = gen(toml("zipf", base + "affinity_mapping = \"random\"\n", 4096, 1, 8));
    EXPECT_EQ(expert_loads(ranked, 0, 0), expert_loads(shuffled, 0, 0));
    int follows_rank = 0;
    for (int l = 0; l < 7; ++l) {
        const int64_t* t = shuffled.layer_transitions(0, l);
        for (int e1 = 0; e1 < 8; ++e1)
            EXPECT_LE(std::count_if(t + e1 * 8, t + e1 * 8 + 8, [](int64_t v) { return v > 0; }), 1);
        const std::vector<int64_t> here = expert_loads(ranked, 0, l), next = expert_loads(ranked, 0, l + 1);
        const int top = static_cast<int>(std::max_element(here.begin(), here.end()) - here.begin());
        const int top_next = static_cast<int>(std::max_element(next.begin(), next.end()) - next.begin());
        EXPECT_GT(ranked.layer_transitions(0, l)[top * 8 + top_next], 0);  // rank 0 -> rank 0
        follows_rank += shuffled.layer_transitions(0, l)[top * 8 + top_next] > 0 ? 1 : 0;
    }
    EXPECT_LT(follows_rank, 7);
}

TEST(TraceGenerate, ConfigOverridesApply) {
    Config config(trace_generator_schema(), "test");
    config.merge_toml_string(toml("zipf", "seed = 1\n"), "test.toml");
    config.apply_set("trace.seed=2");
    EXPECT_EQ(generate_trace(config, "test.toml").counts, gen(toml("zipf", "seed = 2\n")).counts);
    EXPECT_NE(trace_generator_schema().describe().find("trace.zipf_s"), std::string::npos);
}

TEST(TraceGenerate, RejectsBadToml) {
    auto rejects = [](const std::string& text, std::initializer_list<std::string> words) {
        expect_input_error([&] { gen(text); }, words);
    };
    rejects(toml("zipf", "zipf_exponent = 1.1\n"), {"trace.zipf_exponent", "unknown key"});
    rejects(toml("zipf", "zipfs = 1.1\n"), {"trace.zipfs", "unknown key", "did you mean trace.zipf_s"});
    rejects(toml("zipf", "top_k = 9\n"), {"trace.top_k", "9", "num_experts"});
    rejects(toml("zipf", "", 1023), {"trace.tokens_per_iteration", "1023", "divisible", "num_devices"});
    rejects(toml("zipf", "zipf_s = -0.5\n"), {"trace.zipf_s", "-0.5"});
    rejects(toml("sawtooth"), {"trace.generator", "sawtooth", "uniform|zipf"});
    rejects(toml("zipf", "preference_strength = 1.5\n"), {"trace.preference_strength"});
    rejects(toml("zipf", "drift_rate = -1\n"), {"trace.drift_rate"});
    rejects(toml("zipf", "shift_period = 0\n"), {"trace.shift_period"});
    rejects(toml("zipf", "layer_affinity = 2\n"), {"trace.layer_affinity"});
    rejects(toml("zipf", "top_k = 0\n"), {"trace.top_k"});
    rejects("[trace]\ngenerator = \"zipf\"\nnum_experts = 8\nnum_devices = 4\n", {"trace.tokens_per_iteration",
                                                                                 "required"});
    rejects(toml("zipf", "num_experts = 4\n"), {"test.toml", "TOML syntax error", "num_experts"});  // duplicate
    rejects(toml("zipf", "seed = \"one\"\n"), {"trace.seed", "integer"});
    rejects("generator = \"zipf\"\n", {"generator", "unknown key"});  // outside the [trace] table
    rejects(toml("zipf", "", 1 << 20, 1000000, 4096), {"trace.num_iterations", "2^31"});
    expect_input_error([] { generate_trace_from_toml("/nonexistent/x.toml"); }, {"/nonexistent/x.toml"});
}

}  // namespace
}  // namespace prophet
