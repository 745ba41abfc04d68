// count_sort.cpp: non-negative counts sorted by counting (values below twice their number) or else by LSD radix,
// 11 bits a pass, as many passes as the largest value needs.
#include "balance/count_sort.h"

#include <algorithm>
#include <array>
#include <functional>

#include "core/error.h"

namespace prophet {
namespace {

// the counting path's tally, kept per thread between calls (bounds run one layer at a time per thread)
std::vector<uint32_t>& counting_scratch() {
    thread_local std::vector<uint32_t> tally;
    return tally;
}

}  // namespace

void sort_counts_descending(std::vector<int64_t>& values, std::vector<int64_t>& scratch) {
    constexpr int kBits = 11, kBuckets = 1 << kBits;
    constexpr size_t kShort = 4096;  // below this a comparison sort is as fast (the buckets cost as much as the sort)
    if (values.size() < kShort) {
        std::sort(values.begin(), values.end(), std::greater<int64_t>());
        return;
    }
    int64_t largest = 0, smallest = 0;
    for (int64_t v : values) largest = std::max(largest, v), smallest = std::min(smallest, v);
    PROPHET_ASSERT_MSG(smallest >= 0, "sort_counts_descending: a negative count");
    if (largest < 2 * static_cast<int64_t>(values.size())) {  // dense values: count each value, emit largest first
        std::vector<uint32_t>& tally = counting_scratch();
        tally.assign(static_cast<size_t>(largest) + 1, 0);
        for (int64_t v : values) ++tally[static_cast<size_t>(v)];
        size_t at = 0;
        for (int64_t v = largest; v >= 0; --v)
            for (uint32_t k = tally[static_cast<size_t>(v)]; k > 0; --k) values[at++] = v;
        return;
    }
    scratch.resize(values.size());
    std::array<size_t, kBuckets> start{};
    // each pass is stable and orders by one digit, largest digit first (bucket kBuckets-1 first), so after the pass of
    // the highest digit the values are in descending order
    for (int shift = 0; shift == 0 || (largest >> shift) > 0; shift += kBits) {
        start.fill(0);
        for (int64_t v : values) ++start[kBuckets - 1 - ((v >> shift) & (kBuckets - 1))];
        size_t at = 0;
        for (size_t& s : start) at += s, s = at - s;  // exclusive prefix sums
        for (int64_t v : values) scratch[start[kBuckets - 1 - ((v >> shift) & (kBuckets - 1))]++] = v;
        values.swap(scratch);
    }
}

}  // namespace prophet
