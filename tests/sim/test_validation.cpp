// prophet validate's statistics (sim/validation.h) on hand-made points: error summaries over all and held-out
// points, and the Kendall tau of the policy order over significant pairs only.
#include <gtest/gtest.h>

#include "sim/validation.h"

using namespace prophet::sim;

namespace {

PointValidation point(const std::string& policy, int64_t seed, double measured, double simulated, bool held_out = true,
                      const std::string& config = "A") {
    PointValidation p;
    p.run_id = policy + std::to_string(seed);
    p.policy = policy;
    p.schedule = "none";
    p.config = config;
    p.seed = seed;
    p.held_out = held_out;
    p.steps = 10;
    p.measured_mean_ms = p.measured_median_ms = measured;
    p.sim_mean_ms = p.sim_median_ms = simulated;
    p.error_median = p.error_mean = (simulated - measured) / measured;
    return p;
}

}  // namespace

namespace {

// errors +10%, -20% (held out) and +30% (calibration set)
ValidationSummary three_point_summary() {
    return summarize_validation(
        {point("static", 1, 100, 110), point("prophet", 1, 100, 80), point("top2", 1, 100, 130, false)});
}

}  // namespace

TEST(Validation, ErrorsOverAllPoints) {
    const ValidationSummary s = three_point_summary();
    EXPECT_NEAR(s.mape, 0.2, 1e-12);
    EXPECT_NEAR(s.bias, 0.2 / 3, 1e-12);
    EXPECT_NEAR(s.max_abs, 0.3, 1e-12);
    EXPECT_NEAR(s.p90_abs, 0.28, 1e-12);  // |errors| 0.1, 0.2, 0.3: position 0.9 * 2 = 1.8 -> 0.2 + 0.8 * 0.1
}

TEST(Validation, ErrorsOverHeldOutPoints) {
    const ValidationSummary s = three_point_summary();
    EXPECT_EQ(s.heldout_points, 2);
    EXPECT_NEAR(s.heldout_mape, 0.15, 1e-12);
    EXPECT_NEAR(s.heldout_bias, -0.05, 1e-12);
    EXPECT_NEAR(s.heldout_max_abs, 0.2, 1e-12);
}

TEST(Validation, KendallTauCountsOnlySignificantPairs) {
    // config A: static 100/102 ms (sd 1.41), prophet 80/82 (sd 1.41): 20 ms apart, > 2 sd -> one pair; the
    // simulator orders them the same way (90 vs 70) -> tau = 1 over 1 pair
    std::vector<PointValidation> pts = {point("static", 1, 100, 90), point("static", 2, 102, 91),
                                        point("prophet", 1, 80, 70), point("prophet", 2, 82, 71)};
    // fastermoe 101/103: 1 ms from static (not significant), 20 from prophet (significant), simulated 60: below
    // prophet's 70 -> discordant with prophet; its pair with static is skipped
    pts.push_back(point("fastermoe", 1, 101, 60));
    pts.push_back(point("fastermoe", 2, 103, 61));
    ValidationSummary s = summarize_validation(pts);
    EXPECT_EQ(s.tau_pairs, 2);  // static-prophet (concordant), fastermoe-prophet (discordant)
    EXPECT_NEAR(s.kendall_tau, 0.0, 1e-12);
    // another config is its own group: its points never pair with config A's
    pts.push_back(point("static", 1, 500, 400, true, "B"));
    s = summarize_validation(pts);
    EXPECT_EQ(s.tau_pairs, 2);
    // without fastermoe: one concordant pair
    s = summarize_validation({pts[0], pts[1], pts[2], pts[3]});
    EXPECT_EQ(s.tau_pairs, 1);
    EXPECT_NEAR(s.kendall_tau, 1.0, 1e-12);
}
