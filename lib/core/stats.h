// stats.h: order statistics over plain arrays, the one copy every measurement and report path uses.
#pragma once

#include <vector>

namespace prophet {

// Type-7 (linear interpolation between the closest ranks) percentile of v, q in [0, 1]: q = 0 the minimum, q = 1
// the maximum. v in any order (copied and sorted); empty: 0.
double percentile(std::vector<double> v, double q);

// The middle value (the mean of the two middle values for an even count); empty: 0.
double median(std::vector<double> v);

}  // namespace prophet
