// count_sort.h: sorting the non-negative token counts of the bounds (bounds.cpp sorts every (device, expert) count
// of a layer, E x D of them) by counting or LSD radix, which take no data-dependent branch: a comparison sort of such
// arrays mispredicts about half its comparisons.
#pragma once

#include <cstdint>
#include <vector>

namespace prophet {

// Sorts `values` (every value >= 0) into descending order, the same order as std::sort with std::greater. `scratch`
// is a buffer the caller keeps between calls (its contents are overwritten). Short arrays take std::sort.
void sort_counts_descending(std::vector<int64_t>& values, std::vector<int64_t>& scratch);

}  // namespace prophet
