#include "trace/multinomial.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace prophet {
namespace {

// small means: walk up from 0, P(0) = q^n and P(k+1) = P(k) (n - k) / (k + 1) p / q
int64_t binomial_from_zero(Rng& rng, int64_t n, double p) {
    const double q = 1.0 - p, odds = p / q;
    double pmf = std::exp(static_cast<double>(n) * std::log1p(-p));
    double u = rng.uniform();
    for (int64_t k = 0; k < n; ++k) {
        if (u < pmf) return k;
        u -= pmf;
        pmf *= static_cast<double>(n - k) / static_cast<double>(k + 1) * odds;
    }
    return n;
}

// larger means: P(mode) from lgamma, then alternate below and above the mode until the uniform is used up
int64_t binomial_from_mode(Rng& rng, int64_t n, double p) {
    const double q = 1.0 - p, odds = p / q;
    const int64_t mode = std::min(n, static_cast<int64_t>(std::floor((static_cast<double>(n) + 1.0) * p)));
    const double log_pmf = std::lgamma(n + 1.0) - std::lgamma(mode + 1.0) -
                           std::lgamma(static_cast<double>(n - mode) + 1.0) + static_cast<double>(mode) * std::log(p) +
                           static_cast<double>(n - mode) * std::log1p(-p);
    const double at_mode = std::exp(log_pmf);
    double u = rng.uniform() - at_mode;
    if (u < 0) return mode;
    double below = at_mode, above = at_mode;
    int64_t lo = mode, hi = mode;
    while (lo > 0 || hi < n) {
        if (lo > 0) {
            below *= static_cast<double>(lo) / static_cast<double>(n - lo + 1) / odds;  // P(lo - 1)
            --lo;
            if ((u -= below) < 0) return lo;
        }
        if (hi < n) {
            above *= static_cast<double>(n - hi) / static_cast<double>(hi + 1) * odds;  // P(hi + 1)
            ++hi;
            if ((u -= above) < 0) return hi;
        }
    }
    return mode;  // the uniform exceeded the summed probabilities by rounding only
}

}  // namespace

int64_t binomial(Rng& rng, int64_t n, double p) {
    PROPHET_ASSERT(n >= 0 && p >= 0.0 && p <= 1.0);
    if (n == 0 || p <= 0.0) return 0;
    if (p >= 1.0) return n;
    if (p > 0.5) return n - binomial(rng, n, 1.0 - p);
    return static_cast<double>(n) * p < 16.0 ? binomial_from_zero(rng, n, p) : binomial_from_mode(rng, n, p);
}

void multinomial(Rng& rng, int64_t n, const std::vector<double>& weights, int64_t* out) {
    const size_t k = weights.size();
    std::vector<double> suffix(k + 1, 0.0);  // [k + 1] weight of items e.. k-1, summed from the end for stability
    for (size_t e = k; e-- > 0;) suffix[e] = suffix[e + 1] + weights[e];
    PROPHET_ASSERT_MSG(suffix[0] > 0.0 && std::isfinite(suffix[0]), "multinomial weights have no mass");
    for (size_t e = 0; e < k && n > 0; ++e) {
        if (weights[e] <= 0.0) continue;
        const double p = std::min(1.0, weights[e] / suffix[e]);
        const int64_t c = binomial(rng, n, p);
        out[e] += c;
        n -= c;
    }
}

}  // namespace prophet
