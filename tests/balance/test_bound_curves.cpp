// Curves of the layer bound (balance/bound_curves.h, docs/bounds.md "The terms"). The mixed all-to-all curve: the
// most that x extra holders can save of a x (tokens off their device) + b x (tokens off their node), checked against
// every placement of tiny instances (each expert's holder set any non-empty set of devices). The busiest-receiver
// curve: the least, over every split of x extra holders between the experts, of the largest share
// (w_e - e's h_e largest rows) / h_e, checked against every split of tiny instances and a plain greedy of larger ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "balance/bound_curves.h"
#include "balance/cluster.h"

namespace prophet {
namespace {

struct MixedCase {
    const char* name;
    int nodes, per_node, experts;
    double a, b;  // seconds saved per token kept on its device, in its node
    uint64_t seed;
    int zero_percent;  // share of (device, expert) counts set to 0
};

ClusterSpec cluster_of(const MixedCase& c) {
    ClusterSpec cl;
    cl.num_devices = c.nodes * c.per_node;
    cl.devices_per_node = c.per_node;
    return cl;
}

// [D*E] counts in [0, 1000), zero_percent of them 0 (the draws of seed)
std::vector<int64_t> random_counts(int D, int E, uint64_t seed, int zero_percent) {
    std::mt19937_64 rng(seed);
    std::vector<int64_t> counts(static_cast<size_t>(D) * E);
    for (int64_t& v : counts) v = static_cast<int>(rng() % 100) < zero_percent ? 0 : static_cast<int64_t>(rng() % 1000);
    return counts;
}

// [x] the most any placement with x extra holders saves: each expert's holder set any non-empty subset, local
// tokens = its holders' rows (device) and the rows of the nodes holding it (node). Slow and obvious.
std::vector<double> enumerated_best(const std::vector<int64_t>& counts, const ClusterSpec& cl, int E, double a,
                                    double b) {
    const int D = cl.num_devices;
    // per expert: the best saving with h holders, h = 1 .. D
    std::vector<std::vector<double>> per_expert(E, std::vector<double>(D + 1, -1.0));
    for (int e = 0; e < E; ++e)
        for (unsigned set = 1; set < (1u << D); ++set) {
            double saved = 0;
            std::vector<char> node_held(static_cast<size_t>(D / cl.devices_per_node), 0);
            for (int d = 0; d < D; ++d) {
                if (!(set & (1u << d))) continue;
                saved += a * static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
                node_held[cl.node_of(d)] = 1;
            }
            for (int d = 0; d < D; ++d)
                if (node_held[cl.node_of(d)]) saved += b * static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
            const int h = __builtin_popcount(set);
            per_expert[e][h] = std::max(per_expert[e][h], saved);
        }
    // the best split of x extra holders over the experts (each at least one holder)
    std::vector<double> best(static_cast<size_t>(E) * (D - 1) + 1, -1.0);
    std::vector<int> h(E, 1);
    while (true) {
        int extra = 0;
        double saved = 0;
        for (int e = 0; e < E; ++e) extra += h[e] - 1, saved += per_expert[e][h[e]];
        best[static_cast<size_t>(extra)] = std::max(best[static_cast<size_t>(extra)], saved);
        int e = 0;
        while (e < E && ++h[e] > D) h[e++] = 1;
        if (e == E) break;
    }
    return best;
}

class MixedGainOracle : public ::testing::TestWithParam<MixedCase> {};

TEST_P(MixedGainOracle, EqualsTheBestPlacementForEveryNumberOfHolders) {
    const MixedCase c = GetParam();
    const ClusterSpec cl = cluster_of(c);
    const int D = cl.num_devices, E = c.experts;
    const std::vector<int64_t> counts = random_counts(D, E, c.seed, c.zero_percent);
    bound_detail::MixedGain curve;
    bound_detail::mixed_gain_curve(counts.data(), cl, E, c.a, c.b, curve);
    const std::vector<double> best = enumerated_best(counts, cl, E, c.a, c.b);
    for (size_t x = 0; x < best.size(); ++x)
        EXPECT_NEAR(curve.forced + curve.beyond_owners(static_cast<int64_t>(x)), best[x], 1e-9 * (1 + best[x]))
            << "x = " << x;
}

INSTANTIATE_TEST_SUITE_P(Table, MixedGainOracle,
                         ::testing::Values(MixedCase{"two_by_two_three_experts", 2, 2, 3, 0.5, 0.5, 1, 0},
                                           MixedCase{"two_by_two_device_heavy", 2, 2, 3, 0.9, 0.1, 2, 0},
                                           MixedCase{"two_by_two_node_heavy", 2, 2, 3, 0.1, 0.9, 3, 0},
                                           MixedCase{"three_by_two_sparse", 3, 2, 2, 0.6, 0.4, 4, 40},
                                           MixedCase{"two_by_three_two_experts", 2, 3, 2, 0.75, 0.25, 5, 20},
                                           MixedCase{"one_per_node", 4, 1, 2, 0.5, 0.5, 6, 0}),
                         [](const ::testing::TestParamInfo<MixedCase>& info) { return std::string(info.param.name); });

struct ReceiveCase {
    const char* name;
    int D, E;
    uint64_t seed;
    int zero_percent;   // share of (device, expert) counts set to 0
    int64_t max_extra;  // the budget of extra holders the curve is computed for
};

// (w_e - the h largest of e's rows) / h. Slow and obvious: sorts e's column.
double share_of(const std::vector<int64_t>& counts, int D, int E, int e, int h) {
    std::vector<int64_t> column(D);
    for (int d = 0; d < D; ++d) column[d] = counts[static_cast<size_t>(d) * E + e];
    std::sort(column.begin(), column.end(), std::greater<int64_t>());
    int64_t rest = 0;
    for (int d = h; d < D; ++d) rest += column[d];
    return static_cast<double>(rest) / h;
}

class ReceiveCurveOracle : public ::testing::TestWithParam<ReceiveCase> {
  protected:
    std::vector<int64_t> counts_ = random_counts(GetParam().D, GetParam().E, GetParam().seed, GetParam().zero_percent);
    std::vector<double> curve() const {
        std::vector<double> out;
        bound_detail::receive_curve(counts_.data(), GetParam().D, GetParam().E, GetParam().max_extra, out);
        return out;
    }
};

// Every split of x extra holders (each expert 1 .. D holders): the least largest share is the curve at x, and 0 once
// the curve has stopped (it stops where nothing is left to receive).
TEST_P(ReceiveCurveOracle, EqualsTheBestSplitOfEveryNumberOfHolders) {
    const ReceiveCase c = GetParam();
    if (c.E * (c.D - 1) > 12) GTEST_SKIP() << "every split only for tiny instances";
    std::vector<double> best(static_cast<size_t>(c.E) * (c.D - 1) + 1, INFINITY);
    std::vector<int> h(c.E, 1);
    while (true) {
        int extra = 0;
        double largest = 0;
        for (int e = 0; e < c.E; ++e)
            extra += h[e] - 1, largest = std::max(largest, share_of(counts_, c.D, c.E, e, h[e]));
        best[static_cast<size_t>(extra)] = std::min(best[static_cast<size_t>(extra)], largest);
        int e = 0;
        while (e < c.E && ++h[e] > c.D) h[e++] = 1;
        if (e == c.E) break;
    }
    const std::vector<double> fast = curve();
    for (size_t x = 0; x < best.size() && x <= static_cast<size_t>(c.max_extra); ++x)
        EXPECT_DOUBLE_EQ(x < fast.size() ? fast[x] : 0.0, best[x]) << "x = " << x;
}

// The greedy written plainly (every share recomputed from a sorted column at every step; ties to the lower expert):
// the same curve, value for value, on instances too large to enumerate.
TEST_P(ReceiveCurveOracle, EqualsThePlainGreedy) {
    const ReceiveCase c = GetParam();
    std::vector<int> h(c.E, 1);
    std::vector<double> plain;
    for (int64_t x = 0;; ++x) {
        int top = 0;
        for (int e = 1; e < c.E; ++e)
            if (share_of(counts_, c.D, c.E, e, h[e]) > share_of(counts_, c.D, c.E, top, h[top])) top = e;
        const double largest = share_of(counts_, c.D, c.E, top, h[top]);
        plain.push_back(largest);
        if (x == std::min(c.max_extra, bound_detail::kReceiveSteps) || largest <= 0) break;
        ++h[top];
    }
    EXPECT_EQ(curve(), plain);
}

INSTANTIATE_TEST_SUITE_P(Table, ReceiveCurveOracle,
                         ::testing::Values(ReceiveCase{"two_devices_three_experts", 2, 3, 11, 0, 100},
                                           ReceiveCase{"three_devices_two_experts", 3, 2, 12, 30, 100},
                                           ReceiveCase{"four_devices_three_experts", 4, 3, 13, 20, 100},
                                           ReceiveCase{"four_devices_budget_two", 4, 3, 14, 0, 2},
                                           ReceiveCase{"sixteen_by_twelve_sparse", 16, 12, 15, 60, 1000},
                                           ReceiveCase{"thirty_two_by_forty", 32, 40, 16, 10, 1000}),
                         [](const ::testing::TestParamInfo<ReceiveCase>& info) {
                             return std::string(info.param.name);
                         });

}  // namespace
}  // namespace prophet
