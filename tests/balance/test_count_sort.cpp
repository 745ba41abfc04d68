// The bounds' radix sort of counts (balance/count_sort.h) against std::sort with std::greater, the obvious oracle:
// the same sequence, value for value.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "balance/count_sort.h"
#include "core/rng.h"

namespace prophet {
namespace {

struct SortCase {
    const char* name;
    int size;
    int64_t value_range;  // values uniform in [0, value_range)
};

class CountSortOracle : public ::testing::TestWithParam<SortCase> {};

TEST_P(CountSortOracle, SameOrderAsStdSort) {
    const SortCase c = GetParam();
    Rng rng(static_cast<uint64_t>(c.size * 7 + c.value_range % 1000));
    std::vector<int64_t> scratch;  // kept across trials, as the bounds keep it
    for (int trial = 0; trial < 5; ++trial) {
        std::vector<int64_t> values(c.size);
        for (int64_t& v : values) v = static_cast<int64_t>(rng.below(static_cast<uint64_t>(c.value_range)));
        std::vector<int64_t> expected = values;
        std::sort(expected.begin(), expected.end(), std::greater<int64_t>());
        sort_counts_descending(values, scratch);
        EXPECT_EQ(values, expected) << "trial " << trial;
    }
}

INSTANTIATE_TEST_SUITE_P(Table, CountSortOracle,
                         ::testing::Values(SortCase{"empty", 0, 1}, SortCase{"short", 100, 50},
                                           SortCase{"zeros", 5000, 1}, SortCase{"dense_counting", 5000, 1000},
                                           SortCase{"just_past_counting", 5000, 10050},
                                           SortCase{"one_digit", 5000, 2048}, SortCase{"two_digits", 20000, 1 << 20},
                                           SortCase{"three_digits", 6000, int64_t{1} << 30},
                                           SortCase{"beyond_32_bits", 6000, int64_t{1} << 40}),
                         [](const ::testing::TestParamInfo<SortCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
