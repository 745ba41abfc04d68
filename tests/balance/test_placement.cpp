// Placement invariants for every per-layer policy: every token computed exactly once, on a device that holds
// its expert; owners unchanged; no replica on the owner; the replica cap holds.
#include <gtest/gtest.h>

#include <functional>

#include "balance/policies.h"
#include "balance_fixtures.h"

using namespace prophet;
using prophet::testing::paper_cost_model;
using prophet::testing::skewed_counts;

namespace {

void expect_valid(const Placement& p, const std::vector<int64_t>& counts, int D, int E, RouteRule rule, int cap,
                  const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(check_placement(p, cap), "");
    const Placement fixed = Placement::make_static(D, E);
    EXPECT_EQ(p.owner, fixed.owner) << "owners must not move";
    const LayerFlow flow = compute_flow(counts.data(), D, E, p, rule);
    int64_t total = 0, computed = 0, local = 0, sent = 0, received = 0;
    for (int64_t c : counts) total += c;
    for (int d = 0; d < D; ++d) {
        computed += flow.computed[d];
        local += flow.route[static_cast<size_t>(d) * D + d];
        sent += flow.sent[d];
        received += flow.received[d];
    }
    EXPECT_EQ(computed, total) << "every token computed exactly once";
    EXPECT_EQ(sent, received);
    EXPECT_EQ(local + sent, total);
    for (int src = 0; src < D; ++src)
        for (int e = 0; e < E; ++e) {
            const int dst = flow.destination[static_cast<size_t>(src) * E + e];
            EXPECT_TRUE(p.holds(e, dst)) << "tokens of expert " << e << " sent to device " << dst << " which lacks it";
            if (p.holds(e, src)) {
                EXPECT_EQ(dst, src) << "a holder computes its own tokens";
            }
        }
}

}  // namespace

TEST(Placement, StaticLayoutIsContiguous) {
    const Placement p = Placement::make_static(4, 8);
    EXPECT_EQ(p.owner, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
    EXPECT_EQ(p.num_replicas(), 0);
    EXPECT_EQ(check_placement(p, 0), "");
}

TEST(Placement, CheckCatchesBrokenPlacements) {
    Placement p = Placement::make_static(2, 2);
    p.replica[0 * 2 + 0] = 1;  // owner listed as replica
    EXPECT_NE(check_placement(p, 0).find("owner"), std::string::npos);
    Placement q = Placement::make_static(2, 2);
    q.owner[1] = 5;
    EXPECT_NE(check_placement(q, 0).find("out of range"), std::string::npos);
    Placement r = Placement::make_static(2, 4);
    r.add_replica(2, 0);
    r.add_replica(3, 0);
    EXPECT_EQ(check_placement(r, 2), "");
    EXPECT_NE(check_placement(r, 1).find("cap"), std::string::npos);
}

TEST(Placement, EveryPolicyKeepsTheInvariants) {
    for (const auto& [D, E] : std::vector<std::pair<int, int>>{{4, 4}, {4, 8}, {8, 8}, {8, 32}, {16, 16}}) {
        for (uint64_t seed = 1; seed <= 5; ++seed) {
            const auto counts = skewed_counts(D, E, 512, 1.2, seed);
            const CostModel cost = paper_cost_model(D, 512);
            for (RouteRule rule : {RouteRule::kOwner, RouteRule::kLeastLoaded}) {
                for (int cap : {0, 1}) {
                    BalanceOptions o;
                    o.route_rule = rule;
                    o.max_replicas_per_device = cap;
                    o.cost_eq = 8;
                    const std::string tag = "D=" + std::to_string(D) + " E=" + std::to_string(E) + " seed=" +
                                            std::to_string(seed) + " cap=" + std::to_string(cap) +
                                            (rule == RouteRule::kOwner ? " owner" : " least_loaded");
                    expect_valid(plan_prophet(counts.data(), D, E, cost, o), counts, D, E, rule, cap, "prophet " + tag);
                    expect_valid(plan_fastermoe(counts.data(), D, E, cost, o), counts, D, E, rule, cap,
                                 "fastermoe " + tag);
                    if (cap == 0)
                        expect_valid(plan_broadcast_top(counts.data(), D, E, 2), counts, D, E, rule, 0, "top2 " + tag);
                }
            }
        }
    }
}

TEST(Placement, DroppedTokensUnderCapacity) {
    // device 0: 8 assignments over 2 experts, cf 1 -> capacity 4 per expert: 6 to e0 drops 2
    const std::vector<int64_t> counts = {6, 2, 4, 4};
    EXPECT_EQ(static_dropped_tokens(counts.data(), 2, 2, 1.0), 2);
    EXPECT_EQ(static_dropped_tokens(counts.data(), 2, 2, 1.5), 0);  // capacity 6
    EXPECT_EQ(static_dropped_tokens(counts.data(), 2, 2, 0.0), 0);  // dropless
}
