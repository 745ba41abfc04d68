// moetuner_internal.h: helpers shared by the MoETuner files (moetuner_ilp1.cpp, moetuner_ilp2_search.cpp,
// moetuner_ilp2.cpp, policy_moetuner.cpp); not part of lib/balance's interface.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "balance/policies.h"
#include "core/timer.h"

namespace prophet::moetuner_detail {

constexpr double kInf = std::numeric_limits<double>::infinity();

inline double seconds_since(int64_t start_ns) { return static_cast<double>(now_ns() - start_ns) * 1e-9; }

// a < b by more than a relative tolerance (so local searches terminate despite rounding)
inline bool less_tol(double a, double b) {
    return a < b - 1e-12 * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

// The memory deviation (Eq 13's max_g |mem_g - target|, experts) that rounding alone forces when total_experts
// (E * L) are spread over D GPUs, target = total_experts / D: 0 when D divides it, else the distance from target
// to the farther of its two integer neighbours. Ilp2Data::memory_lb; the joint ILP's least band.
inline double memory_rounding_deviation(int64_t total_experts, int D) {
    const double target = static_cast<double>(total_experts) / D;
    return total_experts % D == 0 ? 0.0 : std::max(std::ceil(target) - target, target - std::floor(target));
}

// balance.ilp_* keys (exit 3 naming the key)
void validate_objective_options(const BalanceOptions& options);
// shapes and values of plan_moetuner's inputs, then validate_objective_options (exit 3 naming the input)
void validate_moetuner(const std::vector<double>& loads, const std::vector<double>& transitions, int L, int D, int E,
                       const std::vector<double>& link_cost, const BalanceOptions& options);
// ILP 1's objective of cluster loads T [D] (raw units) around mean: max (minmax) or sum of |T_c - mean| (sumdev)
double cluster_objective(const std::vector<double>& T, double mean, bool minmax);

}  // namespace prophet::moetuner_detail
