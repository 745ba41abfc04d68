// load_forecast.h: what flow plans the next iteration of one layer for, from the layer's past counts
// (balance.flow_predict).
//
// Each iteration's counts [D*E] go in (observe, once per iteration, in order); the planning counts come out
// (forecast), per (device, expert) cell:
//   ewma      West's exponentially weighted mean and variance with decay a = balance.flow_decay per iteration,
//             mean <- mean + (1 - a)(x - mean), var <- a (var + (1 - a)(x - mean)^2) (the first observation sets
//             mean = x, var = 0), forecast = round(mean + balance.flow_z * sqrt(var));
//   previous  the last iteration's counts (Pro-Prophet's locality): the same update with a = 0.
// state() and restore() carry everything a resumed run needs to forecast as the uninterrupted run would (bit for
// bit: the doubles round-trip through JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "balance/policies.h"

namespace prophet {

class LoadForecast {
  public:
    LoadForecast(size_t cells, const BalanceOptions& options);

    void observe(const int64_t* counts);  // counts [cells]: the next iteration's
    // The planning counts [cells] after the iterations observed so far (at least one).
    std::vector<int64_t> forecast() const;
    // The planning counts as if observe(counts) came next, leaving the statistics as they are (the trainer's
    // main thread hands these to its planner thread before the iteration ends).
    std::vector<int64_t> forecast_after(const int64_t* counts) const;
    int64_t observed() const { return observed_; }

    struct State {
        int64_t observed = 0;
        std::vector<double> mean, var;  // [cells]
    };
    State state() const { return {observed_, mean_, var_}; }
    // Adopts a saved state; returns "" or what is wrong with it (sizes, a count < 0, a non-finite or negative
    // statistic), leaving this forecast unchanged then.
    std::string restore(State state);

  private:
    double decay_, z_;
    int64_t observed_ = 0;
    std::vector<double> mean_, var_;  // [cells]
};

}  // namespace prophet
