// Tail statistics on hand-computed fixtures. Percentile definition: type 7 (linear interpolation between closest
// ranks), h = (n-1) p / 100, q = x[floor h] + frac(h) (x[floor h + 1] - x[floor h]); see lib/serve/tail_stats.h.
#include <gtest/gtest.h>

#include "core/error.h"
#include "serve/tail_stats.h"

using namespace prophet;
using namespace prophet::serve;

TEST(TailStats, PercentileType7ByHand) {
    const std::vector<double> x = {10, 1, 3, 2, 4};  // sorted: 1 2 3 4 10
    EXPECT_DOUBLE_EQ(percentile(x, 0), 1.0);
    EXPECT_DOUBLE_EQ(percentile(x, 100), 10.0);
    EXPECT_DOUBLE_EQ(percentile(x, 50), 3.0);   // h = 2
    EXPECT_DOUBLE_EQ(percentile(x, 95), 8.8);   // h = 3.8: 4 + 0.8 * 6
    EXPECT_DOUBLE_EQ(percentile(x, 99), 9.76);  // h = 3.96: 4 + 0.96 * 6
    EXPECT_DOUBLE_EQ(percentile(x, 25), 2.0);   // h = 1
    EXPECT_DOUBLE_EQ(percentile({7.0}, 99), 7.0);
    EXPECT_DOUBLE_EQ(percentile({1.0, 2.0}, 50), 1.5);
}

TEST(TailStats, BadInputIsRejected) {
    EXPECT_THROW(percentile({}, 50), Error);
    try {
        percentile({1.0}, 101);
        FAIL() << "p = 101 accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("[0, 100]"), std::string::npos) << e.what();
    }
}

// times [I=5][L=2][D=2]: layer 0's maxima over ranks are 4 1 3 2 10, layer 1's are 5 5 6 5 5
TEST(TailStats, PerLayerMaxOverRanksThenOverIterations) {
    const std::vector<double> t = {
        4, 0.5, 5, 1,   // i = 0: layer 0 (ranks 0, 1), layer 1
        1, 0.2, 2, 5,   // i = 1
        0, 3, 6, 6,     // i = 2
        2, 2, 5, 4,     // i = 3
        9, 10, 1, 5,    // i = 4
    };
    const std::vector<double> m = max_over_ranks(t, 5, 2, 2);
    EXPECT_EQ(m, (std::vector<double>{4, 5, 1, 5, 3, 6, 2, 5, 10, 5}));
    const std::vector<TailSummary> layers = per_layer_tails(t, 5, 2, 2);
    ASSERT_EQ(layers.size(), 2u);
    EXPECT_EQ(layers[0].n, 5);
    EXPECT_DOUBLE_EQ(layers[0].p50, 3.0);
    EXPECT_DOUBLE_EQ(layers[0].p95, 8.8);
    EXPECT_DOUBLE_EQ(layers[0].p99, 9.76);
    EXPECT_DOUBLE_EQ(layers[0].mean_of_max, 4.0);  // (4+1+3+2+10)/5: MoETuner's "tail latency"
    EXPECT_DOUBLE_EQ(layers[0].max, 10.0);
    EXPECT_DOUBLE_EQ(layers[1].p50, 5.0);           // 5 5 5 5 6
    EXPECT_DOUBLE_EQ(layers[1].p95, 5.8);           // h = 3.8: 5 + 0.8 * 1
    EXPECT_DOUBLE_EQ(layers[1].mean_of_max, 5.2);
    // summed over layers per iteration: 9 6 9 7 15 -> sorted 6 7 9 9 15
    const TailSummary sum = summed_layer_tail(t, 5, 2, 2);
    EXPECT_DOUBLE_EQ(sum.p50, 9.0);
    EXPECT_DOUBLE_EQ(sum.p95, 13.8);  // 9 + 0.8 * 6
    EXPECT_DOUBLE_EQ(sum.mean_of_max, 9.2);
    // the mean of the maxima is not a quantile: one slow batch (10) pulls it above the median
    EXPECT_GT(layers[0].mean_of_max, layers[0].p50);
}
