// flow's load forecast (balance/load_forecast.h): the EWMA by hand, previous as its decay-0 case, the planner
// thread's read-only forecast, and the checks on a restored state.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "balance/load_forecast.h"

namespace prophet {
namespace {

BalanceOptions predict_options(const char* mode, double z, double decay) {
    BalanceOptions o;
    o.flow_predict = mode;
    o.flow_z = z;
    o.flow_decay = decay;
    return o;
}

struct PredictCase {
    const char* mode;
    double z;
    double decay;
    int64_t first, second;
    int64_t expected;  // planning count after observing first, then second
};

class ForecastByHand : public ::testing::TestWithParam<PredictCase> {};

TEST_P(ForecastByHand, PlansForTheConfiguredLoad) {
    const PredictCase c = GetParam();
    LoadForecast forecast(1, predict_options(c.mode, c.z, c.decay));
    forecast.observe(&c.first);
    forecast.observe(&c.second);
    EXPECT_EQ(forecast.forecast()[0], c.expected);
}

// ewma, decay 0.5, 100 then 200: mean 150, var = 0.5 * (0 + 0.5 * 100^2) = 2500, sd 50; previous ignores z and
// the decay
INSTANTIATE_TEST_SUITE_P(Modes, ForecastByHand,
                         ::testing::Values(PredictCase{"previous", 1.0, 0.5, 100, 200, 200},
                                           PredictCase{"previous", 3.0, 0.9, 200, 100, 100},
                                           PredictCase{"ewma", 0.0, 0.5, 100, 200, 150},
                                           PredictCase{"ewma", 1.0, 0.5, 100, 200, 200},
                                           PredictCase{"ewma", 2.0, 0.5, 100, 200, 250},
                                           PredictCase{"ewma", 0.0, 0.75, 100, 200, 125}));

// forecast_after(x) is observe(x) then forecast(), without the observation: the trainer's main thread hands it to
// the planner thread, and end_iteration observes x itself later
TEST(ForecastAfter, EqualsObservingFirstAndChangesNothing) {
    LoadForecast forecast(3, predict_options("ewma", 1.0, 0.6));
    const std::vector<std::vector<int64_t>> stream = {{5, 0, 90}, {7, 3, 40}, {2, 9, 60}, {8, 1, 75}};
    for (const std::vector<int64_t>& x : stream) {
        const LoadForecast::State before = forecast.state();
        const std::vector<int64_t> after = forecast.forecast_after(x.data());
        const LoadForecast::State unchanged = forecast.state();
        EXPECT_EQ(unchanged.observed, before.observed);
        EXPECT_EQ(unchanged.mean, before.mean);
        EXPECT_EQ(unchanged.var, before.var);
        forecast.observe(x.data());
        EXPECT_EQ(after, forecast.forecast());
    }
}

// A restored state forecasts exactly as the state it came from, from then on.
TEST(ForecastRestore, ContinuesBitForBit) {
    const BalanceOptions o = predict_options("ewma", 1.5, 0.7);
    LoadForecast original(2, o), resumed(2, o);
    const std::vector<int64_t> a = {10, 33}, b = {17, 2}, c = {4, 50};
    original.observe(a.data());
    original.observe(b.data());
    ASSERT_EQ(resumed.restore(original.state()), "");
    original.observe(c.data());
    resumed.observe(c.data());
    EXPECT_EQ(resumed.forecast(), original.forecast());
    EXPECT_EQ(resumed.state().mean, original.state().mean);
    EXPECT_EQ(resumed.state().var, original.state().var);
}

struct BadState {
    const char* name;
    LoadForecast::State state;
    const char* says;  // a fragment of the refusal
};

class ForecastRestoreRefuses : public ::testing::TestWithParam<BadState> {};

TEST_P(ForecastRestoreRefuses, AndKeepsItsOwnState) {
    const BadState c = GetParam();
    LoadForecast forecast(2, predict_options("ewma", 1.0, 0.5));
    const std::vector<int64_t> x = {3, 4};
    forecast.observe(x.data());
    const std::string problem = forecast.restore(c.state);
    EXPECT_NE(problem.find(c.says), std::string::npos) << problem;
    EXPECT_EQ(forecast.observed(), 1);
    EXPECT_EQ(forecast.forecast(), x);
}

const double kNan = std::numeric_limits<double>::quiet_NaN();
INSTANTIATE_TEST_SUITE_P(States, ForecastRestoreRefuses,
                         ::testing::Values(BadState{"short", {1, {1.0}, {0.0}}, "needs 2"},
                                           BadState{"negative_observed", {-1, {1.0, 2.0}, {0.0, 0.0}}, "observations"},
                                           BadState{"negative_mean", {1, {1.0, -2.0}, {0.0, 0.0}}, "holds mean"},
                                           BadState{"nan_variance", {1, {1.0, 2.0}, {kNan, 0.0}}, "holds variance"},
                                           BadState{"huge_mean", {1, {1e300, 2.0}, {0.0, 0.0}}, "2^53"}),
                         [](const ::testing::TestParamInfo<BadState>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
