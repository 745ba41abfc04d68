// The greedy planner against the exhaustive optimum, and what each policy is supposed to do.
#include <gtest/gtest.h>

#include <algorithm>

#include "balance/policies.h"
#include "balance_fixtures.h"
#include "core/error.h"

using namespace prophet;
using prophet::testing::paper_cost_model;
using prophet::testing::skewed_counts;
using prophet::testing::unit_cost_model;

namespace {

double cost_of(const Placement& p, const std::vector<int64_t>& counts, int D, int E, const CostModel& m,
               const BalanceOptions& o) {
    return layer_cost(predict_layer(m, compute_flow(counts.data(), D, E, p, o.route_rule), p), o.cost_eq);
}

}  // namespace

// Greedy vs the exact optimum on tiny instances (D = E in {3, 4}, Zipf s in {0.8, 1.2, 2}, 3 seeds, Eq 6 and
// Eq 8). The stated factor: when Eq 7 does not stop the search early (alpha = 0.1) the greedy is within 1.5x of
// the optimum (worst seen when written: 1.48; the gap comes from the greedy's all-but-n replica sets, where the
// optimum may send an expert to one or two heavy senders only). With the paper's alpha = 3 the stop rule
// max(H) - min(H) < 3 I/E holds on D <= 4 devices before any replica is tried in most cases, so only "never
// worse than static" is promised there (worst seen 2.21x the optimum); both worst ratios are printed.
TEST(Prophet, NeverWorseThanStaticNorFarFromTheOptimum) {
    for (double alpha : {0.1, 3.0}) {
        double worst = 1.0;
        int cases = 0;
        for (int D : {3, 4}) {
            for (double s : {0.8, 1.2, 2.0}) {
                for (uint64_t seed = 1; seed <= 3; ++seed) {
                    for (int eq : {6, 8}) {
                        const int E = D;
                        const auto counts = skewed_counts(D, E, 2048, s, seed);
                        const CostModel m = paper_cost_model(D, 2048);
                        BalanceOptions o;
                        o.cost_eq = eq;
                        o.alpha = alpha;
                        const double c_static = cost_of(Placement::make_static(D, E), counts, D, E, m, o);
                        const double c_greedy = cost_of(plan_prophet(counts.data(), D, E, m, o), counts, D, E, m, o);
                        const double c_best = cost_of(plan_exhaustive(counts.data(), D, E, m, o), counts, D, E, m, o);
                        const std::string tag = "D=" + std::to_string(D) + " s=" + std::to_string(s) + " seed=" +
                                                std::to_string(seed) + " eq=" + std::to_string(eq);
                        EXPECT_LE(c_greedy, c_static * (1 + 1e-12)) << tag;
                        EXPECT_LE(c_best, c_greedy * (1 + 1e-12)) << "the exhaustive search is not optimal: " << tag;
                        if (alpha < 1) {
                            EXPECT_LE(c_greedy, 1.5 * c_best) << tag;
                        }
                        worst = std::max(worst, c_greedy / c_best);
                        ++cases;
                    }
                }
            }
        }
        std::printf("alpha %.1f: greedy / optimum worst %.4f over %d cases\n", alpha, worst, cases);
    }
}

TEST(Prophet, ReplicatesTheHotExpertToTheDevicesHoldingItsTokens) {
    // 4 devices; every device routes 100 tokens to expert 0; device 3 routes none to it. With n = auto the
    // zero-token device is left out, and replicas go to devices 1 and 2.
    const int D = 4, E = 4;
    std::vector<int64_t> counts = {100, 5, 5, 5, 100, 5, 5, 5, 100, 5, 5, 5, 0, 5, 5, 5};
    CostModel m = unit_cost_model(D);
    m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = 1e6;  // parameters are cheap to move
    BalanceOptions o;
    o.alpha = 0.1;
    ProphetTrace trace;
    const Placement p = plan_prophet(counts.data(), D, E, m, o, &trace);
    EXPECT_TRUE(p.holds(0, 1));
    EXPECT_TRUE(p.holds(0, 2));
    EXPECT_FALSE(p.holds(0, 3)) << "a device with no tokens for the expert must not get it";
    EXPECT_GE(trace.chosen_prefix, 1);
    EXPECT_LT(trace.cost_after_s, trace.cost_before_s);
    // expensive parameters: replicating costs more than it saves, so nothing is kept
    m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = 1e-6;
    EXPECT_EQ(plan_prophet(counts.data(), D, E, m, o).num_replicas(), 0);
}

