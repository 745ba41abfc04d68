// kernel_test_helpers.h: what the kernel tests (test_kernels_*.cpp) share: random inputs, the tolerances, and the
// comparisons with an oracle.
//
// Forwards are checked against naive loops written in the tests (in double). Backwards are checked against the
// naive loop where one is short (matmul, embedding, attention) and otherwise against central finite differences of
// the op's own forward in double: loss = sum(out * r) for a random r, so d loss / d out = r is what backward
// gets, and d loss / d x_i is compared with (loss(x_i + h) - loss(x_i - h)) / 2h.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"

namespace prophet::testing {

template <typename Float>
std::vector<Float> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<Float> v(n);
    for (auto& x : v) x = Float(scale * rng.normal());
    return v;
}

// Tolerances. double ops vs double naive loops: only summation order differs, errors ~1e-15 relative, so 1e-12
// is a loose bound that still catches any indexing bug (those give O(1) errors). float ops vs double naive:
// float eps is 6e-8 and the sums here are short (<= 64 terms of O(1) values), so 1e-5 abs + rel is ~100x the
// expected error. Finite differences in double with h = 1e-6: truncation ~h^2 * f''' ~ 1e-12, rounding
// ~1e-16 * |loss| / h ~ 1e-9 for loss ~ 10, so 1e-7 abs + 1e-6 rel.
inline constexpr double kTolDouble = 1e-12;
inline constexpr double kTolFloat = 1e-5;
inline constexpr double kFdStep = 1e-6;
inline constexpr double kTolFdAbs = 1e-7;
inline constexpr double kTolFdRel = 1e-6;

template <typename A, typename B>
void expect_close(const std::vector<A>& got, const std::vector<B>& want, double tol, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double max_err = 0;
    size_t worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double err = std::fabs(double(got[i]) - double(want[i])) / (1.0 + std::fabs(double(want[i])));
        if (err > max_err) {
            max_err = err;
            worst = i;
        }
    }
    EXPECT_LE(max_err, tol) << what << ": worst at " << worst << " got " << double(got[worst]) << " want "
                            << double(want[worst]);
}

// Finite-difference gradient of loss(x) at x, for the entries of x (all of them: the tests keep x small).
inline std::vector<double> fd_gradient(std::vector<double> x,
                                       const std::function<double(const std::vector<double>&)>& loss) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        const double saved = x[i];
        x[i] = saved + kFdStep;
        const double plus = loss(x);
        x[i] = saved - kFdStep;
        const double minus = loss(x);
        x[i] = saved;
        g[i] = (plus - minus) / (2 * kFdStep);
    }
    return g;
}

inline void expect_fd_close(const std::vector<double>& analytic, const std::vector<double>& numeric, const char* what) {
    ASSERT_EQ(analytic.size(), numeric.size());
    for (size_t i = 0; i < analytic.size(); i++) {
        EXPECT_NEAR(analytic[i], numeric[i], kTolFdAbs + kTolFdRel * std::fabs(numeric[i])) << what << " [" << i << "]";
    }
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}

template <typename To, typename From>
std::vector<To> cast(const std::vector<From>& v) {
    return std::vector<To>(v.begin(), v.end());
}

}  // namespace prophet::testing
