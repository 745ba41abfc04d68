// test_moetuner_ilp1.cpp: MoETuner's ILP 1 (expert clustering per layer, CBC) against brute-force enumeration of
// all D^E cluster maps with non-empty clusters, independent of the ILP formulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "balance/policies.h"
#include "core/rng.h"
#include "core/timer.h"
#include "moetuner_test_helpers.h"

namespace prophet {
namespace {

using testing::exact_options;
using testing::for_each_partition;

std::vector<double> random_loads(Rng& rng, int n, double skew) {
    std::vector<double> v(n);
    for (auto& x : v) x = std::floor(1000.0 * std::pow(rng.uniform() + 0.01, skew)) + 1.0;
    return v;
}

std::vector<double> zipf_loads(int n, double s) {
    std::vector<double> v(n);
    for (int e = 0; e < n; ++e) v[e] = 1.0 / std::pow(e + 1.0, s);
    return v;
}

double partition_objective(const std::vector<double>& w, const std::vector<int>& cluster, int D, bool minmax) {
    std::vector<double> T(D, 0.0);
    for (size_t e = 0; e < w.size(); ++e) T[cluster[e]] += w[e];
    const double mean = std::accumulate(w.begin(), w.end(), 0.0) / D;
    double v = 0;
    for (double t : T) v = minmax ? std::max(v, t) : v + std::fabs(t - mean);
    return v;
}

double brute_ilp1(const std::vector<double>& w, int D, bool minmax, bool fixed_size = false) {
    double best = INFINITY;
    for_each_partition(static_cast<int>(w.size()), D, fixed_size,
                       [&](const std::vector<int>& a) { best = std::min(best, partition_objective(w, a, D, minmax)); });
    return best;
}

void expect_partition(const std::vector<int>& cluster, int E, int D) {
    ASSERT_EQ(static_cast<int>(cluster.size()), E);
    std::vector<int> size(D, 0);
    for (int c : cluster) {
        ASSERT_GE(c, 0);
        ASSERT_LT(c, D);
        ++size[c];
    }
    for (int c = 0; c < D; ++c) EXPECT_GT(size[c], 0) << "cluster " << c << " is empty";
}

// ---- ILP 1 -------------------------------------------------------------------------------------------------

TEST(MoeTunerIlp1, MinmaxEqualsBruteForceOnTinyInstances) {
    Rng rng(11);
    int cases = 0;
    for (int seed = 0; seed < 6; ++seed)
        for (int D = 2; D <= 4; ++D)
            for (int E : {D + 1, 6, 8}) {
                if (E < D) continue;
                const std::vector<double> w = random_loads(rng, E, seed % 2 == 0 ? 1.0 : 3.0);
                const double brute = brute_ilp1(w, D, true);
                for (bool ilp_only : {false, true}) {  // with the greedy warm start, and CBC's answer alone
                    const Ilp1Result r = moetuner_ilp1_layer(w.data(), E, D, exact_options("minmax"), ilp_only);
                    ASSERT_NO_FATAL_FAILURE(expect_partition(r.cluster, E, D));
                    EXPECT_NEAR(r.objective, brute, 1e-9 * brute)
                        << "E=" << E << " D=" << D << " seed=" << seed << " ilp_only=" << ilp_only;
                    EXPECT_NEAR(partition_objective(w, r.cluster, D, true), r.objective, 1e-9 * brute);
                    // gap 0 and proven: CBC's bound is the optimum (a model that dropped a constraint would
                    // prove a lower value)
                    EXPECT_TRUE(r.optimal);
                    EXPECT_NEAR(r.bound, r.objective, 1e-7 * brute);
                }
                ++cases;
            }
    EXPECT_GE(cases, 40);
}

TEST(MoeTunerIlp1, SumdevEqualsBruteForceOnTinyInstances) {
    Rng rng(12);
    for (int seed = 0; seed < 4; ++seed)
        for (int D = 2; D <= 4; ++D)
            for (int E : {D, 7, 8}) {
                const std::vector<double> w = random_loads(rng, E, 2.0);
                const double brute = brute_ilp1(w, D, false);
                for (bool ilp_only : {false, true}) {
                    const Ilp1Result r = moetuner_ilp1_layer(w.data(), E, D, exact_options("sumdev"), ilp_only);
                    ASSERT_NO_FATAL_FAILURE(expect_partition(r.cluster, E, D));
                    EXPECT_NEAR(r.objective, brute, 1e-9 * std::max(1.0, brute))
                        << "E=" << E << " D=" << D << " ilp_only=" << ilp_only;
                    EXPECT_NEAR(r.bound, r.objective, 1e-7 * std::max(1.0, brute));
                }
            }
}

// placement-peers.md §4: 8 Zipf experts on 4 GPUs, >= 1 per GPU, min-max. Checked against our own brute force,
// and against the "exactly 2 per GPU" optimum, which free cluster sizes must beat on this instance.
TEST(MoeTunerIlp1, ZipfEightOnFourMatchesBruteForce) {
    const std::vector<double> w = zipf_loads(8, 1.0);
    const Ilp1Result r = moetuner_ilp1_layer(w.data(), 8, 4, exact_options("minmax"));
    ASSERT_NO_FATAL_FAILURE(expect_partition(r.cluster, 8, 4));
    const double free_size = brute_ilp1(w, 4, true, false);
    const double fixed_size = brute_ilp1(w, 4, true, true);
    EXPECT_NEAR(r.objective, free_size, 1e-12);
    EXPECT_LT(free_size, fixed_size);  // free sizes strictly better here
    const double mean = std::accumulate(w.begin(), w.end(), 0.0) / 4;
    // the top expert alone sets the bound, and the optimum reaches it
    EXPECT_NEAR(r.objective / mean, w[0] / mean, 1e-12);
}

TEST(MoeTunerIlp1, GapToleranceIsRespected) {
    Rng rng(13);
    BalanceOptions o = exact_options();
    o.ilp_gap = 0.025;
    for (int seed = 0; seed < 5; ++seed) {
        const std::vector<double> w = random_loads(rng, 8, 1.0);
        const Ilp1Result r = moetuner_ilp1_layer(w.data(), 8, 3, o);
        const double brute = brute_ilp1(w, 3, true);
        EXPECT_LE(r.objective, brute * 1.025 + 1e-9);
        EXPECT_GE(r.objective, brute - 1e-9);
    }
}

TEST(MoeTunerIlp1, TimeLimitIsRespectedOnAHardInstance) {
    // near-uniform loads: the optimum is a hair above the mean and CBC cannot prove it at gap 0
    Rng rng(14);
    std::vector<double> w(64);
    for (auto& x : w) x = 1000.0 + std::floor(1000.0 * rng.uniform());
    BalanceOptions o = exact_options();
    o.ilp_time_limit_s = 0.5;
    const int64_t t0 = now_ns();
    const Ilp1Result r = moetuner_ilp1_layer(w.data(), 64, 16, o);
    const double seconds = (now_ns() - t0) * 1e-9;
    ASSERT_NO_FATAL_FAILURE(expect_partition(r.cluster, 64, 16));
    EXPECT_LT(seconds, 2.0);
    EXPECT_LE(r.bound, r.objective + 1e-9);
    const double mean = std::accumulate(w.begin(), w.end(), 0.0) / 16;
    EXPECT_LT(r.objective / mean, 1.05);  // the warm start alone is this good
}

TEST(MoeTunerIlp1, OneClusterPerExpertWhenEEqualsD) {
    const std::vector<double> w = zipf_loads(16, 1.2);
    const Ilp1Result r = moetuner_ilp1_layer(w.data(), 16, 16, BalanceOptions());
    ASSERT_NO_FATAL_FAILURE(expect_partition(r.cluster, 16, 16));
    EXPECT_NEAR(r.objective, w[0], 1e-12);
}

}  // namespace
}  // namespace prophet
