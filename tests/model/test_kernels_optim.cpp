// test_kernels_optim.cpp: the optimizer side of lib/kernels (AdamW by hand and its vector path bit for bit against
// the scalar loop, sum of squares, gradient clipping, the learning-rate schedule).
// Run: ./build/tests/test_model --gtest_filter='Kernels*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernel_test_helpers.h"
#include "kernels/optim.h"

using namespace prophet;
using namespace prophet::testing;

// ---- optimizer side ----------------------------------------------------------------------------------------

TEST(Kernels, AdamWMatchesHandComputedSteps) {
    // Two steps by hand, lr 0.1, beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1.
    // step 1, g = 0.5: m = 0.05, v = 0.0125, m_hat = 0.05/0.1 = 0.5, v_hat = 0.0125/0.05 = 0.25,
    //   p = 1 - 0.1 * (0.5/(0.5+1e-8) + 0.1*1) = 0.890000002
    // step 2, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.011875 + 0.003125 = 0.015,
    //   m_hat = 0.02/0.19, v_hat = 0.015/0.0975, p = p1 - 0.1 * (m_hat/(sqrt(v_hat)+1e-8) + 0.1*p1)
    double p = 1.0, m = 0.0, v = 0.0;
    double g = 0.5;
    adamw_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.95, 1e-8, 0.1, 1, 1.0);
    EXPECT_NEAR(m, 0.05, 1e-15);
    EXPECT_NEAR(v, 0.0125, 1e-15);
    const double p1 = 1.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.1);
    EXPECT_NEAR(p, p1, 1e-15);
    EXPECT_NEAR(p, 0.890000002, 1e-12);
    g = -0.25;
    adamw_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.95, 1e-8, 0.1, 2, 1.0);
    EXPECT_NEAR(m, 0.02, 1e-15);
    EXPECT_NEAR(v, 0.015, 1e-15);
    const double p2 = p1 - 0.1 * ((0.02 / 0.19) / (std::sqrt(0.015 / 0.0975) + 1e-8) + 0.1 * p1);
    EXPECT_NEAR(p, p2, 1e-15);

    // grad_scale multiplies the gradient before the moments; no decay when weight_decay = 0; float path agrees
    float pf = 1.0f, mf = 0.0f, vf = 0.0f, gf = 1.0f;
    adamw_update(&pf, &gf, &mf, &vf, 1, 0.1, 0.9, 0.95, 1e-8, 0.0, 1, 0.5);
    EXPECT_FLOAT_EQ(mf, 0.05f);
    EXPECT_FLOAT_EQ(vf, 0.0125f);
    EXPECT_NEAR(pf, 1.0 - 0.1 * (0.5 / (0.5 + 1e-8)), 1e-7);
}

TEST(Kernels, SumSquaresCountsTheRemainderLoop) {
    std::vector<float> x = {3, 4, 0, 0, 0, 0, 0, 12, 0};  // odd length: the remainder loop counts too
    EXPECT_DOUBLE_EQ(sum_squares(x.data(), x.size()), 169.0);
}

TEST(Kernels, GradClipScaleShrinksOnlyAboveTheLimit) {
    EXPECT_DOUBLE_EQ(grad_clip_scale(13.0, 0.0), 1.0);  // disabled
    EXPECT_DOUBLE_EQ(grad_clip_scale(0.5, 1.0), 1.0);   // below the limit
    EXPECT_NEAR(grad_clip_scale(13.0, 1.0), 1.0 / 13.0, 1e-8);
}

TEST(Kernels, LrScheduleWarmupThenCosine) {
    LrSchedule s;
    s.max_lr = 1.0;
    s.min_lr = 0.1;
    s.warmup_steps = 10;
    s.total_steps = 110;
    EXPECT_DOUBLE_EQ(lr_at_step(s, 0), 0.1);  // (0+1)/10
    EXPECT_DOUBLE_EQ(lr_at_step(s, 4), 0.5);
    EXPECT_DOUBLE_EQ(lr_at_step(s, 9), 1.0);
    EXPECT_DOUBLE_EQ(lr_at_step(s, 10), 1.0);     // cosine starts at max
    EXPECT_NEAR(lr_at_step(s, 60), 0.55, 1e-12);  // halfway: (max + min) / 2
    EXPECT_NEAR(lr_at_step(s, 110), 0.1, 1e-12);
    EXPECT_NEAR(lr_at_step(s, 1000), 0.1, 1e-12);
    EXPECT_GT(lr_at_step(s, 30), lr_at_step(s, 31));  // decreasing
}

TEST(Kernels, AdamWVectorPathIsBitIdenticalToTheScalarLoop) {
    // n = 53: the AVX-512 (16-wide) or AVX2 (8-wide) body plus a scalar tail. The same float operations in the
    // same order (this file compiles without FMA contraction, -std=c++20), so the results must be equal bits.
    const size_t n = 53;
    auto p = random_vector<float>(n, 1), g = random_vector<float>(n, 2);
    std::vector<float> m = random_vector<float>(n, 3, 0.1), v(n);
    for (size_t i = 0; i < n; i++) v[i] = 0.01f * float(i + 1);
    std::vector<float> p_ref = p, m_ref = m, v_ref = v;
    const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, scale = 0.7;
    const long t = 3;
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t, scale);
    const float ib1 = float(1.0 / (1.0 - std::pow(b1, double(t)))), ib2 = float(1.0 / (1.0 - std::pow(b2, double(t))));
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] * float(scale);
        m_ref[i] = float(b1) * m_ref[i] + float(1.0 - b1) * gi;
        v_ref[i] = float(b2) * v_ref[i] + float(1.0 - b2) * gi * gi;
        p_ref[i] -= float(lr) * ((m_ref[i] * ib1) / (std::sqrt(v_ref[i] * ib2) + float(eps)) + float(wd) * p_ref[i]);
    }
    EXPECT_EQ(p, p_ref);
    EXPECT_EQ(m, m_ref);
    EXPECT_EQ(v, v_ref);
}
