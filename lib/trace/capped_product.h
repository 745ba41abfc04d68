// capped_product.h: the trace readers' guard on array sizes (internal to lib/trace; the binary and the CSV reader
// share it): a header's dimensions multiplied with saturation, so a hostile header cannot wrap the product.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace prophet {

constexpr uint64_t kMaxTraceArrayElements = 1ull << 31;     // per array of a trace (counts, transitions)
constexpr int64_t kMaxTraceTokensPerIteration = 1ll << 48;  // keeps tokens * top_k^2 far from int64 overflow

// a * b * ... saturating at kMaxTraceArrayElements + 1, so overflow never wraps; 0 when a factor is <= 0
inline uint64_t capped_product(std::initializer_list<int64_t> factors) {
    uint64_t product = 1;
    for (int64_t factor : factors) {
        if (factor <= 0) return 0;
        const uint64_t f = static_cast<uint64_t>(factor);
        if (f > kMaxTraceArrayElements || product > (kMaxTraceArrayElements + 1) / f) return kMaxTraceArrayElements + 1;
        product *= f;
    }
    return std::min(product, kMaxTraceArrayElements + 1);
}

}  // namespace prophet
