// core/stats.h: the order statistics every measurement, validation and report path shares, by hand.
#include <gtest/gtest.h>

#include "core/stats.h"

using prophet::median;
using prophet::percentile;

TEST(Stats, Percentile) {
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 0.5), 3.0);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9), 10.0);
    EXPECT_DOUBLE_EQ(percentile({0, 10}, 0.9), 9.0);
    EXPECT_DOUBLE_EQ(percentile({}, 0.5), 0.0);
    EXPECT_DOUBLE_EQ(percentile({5, 1, 3}, 0.0), 1.0);  // any order; q = 0 the minimum, q = 1 the maximum
    EXPECT_DOUBLE_EQ(percentile({5, 1, 3}, 1.0), 5.0);
}

TEST(Stats, Median) {
    EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);      // odd count: the middle of the sorted values
    EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);   // even count: the mean of the two middle values
    EXPECT_DOUBLE_EQ(median({7}), 7.0);
    EXPECT_DOUBLE_EQ(median({}), 0.0);
}
