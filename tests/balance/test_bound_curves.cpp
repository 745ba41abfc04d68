// The mixed all-to-all curve of the layer bound (balance/bound_curves.h, docs/bounds.md "All-to-all"): the most
// that x extra holders can save of a x (tokens off their device) + b x (tokens off their node), checked against
// every placement of tiny instances (each expert's holder set any non-empty set of devices).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
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
    std::mt19937_64 rng(c.seed);
    std::vector<int64_t> counts(static_cast<size_t>(D) * E);
    for (int64_t& v : counts)
        v = static_cast<int>(rng() % 100) < c.zero_percent ? 0 : static_cast<int64_t>(rng() % 1000);
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

}  // namespace
}  // namespace prophet
