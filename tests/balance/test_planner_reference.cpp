// test_planner_reference.cpp: the fast paths of the planner (one-pass owner-rule flow, the greedy's incremental
// flow and candidate scan, the whole-expert credit that skips experts without receivers) against slow, obvious
// references written here from the definitions, on random cases. Any difference in a placement or a flow fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/policies.h"
#include "balance_fixtures.h"
#include "core/rng.h"

namespace prophet {
namespace {

using testing::paper_cost_model;
using testing::skewed_counts;
using testing::unit_cost_model;

// owner rule from its definition, token by token: a holder computes its own tokens, everyone else sends to the owner
LayerFlow reference_owner_flow(const std::vector<int64_t>& counts, const Placement& p) {
    const int D = p.num_devices, E = p.num_experts;
    LayerFlow f;
    f.num_devices = D;
    f.num_experts = E;
    f.destination.assign(static_cast<size_t>(D) * E, -1);
    f.computed.assign(D, 0);
    f.received.assign(D, 0);
    f.sent.assign(D, 0);
    f.route.assign(static_cast<size_t>(D) * D, 0);
    f.replica_holders.assign(E, 0);
    for (int src = 0; src < D; ++src)
        for (int e = 0; e < E; ++e) {
            const int64_t n = counts[static_cast<size_t>(src) * E + e];
            const int dst = p.holds(e, src) ? src : p.owner[e];
            f.destination[static_cast<size_t>(src) * E + e] = dst;
            f.total_tokens += n;
            f.computed[dst] += n;
            f.route[static_cast<size_t>(src) * D + dst] += n;
            if (dst != src) f.sent[src] += n, f.received[dst] += n;
        }
    for (int e = 0; e < E; ++e)
        for (int d = 0; d < D; ++d) f.replica_holders[e] += p.replica[static_cast<size_t>(e) * D + d];
    return f;
}

// random owners (moved ones included) and about `density` of the other slots holding a replica
Placement random_placement(int D, int E, double density, bool static_owners, Rng& rng) {
    Placement p = Placement::make_static(D, E);
    if (!static_owners)
        for (int e = 0; e < E; ++e)
            if (rng.uniform() < 0.3) p.owner[e] = static_cast<int>(rng.uniform() * D) % D;
    for (int e = 0; e < E; ++e)
        for (int d = 0; d < D; ++d)
            if (rng.uniform() < density) p.add_replica(e, d);
    return p;
}

void expect_same_flow(const LayerFlow& got, const LayerFlow& want, const std::string& where) {
    EXPECT_EQ(got.destination, want.destination) << where;
    EXPECT_EQ(got.computed, want.computed) << where;
    EXPECT_EQ(got.received, want.received) << where;
    EXPECT_EQ(got.sent, want.sent) << where;
    EXPECT_EQ(got.route, want.route) << where;
    EXPECT_EQ(got.replica_holders, want.replica_holders) << where;
    EXPECT_EQ(got.total_tokens, want.total_tokens) << where;
}

TEST(PlannerReference, OwnerRuleFlowMatchesTokenByTokenRouting) {
    Rng rng(11);
    for (int D : {2, 4, 8, 16})
        for (int per : {1, 2, 8})
            for (double density : {0.0, 0.05, 0.5})
                for (bool fixed : {true, false}) {
                    const int E = D * per;
                    const auto counts = skewed_counts(D, E, 200, 1.1, rng.next_u64());
                    const Placement p = random_placement(D, E, density, fixed, rng);
                    const std::string where = "D=" + std::to_string(D) + " E=" + std::to_string(E) +
                                              " density=" + std::to_string(density) + (fixed ? " static" : " moved");
                    expect_same_flow(compute_flow(counts.data(), D, E, p, RouteRule::kOwner),
                                     reference_owner_flow(counts, p), where);
                }
}

// Eq 8's whole-expert credit from its definition: each expert's share of T (its transfer group over the whole),
// first fit in expert order into the non-expert window, the rest beside the expert compute
TEST(PlannerReference, WholeExpertCreditMatchesFirstFitOverEveryExpert) {
    Rng rng(12);
    for (int D : {4, 8, 16})
        for (int per : {1, 4, 16})
            for (double density : {0.02, 0.2, 0.7})
                for (bool fixed : {true, false})
                    for (double fnec : {0.5, 3.0, 40.0}) {
                        const int E = D * per;
                        CostModel cost = unit_cost_model(D);
                        cost.cluster.fnec_s = fnec;
                        cost.cluster.bnec_s = 2 * fnec;
                        const auto counts = skewed_counts(D, E, 50, 1.1, rng.next_u64());
                        const Placement p = random_placement(D, E, density, fixed, rng);
                        const LayerFlow flow = compute_flow(counts.data(), D, E, p, RouteRule::kOwner);
                        const CostBreakdown c = predict_layer(cost, flow, p);
                        int counted = 0;
                        std::vector<int> group(E, 0);  // D - n_e: receivers plus the sender (paper count)
                        for (int e = 0; e < E; ++e) {
                            const int r = p.transfer_receivers(e);
                            group[e] = r > 0 ? r + 1 : 0;
                            counted += group[e];
                        }
                        if (counted == 0) continue;
                        std::vector<double> trans, agg;
                        for (int e = 0; e < E; ++e)
                            if (group[e] > 0) {
                                trans.push_back(c.trans_s / counted * group[e]);
                                agg.push_back(c.agg_s / counted * group[e]);
                            }
                        const std::string where = "D=" + std::to_string(D) + " E=" + std::to_string(E) +
                                                  " density=" + std::to_string(density) + " fnec=" +
                                                  std::to_string(fnec) + (fixed ? " static" : " moved");
                        const double tol = 1e-9 * (c.trans_s + 1);
                        EXPECT_NEAR(c.exposed_trans_s, exposed_whole_pieces(trans, c.fnec_s, c.fec_s), tol) << where;
                        EXPECT_NEAR(c.exposed_agg_s, exposed_whole_pieces(agg, c.bnec_s, c.bec_s), tol) << where;
                    }
}

// one replicated expert at every position (the credit skips runs of experts without receivers: none may be lost)
TEST(PlannerReference, WholeExpertCreditSeesAReplicatedExpertAnywhere) {
    for (int D : {4, 8})
        for (int E : {D, 4 * D, 16 * D})
            for (int hot = 0; hot < E; ++hot) {
                CostModel cost = unit_cost_model(D);
                cost.cluster.fnec_s = 0.5;  // one expert's share never fits: all of it beside FEC
                cost.cluster.bnec_s = 1.0;
                cost.cluster.compute_flops = 4e6;  // FEC = max H microseconds: the transfer stays exposed
                std::vector<int64_t> counts(static_cast<size_t>(D) * E, 1);
                Placement p = Placement::make_static(D, E);
                for (int d = 0; d < D; ++d) p.add_replica(hot, d);
                const LayerFlow flow = compute_flow(counts.data(), D, E, p, RouteRule::kOwner);
                const CostBreakdown c = predict_layer(cost, flow, p);
                // Trans = D (owner + D - 1 receivers) x 2 bytes / (D x 1 byte/s) = 2 s, beside FEC (max H us) only
                ASSERT_DOUBLE_EQ(c.trans_s, 2.0);
                ASSERT_LT(c.bec_s, 1e-3);
                EXPECT_DOUBLE_EQ(c.exposed_trans_s, std::max(0.0, 2.0 - c.fec_s)) << "D=" << D << " E=" << E
                                                                                   << " hot=" << hot;
                EXPECT_DOUBLE_EQ(c.exposed_agg_s, std::max(0.0, 2.0 - c.bec_s)) << "D=" << D << " E=" << E
                                                                                 << " hot=" << hot;
            }
}

// Algorithm 1 as plan_prophet documents it, recomputing the flow from scratch (token by token) after every step
// and scanning every expert for the candidate
Placement reference_prophet(const std::vector<int64_t>& counts, int D, int E, const CostModel& cost,
                            const BalanceOptions& o) {
    Placement placement = Placement::make_static(D, E);
    LayerFlow flow = reference_owner_flow(counts, placement);
    const double threshold = o.alpha * static_cast<double>(flow.total_tokens) / E;
    std::vector<int64_t> load(E, 0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) load[e] += counts[static_cast<size_t>(d) * E + e];
    double best = layer_cost(predict_layer(cost, flow, placement), o.cost_eq);
    int best_prefix = 0, improvements = 0;
    std::vector<int> chosen, times_picked(D, 0), replicas_held(D, 0);
    std::vector<std::vector<int>> chosen_holders;
    std::vector<bool> is_chosen(E, false);
    const std::vector<int> owned = placement.experts_per_device();
    while (true) {
        const auto hi = std::max_element(flow.computed.begin(), flow.computed.end());  // first of ties
        const auto lo = std::min_element(flow.computed.begin(), flow.computed.end());
        if (static_cast<double>(*hi - *lo) < threshold) break;
        const int heavy = static_cast<int>(hi - flow.computed.begin());
        if (times_picked[heavy] >= owned[heavy]) break;
        ++times_picked[heavy];
        int candidate = -1;
        for (int e = 0; e < E; ++e)
            if (placement.owner[e] == heavy && !is_chosen[e] && (candidate < 0 || load[e] > load[candidate]))
                candidate = e;
        if (candidate < 0) break;
        is_chosen[candidate] = true;
        std::vector<int> others;
        for (int d = 0; d < D; ++d)
            if (d != heavy) others.push_back(d);
        auto tokens = [&](int d) { return counts[static_cast<size_t>(d) * E + candidate]; };
        std::stable_sort(others.begin(), others.end(), [&](int a, int b) { return tokens(a) < tokens(b); });
        size_t excluded = 0;
        if (o.exclude_devices >= 0)
            excluded = std::min<size_t>(o.exclude_devices, others.size());
        else
            while (excluded < others.size() && tokens(others[excluded]) == 0) ++excluded;
        std::vector<int> holders;
        for (size_t i = excluded; i < others.size(); ++i)
            if (o.max_replicas_per_device == 0 || replicas_held[others[i]] < o.max_replicas_per_device)
                holders.push_back(others[i]);
        std::sort(holders.begin(), holders.end());
        for (int d : holders) {
            ++replicas_held[d];
            placement.add_replica(candidate, d);
        }
        chosen.push_back(candidate);
        chosen_holders.push_back(holders);
        flow = reference_owner_flow(counts, placement);
        const double c = layer_cost(predict_layer(cost, flow, placement), o.cost_eq);
        if (c < best) {
            best = c;
            best_prefix = static_cast<int>(chosen.size());
            ++improvements;
        }
    }
    const int keep = o.prefix_rule == "improvements" ? improvements : best_prefix;
    Placement result = Placement::make_static(D, E);
    for (int i = 0; i < keep; ++i)
        for (int d : chosen_holders[i]) result.add_replica(chosen[i], d);
    return result;
}

TEST(PlannerReference, ProphetPlacementsMatchARecomputingGreedy) {
    Rng rng(13);
    int cases = 0, replicated = 0;
    for (int D : {4, 8, 16})
        for (int per : {1, 4, 16})
            for (double alpha : {0.01, 0.5, 3.0})
                for (int eq : {6, 8})
                    for (int variant = 0; variant < 4; ++variant) {
                        const int E = D * per;
                        // many tokens per device and small experts, so replicas pay off and the greedy runs long
                        CostModel cost = paper_cost_model(D, 16384);
                        cost.model.d_ffn = 512;
                        if (variant == 2) cost.transfer_credit = TransferCredit::kChunks;
                        BalanceOptions o;
                        o.alpha = alpha;
                        o.cost_eq = eq;
                        if (variant == 1) {
                            o.prefix_rule = "improvements";
                            o.exclude_devices = 1;
                            o.max_replicas_per_device = 2;
                        }
                        auto counts = skewed_counts(D, E, 16384, 1.4, rng.next_u64());
                        if (variant == 3)  // experts in pairs with equal counts: ties (the first of ties wins)
                            for (int d = 0; d < D; ++d)
                                for (int e = 1; e < E; e += 2)
                                    counts[static_cast<size_t>(d) * E + e] = counts[static_cast<size_t>(d) * E + e - 1];
                        const Placement got = plan_prophet(counts.data(), D, E, cost, o);
                        const Placement want = reference_prophet(counts, D, E, cost, o);
                        const std::string where = "D=" + std::to_string(D) + " E=" + std::to_string(E) + " alpha=" +
                                                  std::to_string(alpha) + " eq=" + std::to_string(eq) +
                                                  " variant=" + std::to_string(variant);
                        EXPECT_EQ(got.owner, want.owner) << where;
                        EXPECT_EQ(got.replica, want.replica) << where;
                        ++cases;
                        replicated += want.num_replicas() > 0;
                    }
    // the cases must exercise the greedy, not only its early exits
    EXPECT_GT(replicated, cases / 3) << replicated << " of " << cases << " cases replicate anything";
}

}  // namespace
}  // namespace prophet
