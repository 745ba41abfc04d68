#include "serve/tail_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/stats.h"

namespace prophet::serve {

double percentile(std::vector<double> values, double p) {
    if (values.empty())
        throw_input_error("percentile", "no values", "a percentile needs at least one value");
    if (!(p >= 0 && p <= 100))
        throw_config_error("percentile", std::to_string(p), "must be in [0, 100]", "use 50, 95 or 99");
    return prophet::percentile(std::move(values), p / 100.0);
}

TailSummary summarize(const std::vector<double>& per_iteration) {
    TailSummary s;
    s.n = static_cast<int>(per_iteration.size());
    s.p50 = percentile(per_iteration, 50);
    s.p95 = percentile(per_iteration, 95);
    s.p99 = percentile(per_iteration, 99);
    s.mean_of_max = std::accumulate(per_iteration.begin(), per_iteration.end(), 0.0) / s.n;
    s.max = *std::max_element(per_iteration.begin(), per_iteration.end());
    return s;
}

std::vector<double> max_over_ranks(const std::vector<double>& times, int iterations, int layers, int ranks) {
    PROPHET_ASSERT(times.size() == static_cast<size_t>(iterations) * layers * ranks && ranks > 0);
    std::vector<double> m(static_cast<size_t>(iterations) * layers);  // [I][L]
    for (size_t il = 0; il < m.size(); ++il)
        m[il] = *std::max_element(times.begin() + static_cast<long>(il * ranks),
                                  times.begin() + static_cast<long>((il + 1) * ranks));
    return m;
}

std::vector<TailSummary> per_layer_tails(const std::vector<double>& times, int iterations, int layers, int ranks) {
    const std::vector<double> m = max_over_ranks(times, iterations, layers, ranks);
    std::vector<TailSummary> out;
    for (int l = 0; l < layers; ++l) {
        std::vector<double> column(iterations);
        for (int i = 0; i < iterations; ++i) column[i] = m[static_cast<size_t>(i) * layers + l];
        out.push_back(summarize(column));
    }
    return out;
}

TailSummary summed_layer_tail(const std::vector<double>& times, int iterations, int layers, int ranks) {
    const std::vector<double> m = max_over_ranks(times, iterations, layers, ranks);
    std::vector<double> sums(iterations, 0.0);
    for (int i = 0; i < iterations; ++i)
        for (int l = 0; l < layers; ++l) sums[i] += m[static_cast<size_t>(i) * layers + l];
    return summarize(sums);
}

}  // namespace prophet::serve
