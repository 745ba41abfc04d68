// The ILP-gap instances and comparison (lib/serve/ilp_gap.h): instances are consistent token walks, both planners
// return valid owner-only placements, and the joint ILP is never worse than the two-stage one beyond its MIP gap.
#include <gtest/gtest.h>

#include <numeric>

#include "serve/ilp_gap.h"

using namespace prophet;
using namespace prophet::serve;

TEST(IlpGap, InstanceIsConsistentTokenWalks) {
    const IlpInstance in = make_ilp_instance(8, 4, 3, 7, 1000);
    ASSERT_EQ(in.loads.size(), 3u * 8);
    ASSERT_EQ(in.transitions.size(), 2u * 8 * 8);
    for (int l = 0; l < 3; ++l)  // top-1: every token adds 1 to one expert per layer
        EXPECT_DOUBLE_EQ(std::accumulate(in.loads.begin() + l * 8, in.loads.begin() + (l + 1) * 8, 0.0), 1000.0);
    for (int l = 0; l < 2; ++l) {
        // the transitions out of layer l's experts are layer l's loads, those into layer l+1's are its loads
        for (int e = 0; e < 8; ++e) {
            double out = 0, in_next = 0;
            for (int f = 0; f < 8; ++f) {
                out += in.transitions[(static_cast<size_t>(l) * 8 + e) * 8 + f];
                in_next += in.transitions[(static_cast<size_t>(l) * 8 + f) * 8 + e];
            }
            EXPECT_DOUBLE_EQ(out, in.loads[static_cast<size_t>(l) * 8 + e]);
            EXPECT_DOUBLE_EQ(in_next, in.loads[static_cast<size_t>(l + 1) * 8 + e]);
        }
    }
    EXPECT_EQ(make_ilp_instance(8, 4, 3, 7, 1000).loads, in.loads) << "seeded: the same instance again";
}

TEST(IlpGap, JointIsNoWorseThanTwoStageWithinItsGap) {
    BalanceOptions options;
    options.ilp_time_limit_s = 5;
    for (uint64_t seed : {1, 2}) {
        const IlpInstance in = make_ilp_instance(4, 2, 2, seed, 2000);
        const IlpGapResult r = compare_ilps(in, options);
        ASSERT_TRUE(r.has_joint);
        EXPECT_GT(r.two_stage.objective, 0);
        EXPECT_LE(r.joint.objective, r.two_stage.objective * (1 + options.ilp_gap) + 1e-9) << "seed " << seed;
        EXPECT_GE(r.gap(), -options.ilp_gap - 1e-9);
        EXPECT_LE(r.joint_bound, r.joint.objective + 1e-9) << "CBC's bound is a lower bound";
    }
    // above the joint limits only the two-stage plan runs
    const IlpGapResult big = compare_ilps(make_ilp_instance(16, 4, 2, 1, 500), options);
    EXPECT_FALSE(big.has_joint);
    EXPECT_GT(big.two_stage.objective, 0);
}
