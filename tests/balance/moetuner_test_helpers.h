// moetuner_test_helpers.h: what the MoETuner tests (test_moetuner_*.cpp) share: exact CBC options, the
// enumeration of expert-to-cluster maps their brute forces walk, and a two-halves link-cost matrix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "balance/policies.h"

namespace prophet::testing {

// every map expert -> [0, D) with all D clusters non-empty, optionally with exactly E/D experts each
inline void for_each_partition(int E, int D, bool fixed_size,
                               const std::function<void(const std::vector<int>&)>& visit) {
    std::vector<int> a(E, 0);
    int64_t total = 1;
    for (int i = 0; i < E; ++i) total *= D;
    for (int64_t code = 0; code < total; ++code) {
        int64_t x = code;
        std::vector<int> size(D, 0);
        for (int e = 0; e < E; ++e) {
            a[e] = static_cast<int>(x % D);
            x /= D;
            ++size[a[e]];
        }
        bool ok = true;
        for (int c = 0; c < D; ++c) ok = ok && size[c] > 0 && (!fixed_size || size[c] == E / D);
        if (ok) visit(a);
    }
}

inline BalanceOptions exact_options(const std::string& objective = "minmax") {
    BalanceOptions o;
    o.ilp_objective = objective;
    o.ilp_gap = 0.0;
    o.ilp_time_limit_s = 30.0;
    return o;
}

// link cost: cheap (1) inside each half {0..D/2-1}, {D/2..D-1}, dear (10) across, 0 on the diagonal
inline std::vector<double> two_halves_links(int D) {
    std::vector<double> link(static_cast<size_t>(D) * D, 0.0);
    for (int a = 0; a < D; ++a)
        for (int b = 0; b < D; ++b)
            if (a != b) link[static_cast<size_t>(a) * D + b] = (a < D / 2) == (b < D / 2) ? 1.0 : 10.0;
    return link;
}

}  // namespace prophet::testing
