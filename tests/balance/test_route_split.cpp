// route_split.h: every routing rule as whole-token parts per (device, expert) group, what the executor runs, against
// the cost model's own flow (compute_flow) so modelled and executed routing agree, plus the tally a run records.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>

#include "balance/flow_routing.h"
#include "balance/route_split.h"
#include "balance_fixtures.h"
#include "core/rng.h"

namespace prophet {
namespace {

using testing::paper_cost_model;

struct SplitCase {
    RouteRule rule;
    int D, E;
    bool priced;  // kFlow, kMaxFlow: the paper's cost model as prices (else one unit per token)
};

void PrintTo(const SplitCase& c, std::ostream* os) {
    *os << route_rule_name(c.rule) << " D=" << c.D << " E=" << c.E << (c.priced ? " priced" : "");
}

std::string split_case_name(const ::testing::TestParamInfo<SplitCase>& info) {
    return std::string(route_rule_name(info.param.rule)) + "_D" + std::to_string(info.param.D) + "_E" +
           std::to_string(info.param.E) + (info.param.priced ? "_priced" : "");
}

// A random placement: random owners, each expert replicated on each other device with probability 1/3.
Placement random_placement(int D, int E, Rng& rng) {
    std::vector<int> owner(E);
    for (int e = 0; e < E; ++e) owner[e] = static_cast<int>(rng.below(D));
    Placement p = Placement::make_owners(D, owner);
    for (int e = 0; e < E; ++e)
        for (int d = 0; d < D; ++d)
            if (d != owner[e] && rng.below(3) == 0) p.add_replica(e, d);
    return p;
}

class RouteSplitRule : public ::testing::TestWithParam<SplitCase> {};

// The parts are well formed: devices ascending and holding the expert, every part > 0, a group's parts summing to
// its count; and their flow is compute_flow's (what plan and sim price) device by device and pair by pair (kFlow:
// its own LP solve's parts, and that solve's optimum is compute_flow's).
TEST_P(RouteSplitRule, PartsAreTheModelledFlow) {
    const SplitCase c = GetParam();
    const CostModel cost = paper_cost_model(c.D, 256);
    const CostModel* pricing = c.priced ? &cost : nullptr;
    Rng rng(static_cast<uint64_t>(c.D * 131 + c.E));
    for (int trial = 0; trial < 30; ++trial) {
        const Placement p = random_placement(c.D, c.E, rng);
        std::vector<int64_t> counts(static_cast<size_t>(c.D) * c.E);
        for (int64_t& n : counts) n = rng.below(4) == 0 ? 0 : static_cast<int64_t>(rng.below(50));
        FlowRouteReport lp;  // kFlow: this split's LP solve
        const RouteSplit split = route_split(counts.data(), p, c.rule, pricing, &lp);
        ASSERT_EQ(split.group_start.size(), counts.size() + 1);
        for (int src = 0; src < c.D; ++src)
            for (int e = 0; e < c.E; ++e) {
                const size_t g = static_cast<size_t>(src) * c.E + e;
                int64_t sum = 0;
                for (int i = split.group_start[g]; i < split.group_start[g + 1]; ++i) {
                    EXPECT_GT(split.part_tokens[i], 0);
                    EXPECT_TRUE(p.holds(e, split.part_device[i])) << "a part on a device without the expert";
                    if (i > split.group_start[g]) {
                        EXPECT_LT(split.part_device[i - 1], split.part_device[i]);
                    }
                    sum += split.part_tokens[i];
                }
                EXPECT_EQ(sum, counts[g]) << "group (" << src << ", " << e << ")";
            }
        const LayerFlow got = flow_of_split(counts.data(), p, split);
        if (c.rule == RouteRule::kFlow) {
            // compute_flow solves the LP again, warm-started from this solve's basis: the same optimum, but where
            // it is degenerate possibly another optimal vertex, so the split is checked against its own solve (its
            // parts, exactly) and the two solves against each other (the optimum, 1e-9 relative)
            FlowRouteReport again;
            flow_route_layer(counts.data(), c.D, c.E, p, pricing, &again);
            EXPECT_NEAR(lp.lp_objective, again.lp_objective, 1e-9 * (1 + std::fabs(again.lp_objective)))
                << "trial " << trial;
            const LayerFlow own = flow_from_parts(counts.data(), c.D, c.E, p, lp.parts);
            EXPECT_EQ(got.computed, own.computed) << "trial " << trial;
            EXPECT_EQ(got.route, own.route) << "trial " << trial;
            EXPECT_EQ(got.received, own.received) << "trial " << trial;
            EXPECT_EQ(got.expert_device, own.expert_device) << "trial " << trial;
            continue;
        }
        const LayerFlow want = compute_flow(counts.data(), c.D, c.E, p, c.rule, pricing);
        EXPECT_EQ(got.computed, want.computed) << "trial " << trial;
        EXPECT_EQ(got.route, want.route) << "trial " << trial;
        EXPECT_EQ(got.received, want.received) << "trial " << trial;
    }
}

std::vector<SplitCase> split_cases() {
    std::vector<SplitCase> cases;
    for (RouteRule rule :
         {RouteRule::kOwner, RouteRule::kLeastLoaded, RouteRule::kEvenSplit, RouteRule::kFlow, RouteRule::kMaxFlow})
        for (const auto& [D, E] : {std::pair{1, 4}, std::pair{2, 4}, std::pair{4, 8}, std::pair{8, 16}})
            cases.push_back({rule, D, E, false});
    for (RouteRule rule : {RouteRule::kFlow, RouteRule::kMaxFlow}) {
        cases.push_back({rule, 4, 8, true});
        cases.push_back({rule, 8, 16, true});
    }
    return cases;
}

INSTANTIATE_TEST_SUITE_P(Rules, RouteSplitRule, ::testing::ValuesIn(split_cases()), split_case_name);

// Hand-worked: D = 2, E = 2; expert 0 owned by device 0 with a replica on 1, expert 1 on device 1 alone.
// counts: device 0 routes 5 to expert 0 and 2 to expert 1; device 1 routes 3 to expert 0.
TEST(RouteSplit, EvenSplitAndTallyByHand) {
    Placement p = Placement::make_owners(2, {0, 1});
    p.add_replica(0, 1);
    const int64_t counts[] = {5, 2, 3, 0};
    const RouteSplit split = route_split(counts, p, RouteRule::kEvenSplit);
    // holders of expert 0: (owner 0, replica 1); 5 from device 0 = 3 + 2 (the extra token to holder 0 % 2 = 0),
    // 3 from device 1 = 1 + 2 (the extra token to holder 1 % 2 = 1, device 1); expert 1's 2 tokens to device 1
    EXPECT_EQ(split.group_start, (std::vector<int>{0, 2, 3, 5, 5}));
    EXPECT_EQ(split.part_device, (std::vector<int>{0, 1, 1, 0, 1}));
    EXPECT_EQ(split.part_tokens, (std::vector<int64_t>{3, 2, 2, 1, 2}));
    EXPECT_EQ(split.tokens_to(1, 0, 1), 2);
    EXPECT_EQ(split.tokens_to(1, 1, 0), 0);
    // owner 0 computes 3 + 1 of expert 0, owner 1 the 2 of expert 1; replica 1 computes 2 + 2 of expert 0, the
    // first 2 sent from device 0
    const RoutingTally tally = tally_routing(split, p);
    EXPECT_EQ(tally.to_owner, 6);
    EXPECT_EQ(tally.to_replicas, 4);
    EXPECT_EQ(tally.sent_to_replicas, 2);
    // the owner rule keeps every non-holder's tokens on the owner and a holder's own tokens local: no token is
    // sent to a replica
    const RoutingTally owner = tally_routing(route_split(counts, p, RouteRule::kOwner), p);
    EXPECT_EQ(owner.to_owner, 7);
    EXPECT_EQ(owner.to_replicas, 3);
    EXPECT_EQ(owner.sent_to_replicas, 0);
}

}  // namespace
}  // namespace prophet
