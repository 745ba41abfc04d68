// tail_stats.h: tail-latency statistics of serving runs (docs/serving.md, "Statistics").
//
// A run measures, per iteration i, layer l and rank d, a time t[i][l][d] (ms): the expert token-processing time
// or the all-to-all time of that rank's forward pass through layer l. A layer is as slow as its slowest rank, so
// the unit of every statistic is the per-layer maximum over ranks, m[i][l] = max_d t[i][l][d].
//
// Percentile definition (one, used everywhere): linear interpolation between the closest ranks, Hyndman & Fan's
// type 7 (numpy's and pandas' default). For n sorted values x[0..n-1] and p in [0,100]:
//   h = (n-1) * p/100,  q_p = x[floor h] + (h - floor h) * (x[floor h + 1] - x[floor h])
// so q_0 = min, q_100 = max, and q_50 is the usual median.
//
// MoETuner's "tail latency" is the mean over iterations of the per-layer maximum over ranks: reported here under
// its own name, mean_of_max, beside the real quantiles p50 / p95 / p99 of the same per-iteration maxima.
#pragma once

#include <cstdint>
#include <vector>

namespace prophet::serve {

// The type-7 percentile of `values` (any order; copied and sorted). p in [0,100]; throws prophet::Error (exit 3)
// for an empty input or p outside [0,100].
double percentile(std::vector<double> values, double p);

struct TailSummary {
    int n = 0;                // iterations
    double p50 = 0, p95 = 0, p99 = 0;
    double mean_of_max = 0;   // MoETuner's "tail latency": the mean of the per-iteration maxima
    double max = 0;
};
// Summary of per-iteration values (already maxima over ranks).
TailSummary summarize(const std::vector<double>& per_iteration);

// times [I][L][D] (row-major) -> [I][L] maxima over ranks
std::vector<double> max_over_ranks(const std::vector<double>& times, int iterations, int layers, int ranks);

// The per-layer summaries of times [I][L][D]: [L] summaries of max over ranks, over iterations.
std::vector<TailSummary> per_layer_tails(const std::vector<double>& times, int iterations, int layers, int ranks);

// Summary over iterations of the sum over layers of the per-layer maxima: the MoE part of one forward when every
// layer waits for its slowest rank.
TailSummary summed_layer_tail(const std::vector<double>& times, int iterations, int layers, int ranks);

}  // namespace prophet::serve
