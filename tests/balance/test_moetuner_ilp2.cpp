// test_moetuner_ilp2.cpp: MoETuner's ILP 2 (clusters to GPUs per layer: memory balance, then traffic), exact and
// heuristic, against brute-force enumeration of all (D!)^L permutations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "balance/policies.h"
#include "core/rng.h"
#include "moetuner_test_helpers.h"

namespace prophet {
namespace {

using testing::exact_options;
using testing::two_halves_links;

// ---- ILP 2 -------------------------------------------------------------------------------------------------

struct Brute2 {
    double memory_dev = INFINITY;
    double traffic = INFINITY;
};

// all (D!)^L assignments of clusters to GPUs: the smallest memory deviation, then the smallest traffic there
Brute2 brute_ilp2(const std::vector<int>& clusters, const std::vector<double>& transitions, int L, int D, int E,
                  const std::vector<double>& link) {
    std::vector<std::vector<int>> perms;
    std::vector<int> p(D);
    std::iota(p.begin(), p.end(), 0);
    do perms.push_back(p);
    while (std::next_permutation(p.begin(), p.end()));
    const int64_t P = static_cast<int64_t>(perms.size());
    int64_t total = 1;
    for (int l = 0; l < L; ++l) total *= P;
    Brute2 best;
    std::vector<int> pick(L);
    for (int64_t code = 0; code < total; ++code) {
        int64_t x = code;
        for (int l = 0; l < L; ++l) {
            pick[l] = static_cast<int>(x % P);
            x /= P;
        }
        std::vector<Placement> ps;
        std::vector<double> mem(D, 0.0);
        for (int l = 0; l < L; ++l) {
            std::vector<int> owner(E);
            for (int e = 0; e < E; ++e) owner[e] = perms[pick[l]][clusters[static_cast<size_t>(l) * E + e]];
            for (int g : owner) mem[g] += 1;
            ps.push_back(Placement::make_owners(D, owner));
        }
        double dev = 0;
        for (double m : mem) dev = std::max(dev, std::fabs(m - static_cast<double>(E) * L / D));
        const double traffic = moetuner_traffic_objective(ps, transitions, link);
        if (dev < best.memory_dev - 1e-9 || (dev < best.memory_dev + 1e-9 && traffic < best.traffic)) {
            best.memory_dev = dev;
            best.traffic = traffic;
        }
    }
    return best;
}

std::vector<Placement> placements_from(const std::vector<int>& clusters, const Ilp2Result& r, int L, int D, int E) {
    std::vector<Placement> ps;
    for (int l = 0; l < L; ++l) {
        std::vector<int> owner(E);
        for (int e = 0; e < E; ++e)
            owner[e] = r.gpu_of_cluster[static_cast<size_t>(l) * D + clusters[static_cast<size_t>(l) * E + e]];
        ps.push_back(Placement::make_owners(D, owner));
    }
    return ps;
}

void expect_permutations(const Ilp2Result& r, int L, int D) {
    ASSERT_EQ(r.gpu_of_cluster.size(), static_cast<size_t>(L) * D);
    for (int l = 0; l < L; ++l) {
        std::vector<int> seen(D, 0);
        for (int c = 0; c < D; ++c) ++seen[r.gpu_of_cluster[static_cast<size_t>(l) * D + c]];
        for (int g = 0; g < D; ++g) EXPECT_EQ(seen[g], 1) << "layer " << l << " is not a permutation";
    }
}

TEST(MoeTunerIlp2, ConcentratedTransitionsStayOnCheapLinks) {
    // expert e at layer l goes to expert e at layer l+1 (90%) and to e^2 (10%, an expert of the partner cluster:
    // clusters are expert pairs {2k, 2k+1}, partners k and k^1). Cluster labels are shuffled per layer, so the
    // identity assignment is poor. Tokens per expert are in [500, 1000), so not following costs >= 450 on one
    // pair while following costs at most 0.1 * 2000 * 1 = 200 per layer pair: the optimum must put every
    // cluster on its predecessor's GPU, and the partner clusters on one half (cheap links).
    const int D = 4, E = 8, L = 3;
    const std::vector<double> link = two_halves_links(D);
    std::vector<int> clusters(static_cast<size_t>(L) * E);
    const int shuffle[3][4] = {{0, 1, 2, 3}, {2, 0, 3, 1}, {3, 2, 1, 0}};
    for (int l = 0; l < L; ++l)
        for (int e = 0; e < E; ++e) clusters[static_cast<size_t>(l) * E + e] = shuffle[l][e / 2];
    Rng rng(21);
    std::vector<double> transitions(static_cast<size_t>(L - 1) * E * E, 0.0);
    for (int l = 0; l + 1 < L; ++l)
        for (int e = 0; e < E; ++e) {
            const double tokens = 500.0 + std::floor(500.0 * rng.uniform());
            transitions[(static_cast<size_t>(l) * E + e) * E + e] = 0.9 * tokens;
            transitions[(static_cast<size_t>(l) * E + e) * E + (e ^ 2)] = 0.1 * tokens;
        }
    const Brute2 brute = brute_ilp2(clusters, transitions, L, D, E, link);
    const Ilp2Result r = moetuner_ilp2(clusters, transitions, L, D, E, link, exact_options());
    ASSERT_NO_FATAL_FAILURE(expect_permutations(r, L, D));
    EXPECT_TRUE(r.exact);
    EXPECT_TRUE(r.optimal);
    EXPECT_NEAR(r.objective, brute.traffic, 1e-9 * brute.traffic);
    const auto ps = placements_from(clusters, r, L, D, E);
    EXPECT_NEAR(moetuner_traffic_objective(ps, transitions, link), r.objective, 1e-9 * brute.traffic);
    EXPECT_LE(r.bound, r.objective + 1e-9);
    EXPECT_GT(r.objective, 0.0);  // the spill is unavoidable
    for (int l = 0; l + 1 < L; ++l)
        for (int e = 0; e < E; ++e) {
            EXPECT_EQ(ps[l].owner[e], ps[l + 1].owner[e]) << "layer " << l << " expert " << e << " moved";
            EXPECT_EQ(link[ps[l].owner[e] * D + ps[l + 1].owner[e ^ 2]], 1.0) << "spill crosses the dear link";
        }
    EXPECT_EQ(r.memory_deviation, 0.0);
    // the heuristic finds the same structure on this easy instance
    BalanceOptions h = exact_options();
    h.ilp2_exact_max_devices = 0;
    EXPECT_NEAR(moetuner_ilp2(clusters, transitions, L, D, E, link, h).objective, brute.traffic, 1e-9 * brute.traffic);
}

TEST(MoeTunerIlp2, PureFollowTransitionsCostNothing) {
    // e -> e only: putting each layer's cluster on its predecessor's GPU makes every transfer local
    const int D = 3, E = 6, L = 3;
    std::vector<double> link(D * D, 1.0);
    for (int g = 0; g < D; ++g) link[g * D + g] = 0;
    std::vector<int> clusters = {0, 0, 1, 1, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0};
    std::vector<double> transitions(static_cast<size_t>(L - 1) * E * E, 0.0);
    for (int l = 0; l + 1 < L; ++l)
        for (int e = 0; e < E; ++e) transitions[(static_cast<size_t>(l) * E + e) * E + e] = 10.0 + e;
    for (int exact_max : {8, 0}) {  // exact ILP, then greedy + local search
        BalanceOptions o = exact_options();
        o.ilp2_exact_max_devices = exact_max;
        const Ilp2Result r = moetuner_ilp2(clusters, transitions, L, D, E, link, o);
        ASSERT_NO_FATAL_FAILURE(expect_permutations(r, L, D));
        EXPECT_EQ(r.exact, exact_max >= D);
        EXPECT_NEAR(r.objective, 0.0, 1e-12);
    }
}

TEST(MoeTunerIlp2, RandomInstancesMatchBruteForceWithUnequalClusters) {
    // free cluster sizes: Eq 13 becomes a constraint on which cluster goes where; the planner must reach the
    // smallest memory deviation and, inside it, the smallest traffic
    Rng rng(22);
    for (int trial = 0; trial < 6; ++trial) {
        const int D = trial % 2 == 0 ? 3 : 4, L = trial % 2 == 0 ? 3 : 2, E = 7;
        std::vector<int> clusters(static_cast<size_t>(L) * E);
        for (int l = 0; l < L; ++l) {
            for (int e = 0; e < E; ++e) clusters[static_cast<size_t>(l) * E + e] = e < D ? e : int(rng.below(D));
        }
        std::vector<double> transitions(static_cast<size_t>(L - 1) * E * E);
        for (auto& t : transitions) t = rng.uniform() < 0.3 ? std::floor(100 * rng.uniform()) : 0.0;
        std::vector<double> link(D * D);
        for (int a = 0; a < D; ++a)
            for (int b = 0; b < D; ++b) link[a * D + b] = a == b ? 0.0 : 1.0 + std::floor(9 * rng.uniform());
        const Brute2 brute = brute_ilp2(clusters, transitions, L, D, E, link);
        const Ilp2Result r = moetuner_ilp2(clusters, transitions, L, D, E, link, exact_options());
        ASSERT_NO_FATAL_FAILURE(expect_permutations(r, L, D));
        EXPECT_NEAR(r.memory_deviation, brute.memory_dev, 1e-9) << "trial " << trial;
        EXPECT_NEAR(r.objective, brute.traffic, 1e-9 * std::max(1.0, brute.traffic)) << "trial " << trial;
        // the heuristic is feasible and never better than the optimum
        BalanceOptions h = exact_options();
        h.ilp2_exact_max_devices = 0;
        const Ilp2Result g = moetuner_ilp2(clusters, transitions, L, D, E, link, h);
        ASSERT_NO_FATAL_FAILURE(expect_permutations(g, L, D));
        EXPECT_FALSE(g.exact);
        EXPECT_GE(g.memory_deviation, brute.memory_dev - 1e-9);
        if (std::fabs(g.memory_deviation - brute.memory_dev) < 1e-9) {
            EXPECT_GE(g.objective, brute.traffic - 1e-9);
        }
    }
}

TEST(MoeTunerIlp2, BothIlpFormulationsAloneMatchBruteForce) {
    // the CBC models themselves (no heuristic incumbent, no DP bound): the z-RLT form of the corrected ILP 2 and
    // the compact big-M form must both reach the brute-force optimum and prove it
    Rng rng(23);
    for (int trial = 0; trial < 6; ++trial) {
        const int D = trial % 2 == 0 ? 3 : 4, L = trial % 2 == 0 ? 3 : 2, E = 7;
        std::vector<int> clusters(static_cast<size_t>(L) * E);
        for (int l = 0; l < L; ++l)
            for (int e = 0; e < E; ++e) clusters[static_cast<size_t>(l) * E + e] = e < D ? e : int(rng.below(D));
        std::vector<double> transitions(static_cast<size_t>(L - 1) * E * E);
        for (auto& t : transitions) t = rng.uniform() < 0.4 ? std::floor(100 * rng.uniform()) : 0.0;
        std::vector<double> link(D * D);
        for (int a = 0; a < D; ++a)
            for (int b = 0; b < D; ++b) link[a * D + b] = a == b ? 0.0 : 1.0 + std::floor(9 * rng.uniform());
        const Brute2 brute = brute_ilp2(clusters, transitions, L, D, E, link);
        for (int formulation : {1, 2}) {
            Ilp2Switches sw;
            sw.ilp_only = true;
            sw.formulation = formulation;
            const Ilp2Result r = moetuner_ilp2(clusters, transitions, L, D, E, link, exact_options(), sw);
            ASSERT_NO_FATAL_FAILURE(expect_permutations(r, L, D));
            EXPECT_TRUE(r.optimal) << "trial " << trial << " formulation " << formulation;
            EXPECT_NEAR(r.memory_deviation, brute.memory_dev, 1e-9) << "trial " << trial;
            EXPECT_NEAR(r.objective, brute.traffic, 1e-9 * std::max(1.0, brute.traffic))
                << "trial " << trial << " formulation " << formulation;
            EXPECT_LE(r.bound, r.objective + 1e-9);
        }
    }
}

TEST(MoeTunerIlp2, WithoutTransitionsKeepsAFeasibleIdentity) {
    const int D = 4, E = 8, L = 2;
    std::vector<double> link = two_halves_links(D);
    // equal sizes: identity is feasible and must be kept
    std::vector<int> clusters(static_cast<size_t>(L) * E);
    for (int l = 0; l < L; ++l)
        for (int e = 0; e < E; ++e) clusters[static_cast<size_t>(l) * E + e] = e / 2;
    const Ilp2Result r = moetuner_ilp2(clusters, {}, L, D, E, link, exact_options());
    for (int l = 0; l < L; ++l)
        for (int c = 0; c < D; ++c) EXPECT_EQ(r.gpu_of_cluster[static_cast<size_t>(l) * D + c], c);
    EXPECT_EQ(r.objective, 0.0);
}

TEST(MoeTunerIlp2, WithoutTransitionsOnlyBalancesMemory) {
    const int D = 4, E = 8, L = 2;
    std::vector<double> link = two_halves_links(D);
    // unequal sizes (3,3,1,1) in both layers: identity puts 6 experts on GPUs 0 and 1; Eq 13 (4 each) is
    // reachable by pairing a big cluster with a small one
    const std::vector<int> uneven = {0, 0, 0, 1, 1, 1, 2, 3, 0, 0, 0, 1, 1, 1, 2, 3};
    // sizes (5,1,1,1) then (1,1,1,5): Eq 13 is unreachable (the GPU of a 5-cluster holds >= 6); the best
    // deviation is 2, identity's is 6
    const std::vector<int> skewed = {0, 0, 0, 0, 0, 1, 2, 3, 0, 1, 2, 3, 3, 3, 3, 3};
    for (int exact_max : {8, 0}) {
        BalanceOptions o = exact_options();
        o.ilp2_exact_max_devices = exact_max;
        const Ilp2Result s = moetuner_ilp2(uneven, {}, L, D, E, link, o);
        ASSERT_NO_FATAL_FAILURE(expect_permutations(s, L, D));
        std::vector<int> mem(D, 0);
        for (const auto& p : placements_from(uneven, s, L, D, E))
            for (int g : p.owner) ++mem[g];
        for (int g = 0; g < D; ++g) EXPECT_EQ(mem[g], E * L / D) << "GPU " << g << " (Eq 13)";
        EXPECT_EQ(s.memory_deviation, 0.0);
        const Ilp2Result k = moetuner_ilp2(skewed, {}, L, D, E, link, o);
        ASSERT_NO_FATAL_FAILURE(expect_permutations(k, L, D));
        EXPECT_EQ(k.memory_deviation, 2.0);
        EXPECT_EQ(k.optimal, exact_max >= D);
    }
}

}  // namespace
}  // namespace prophet
