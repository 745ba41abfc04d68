// trace_stats.cpp: statistics of a routing trace: expert loads and the Jensen-Shannon divergence between
// consecutive iterations' expert-load distributions (how predictable the next iteration is).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "trace/trace.h"

namespace prophet {

// An all-zero input has no distribution: two of them are identical (0), one against a proper distribution
// is maximally different (ln 2).
double js_divergence(const double* p, const double* q, int n) {
    PROPHET_ASSERT(n >= 0);
    double p_sum = 0.0;
    double q_sum = 0.0;
    for (int i = 0; i < n; ++i) {
        PROPHET_ASSERT_MSG(p[i] >= 0.0 && q[i] >= 0.0 && std::isfinite(p[i]) && std::isfinite(q[i]),
                           "js_divergence needs finite non-negative weights (index " + std::to_string(i) + ")");
        p_sum += p[i];
        q_sum += q[i];
    }
    const double ln2 = std::log(2.0);
    if (p_sum == 0.0 || q_sum == 0.0) return (p_sum == 0.0 && q_sum == 0.0) ? 0.0 : ln2;
    double divergence = 0.0;
    for (int i = 0; i < n; ++i) {
        const double a = p[i] / p_sum;
        const double b = q[i] / q_sum;
        const double m = 0.5 * (a + b);
        if (a > 0.0) divergence += 0.5 * a * std::log(a / m);
        if (b > 0.0) divergence += 0.5 * b * std::log(b / m);
    }
    return std::clamp(divergence, 0.0, ln2);
}

std::vector<int64_t> expert_loads(const Trace& trace, int iteration, int layer) {
    const TraceMeta& m = trace.meta;
    PROPHET_ASSERT_MSG(iteration >= 0 && iteration < m.num_iterations && layer >= 0 && layer < m.num_layers,
                       "expert_loads(" + std::to_string(iteration) + ", " + std::to_string(layer) +
                           ") outside the trace's " + std::to_string(m.num_iterations) + " iterations x " +
                           std::to_string(m.num_layers) + " layers");
    std::vector<int64_t> loads(m.num_experts, 0);  // [E] tokens
    const int64_t* c = trace.layer_counts(iteration, layer);
    for (int d = 0; d < m.num_devices; ++d)
        for (int e = 0; e < m.num_experts; ++e) loads[e] += c[static_cast<size_t>(d) * m.num_experts + e];
    return loads;
}

std::vector<double> consecutive_js_divergence(const Trace& trace) {
    const TraceMeta& m = trace.meta;
    std::vector<double> result;  // [(I-1) * L] nats
    if (m.num_iterations < 2) return result;
    result.reserve(static_cast<size_t>(m.num_iterations - 1) * m.num_layers);
    std::vector<double> previous(m.num_experts);  // [E] tokens
    std::vector<double> current(m.num_experts);   // [E] tokens
    for (int i = 1; i < m.num_iterations; ++i) {
        for (int l = 0; l < m.num_layers; ++l) {
            const std::vector<int64_t> before = expert_loads(trace, i - 1, l);
            const std::vector<int64_t> after = expert_loads(trace, i, l);
            for (int e = 0; e < m.num_experts; ++e) {
                previous[e] = static_cast<double>(before[e]);
                current[e] = static_cast<double>(after[e]);
            }
            result.push_back(js_divergence(previous.data(), current.data(), m.num_experts));
        }
    }
    return result;
}

}  // namespace prophet
