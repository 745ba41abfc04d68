// multinomial.h: exact count-level draws for the trace generator's `trace.sampling = "counts"`.
//
// binomial(n, p) by inversion (a uniform against the cumulative distribution), searched outward from the mode, so
// a draw costs O(sqrt(n p (1 - p))) probability terms rather than n Bernoulli trials. multinomial splits n over the
// weights by conditional binomials: count_e ~ Binomial(n left, w_e / weight left), the exact law of n independent
// categorical draws (exact up to floating point in the probabilities).
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace prophet {

int64_t binomial(Rng& rng, int64_t n, double p);

// adds to out[e] (e < weights.size()) the counts of n draws from weights (not necessarily normalised, >= 0, sum > 0)
void multinomial(Rng& rng, int64_t n, const std::vector<double>& weights, int64_t* out);

}  // namespace prophet
