// load_forecast.cpp: the EWMA load forecast (see load_forecast.h).
#include "balance/load_forecast.h"

#include <cmath>
#include <utility>

#include "core/error.h"

namespace prophet {

LoadForecast::LoadForecast(size_t cells, const BalanceOptions& options)
    : decay_(options.flow_predict == "ewma" ? options.flow_decay : 0.0), z_(options.flow_z), mean_(cells, 0.0),
      var_(cells, 0.0) {
    PROPHET_ASSERT_MSG(options.flow_predict == "ewma" || options.flow_predict == "previous",
                       "LoadForecast: balance.flow_predict is checked by the config");
}

void LoadForecast::observe(const int64_t* counts) {
    const double a = decay_;
    for (size_t i = 0; i < mean_.size(); ++i) {
        const double x = static_cast<double>(counts[i]);
        if (observed_ == 0) {
            mean_[i] = x, var_[i] = 0.0;
            continue;
        }
        const double diff = x - mean_[i];
        mean_[i] += (1.0 - a) * diff;
        var_[i] = a * (var_[i] + (1.0 - a) * diff * diff);
    }
    ++observed_;
}

std::vector<int64_t> LoadForecast::forecast() const {
    PROPHET_ASSERT_MSG(observed_ > 0, "LoadForecast::forecast before any observation");
    std::vector<int64_t> out(mean_.size());
    for (size_t i = 0; i < mean_.size(); ++i) out[i] = std::llround(mean_[i] + z_ * std::sqrt(var_[i]));
    return out;
}

std::vector<int64_t> LoadForecast::forecast_after(const int64_t* counts) const {
    LoadForecast next = *this;
    next.observe(counts);
    return next.forecast();
}

std::string LoadForecast::restore(State state) {
    if (state.mean.size() != mean_.size() || state.var.size() != var_.size())
        return "has " + std::to_string(state.mean.size()) + " means and " + std::to_string(state.var.size()) +
               " variances, this config needs " + std::to_string(mean_.size()) + " of each (devices x experts)";
    if (state.observed < 0) return "counts " + std::to_string(state.observed) + " observations (needs >= 0)";
    // a count past 2^53 is no token count (and would overflow the forecast's rounding)
    constexpr double kMostCount = 9007199254740992.0;
    for (size_t i = 0; i < mean_.size(); ++i) {
        if (!(state.mean[i] >= 0 && state.mean[i] <= kMostCount))
            return "holds mean " + std::to_string(state.mean[i]) + " at entry " + std::to_string(i) +
                   " (needs a count in [0, 2^53])";
        if (!(state.var[i] >= 0 && state.var[i] <= kMostCount * kMostCount))
            return "holds variance " + std::to_string(state.var[i]) + " at entry " + std::to_string(i) +
                   " (needs a value in [0, 2^106])";
    }
    observed_ = state.observed;
    mean_ = std::move(state.mean);
    var_ = std::move(state.var);
    return "";
}

}  // namespace prophet