TEST(Prophet, BalancedInputNeedsNoPlan) {
    const int D = 4, E = 4;
    std::vector<int64_t> counts(16, 50);
    const CostModel m = unit_cost_model(D);
    BalanceOptions o;
    ProphetTrace trace;
    EXPECT_EQ(plan_prophet(counts.data(), D, E, m, o, &trace).num_replicas(), 0);
    EXPECT_EQ(trace.steps, 0);  // Eq 7 holds from the start
}

TEST(Prophet, PrefixRules) {
    // "best" keeps the prefix with the lowest T'; "improvements" keeps as many experts as there were
    // improvements. Both are valid and never above static under their own objective when improvements are
    // consecutive; here we only check both run and "best" is never worse than "improvements".
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        const auto counts = skewed_counts(8, 8, 1024, 1.2, seed);
        const CostModel m = paper_cost_model(8, 1024);
        BalanceOptions best, improvements;
        best.alpha = improvements.alpha = 0.1;
        improvements.prefix_rule = "improvements";
        const double c_best = cost_of(plan_prophet(counts.data(), 8, 8, m, best), counts, 8, 8, m, best);
        const double c_impr = cost_of(plan_prophet(counts.data(), 8, 8, m, improvements), counts, 8, 8, m, best);
        EXPECT_LE(c_best, c_impr * (1 + 1e-12)) << seed;
    }
}

TEST(Prophet, PlansValidlyWithMoreExpertsThanDevices) {
    const int D = 4, E = 16;
    const auto counts = skewed_counts(D, E, 4096, 1.5, 3);
    const CostModel m = paper_cost_model(D, 4096);
    BalanceOptions o;
    o.alpha = 0.05;
    o.cost_eq = 8;
    const Placement free = plan_prophet(counts.data(), D, E, m, o);
    EXPECT_EQ(check_placement(free, 0), "");
}

TEST(Prophet, KeepsTheReplicaCapWithMoreExpertsThanDevices) {
    const int D = 4, E = 16;
    const auto counts = skewed_counts(D, E, 4096, 1.5, 3);
    const CostModel m = paper_cost_model(D, 4096);
    BalanceOptions o;
    o.alpha = 0.05;
    o.cost_eq = 8;
    o.max_replicas_per_device = 1;
    const Placement capped = plan_prophet(counts.data(), D, E, m, o);
    EXPECT_EQ(check_placement(capped, 1), "");
    for (int r : capped.replicas_per_device()) EXPECT_LE(r, 1);
}

TEST(FasterMoE, ShadowsTheHeaviestExpertsToEveryDevice) {
    const int D = 4, E = 4;
    std::vector<int64_t> counts = {200, 5, 5, 5, 200, 5, 5, 5, 200, 5, 5, 5, 200, 5, 5, 5};
    CostModel m = unit_cost_model(D);
    m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = 1e6;
    const Placement p = plan_fastermoe(counts.data(), D, E, m, BalanceOptions{});
    EXPECT_EQ(p.num_replicas_of(0), D - 1) << "shadowed to every device";
    EXPECT_EQ(p.num_replicas(), D - 1) << "the cold experts gain nothing";
}

TEST(BroadcastTop, ReplicatesTheNHeaviestEverywhere) {
    const std::vector<int64_t> counts = {1, 9, 5, 0, 1, 9, 5, 0};  // loads e1 > e2 > e0 > e3
    const Placement p = plan_broadcast_top(counts.data(), 2, 4, 2);
    EXPECT_EQ(p.num_replicas_of(1), 1);
    EXPECT_EQ(p.num_replicas_of(2), 1);
    EXPECT_EQ(p.num_replicas(), 2);
}

TEST(Exhaustive, RefusesLargeInstances) {
    const auto counts = skewed_counts(8, 8, 64, 1.0, 1);
    try {
        plan_exhaustive(counts.data(), 8, 8, paper_cost_model(8, 64), BalanceOptions{});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("2^56"), std::string::npos) << e.what();
    }
}
