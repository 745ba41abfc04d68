// price_owner_moves (balance/moves.h) on the flat cost model, against the rule written out: the busiest device's
// experts sent or received, times the expert's bytes and state copies, over the Trans bandwidth.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "balance/moves.h"
#include "balance_fixtures.h"
#include "core/rng.h"

namespace prophet {
namespace {

struct MovePriceCase {
    const char* name;
    int D, E;
    int move_pct;  // chance that an expert's owner changes
};

class OwnerMovePrice : public ::testing::TestWithParam<MovePriceCase> {};

TEST_P(OwnerMovePrice, FlatPriceIsTheBusiestDevicesExperts) {
    const MovePriceCase c = GetParam();
    const CostModel cost = testing::paper_cost_model(c.D, 1024);
    ASSERT_FALSE(cost.topology_aware);
    Rng rng(static_cast<uint64_t>(c.D * 100 + c.move_pct));
    for (int trial = 0; trial < 20; ++trial) {
        const Placement before = Placement::make_static(c.D, c.E);
        std::vector<int> owner = before.owner;
        std::vector<int64_t> sent(c.D, 0), received(c.D, 0);
        int moved = 0;
        for (int e = 0; e < c.E; ++e) {
            if (rng.below(100) >= static_cast<uint64_t>(c.move_pct)) continue;
            owner[e] = static_cast<int>(rng.below(c.D));
            if (owner[e] == before.owner[e]) continue;
            ++sent[before.owner[e]], ++received[owner[e]], ++moved;
        }
        const MoveCost move = price_owner_moves(cost, before, Placement::make_owners(c.D, owner), 3.0);
        const int64_t busiest =
            std::max(*std::max_element(sent.begin(), sent.end()), *std::max_element(received.begin(), received.end()));
        EXPECT_EQ(move.experts, moved);
        EXPECT_DOUBLE_EQ(move.bytes, moved * cost.expert_bytes() * 3.0);
        EXPECT_DOUBLE_EQ(move.seconds, moved == 0 ? 0.0
                                                  : static_cast<double>(busiest) * cost.expert_bytes() * 3.0 /
                                                        (cost.cluster.trans_bytes_per_s * cost.bandwidth_scale))
            << "trial " << trial;
    }
}

INSTANTIATE_TEST_SUITE_P(Table, OwnerMovePrice,
                         ::testing::Values(MovePriceCase{"none", 4, 8, 0}, MovePriceCase{"few", 16, 64, 5},
                                           MovePriceCase{"many", 8, 32, 60}, MovePriceCase{"all", 64, 256, 100}),
                         [](const ::testing::TestParamInfo<MovePriceCase>& info) {
                             return std::string(info.param.name);
                         });

}  // namespace
}  // namespace prophet
