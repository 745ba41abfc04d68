// trace_sampling_test.cpp: trace.sampling = "counts" (multinomial.h) against the slow obvious paths: binomial
// draws against summed Bernoulli trials, and the generator's count-level rows against its per-token rows.
// Tolerance: every comparison is a two-sample z test at 5 standard errors (a false alarm has probability ~6e-7
// per comparison; the seeds are fixed, so the tests are deterministic).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "trace/multinomial.h"
#include "trace/trace.h"

namespace prophet {
namespace {

constexpr double kSigmas = 5.0;

struct Moments {
    double mean = 0, var = 0;
};
Moments moments(const std::vector<double>& v) {
    Moments m;
    for (double x : v) m.mean += x / v.size();
    for (double x : v) m.var += (x - m.mean) * (x - m.mean) / (v.size() - 1);
    return m;
}
// |mean a - mean b| within kSigmas standard errors of the difference
void expect_same_mean(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
    const Moments x = moments(a), y = moments(b);
    const double se = std::sqrt(x.var / a.size() + y.var / b.size());
    EXPECT_LE(std::fabs(x.mean - y.mean), kSigmas * se + 1e-12) << what << ": " << x.mean << " vs " << y.mean;
}

struct BinomialCase {
    const char* name;
    int64_t n;
    double p;
};
class Binomial : public ::testing::TestWithParam<BinomialCase> {};

// mean and variance of binomial(n, p) against n Bernoulli(p) trials summed (the obvious oracle)
TEST_P(Binomial, MatchesSummedBernoulliTrials) {
    const BinomialCase& c = GetParam();
    Rng fast(11), slow(12);
    std::vector<double> drawn, summed, drawn_sq, summed_sq;
    for (int r = 0; r < 4000; ++r) {
        const double k = static_cast<double>(binomial(fast, c.n, c.p));
        int64_t s = 0;
        for (int64_t t = 0; t < c.n; ++t) s += slow.uniform() < c.p;
        ASSERT_GE(k, 0.0);
        ASSERT_LE(k, static_cast<double>(c.n));
        drawn.push_back(k);
        summed.push_back(static_cast<double>(s));
        drawn_sq.push_back((k - c.n * c.p) * (k - c.n * c.p));
        summed_sq.push_back((s - c.n * c.p) * (s - c.n * c.p));
    }
    expect_same_mean(drawn, summed, "mean");
    expect_same_mean(drawn_sq, summed_sq, "variance");
}

const BinomialCase kBinomialCases[] = {
    {"small_mean", 50, 0.05},   // walks up from 0
    {"large_mean", 2000, 0.2},  // searches out from the mode
    {"above_half", 300, 0.85},  // by symmetry
    {"tiny_p", 100000, 1e-5},   // walks up from 0 with a huge n
};
INSTANTIATE_TEST_SUITE_P(TraceSampling, Binomial, ::testing::ValuesIn(kBinomialCases),
                         [](const auto& info) { return std::string(info.param.name); });

std::string sampling_toml(const std::string& generator, const std::string& sampling) {
    return "[trace]\ngenerator = \"" + generator +
           "\"\nseed = 3\nnum_experts = 8\nnum_devices = 2\ntop_k = 1\n"
           "tokens_per_iteration = 400\nnum_iterations = 400\nnum_layers = 2\nzipf_s = 1.0\n"
           "preference_strength = 0.5\nlayer_affinity = 0.0\nrecord_transitions = false\nsampling = \"" +
           sampling + "\"\n";
}

class CountSampling : public ::testing::TestWithParam<const char*> {};

// every (layer, device, expert) count: the count-level rows against the per-token rows over 400 iterations
TEST_P(CountSampling, RowsHaveThePerTokenLaw) {
    const Trace counts = generate_trace_from_toml_string(sampling_toml(GetParam(), "counts"), "counts.toml");
    const Trace tokens = generate_trace_from_toml_string(sampling_toml(GetParam(), "per_token"), "tokens.toml");
    const TraceMeta& m = counts.meta;
    const size_t row = static_cast<size_t>(m.num_devices) * m.num_experts;
    for (int l = 0; l < m.num_layers; ++l)
        for (size_t k = 0; k < row; ++k) {
            std::vector<double> a, b;
            for (int i = 0; i < m.num_iterations; ++i) {
                a.push_back(static_cast<double>(counts.layer_counts(i, l)[k]));
                b.push_back(static_cast<double>(tokens.layer_counts(i, l)[k]));
            }
            expect_same_mean(a, b, "layer " + std::to_string(l) + " cell " + std::to_string(k));
        }
}

// each device's row holds exactly its tokens
TEST_P(CountSampling, RowsSumToTheDeviceTokens) {
    const Trace t = generate_trace_from_toml_string(sampling_toml(GetParam(), "counts"), "counts.toml");
    for (int i = 0; i < t.meta.num_iterations; ++i)
        for (int l = 0; l < t.meta.num_layers; ++l)
            for (int d = 0; d < t.meta.num_devices; ++d) {
                int64_t sum = 0;
                for (int e = 0; e < t.meta.num_experts; ++e) sum += t.layer_counts(i, l)[d * t.meta.num_experts + e];
                ASSERT_EQ(sum, 200);
            }
}

INSTANTIATE_TEST_SUITE_P(TraceSampling, CountSampling, ::testing::Values("zipf", "device_preference", "drift"));

struct RefusedCase {
    const char* name;
    const char* change;  // replaces the line of the same key
    const char* key;     // the field the error names
};
class CountSamplingRefused : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(CountSamplingRefused, NamesTheField) {
    std::string text = sampling_toml("zipf", "counts");
    const std::string change = GetParam().change;
    const std::string key = change.substr(0, change.find(' '));
    const size_t at = text.find(key + " = ");
    text.replace(at, text.find('\n', at) - at, change);
    try {
        generate_trace_from_toml_string(text, "refused.toml");
        FAIL() << "accepted " << change;
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find(GetParam().key), std::string::npos) << e.what();
    }
}

const RefusedCase kRefused[] = {
    {"top_k", "top_k = 2", "trace.top_k"},
    {"transitions", "record_transitions = true", "trace.record_transitions"},
    {"affinity", "layer_affinity = 0.5", "trace.layer_affinity"},
};
INSTANTIATE_TEST_SUITE_P(TraceSampling, CountSamplingRefused, ::testing::ValuesIn(kRefused),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
