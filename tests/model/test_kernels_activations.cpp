// test_kernels_activations.cpp: gelu (and its float tanh), residual, softmax, the MoE gate's top-K and the tied
// cross-entropy of lib/kernels against naive loops and finite differences (kernel_test_helpers.h).
// Run: ./build/tests/test_model --gtest_filter='Kernels*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_test_helpers.h"
#include "kernels/kernels.h"

using namespace prophet;
using namespace prophet::testing;

// ---- gelu, residual, softmax -------------------------------------------------------------------------------

TEST(Kernels, GeluForwardMatchesFormula) {
    const size_t n = 41;
    std::vector<double> x(n);
    for (size_t i = 0; i < n; i++) x[i] = -5.0 + 0.25 * i;  // covers both tails and 0
    std::vector<double> out(n);
    gelu_forward(out.data(), x.data(), n);
    for (size_t i = 0; i < n; i++) {
        const double ref = 0.5 * x[i] * (1 + std::tanh(std::sqrt(2 / M_PI) * (x[i] + 0.044715 * std::pow(x[i], 3))));
        EXPECT_NEAR(out[i], ref, 1e-14) << i;
    }
    // float agrees with double
    const auto x_f = cast<float>(x);
    std::vector<float> out_f(n);
    gelu_forward(out_f.data(), x_f.data(), n);
    expect_close(out_f, out, kTolFloat, "gelu out (float)");
}

TEST(Kernels, GeluBackwardMatchesFiniteDifferences) {
    const size_t n = 41;
    std::vector<double> x(n);
    for (size_t i = 0; i < n; i++) x[i] = -5.0 + 0.25 * i;  // covers both tails and 0
    const auto r = random_vector<double>(n, 1);
    std::vector<double> dinp(n);
    gelu_backward(dinp.data(), x.data(), r.data(), n);
    std::vector<double> numeric(n);
    for (size_t i = 0; i < n; i++) {
        double p, m;
        const double xp = x[i] + kFdStep, xm = x[i] - kFdStep;
        gelu_forward(&p, &xp, 1);
        gelu_forward(&m, &xm, 1);
        numeric[i] = r[i] * (p - m) / (2 * kFdStep);
    }
    expect_fd_close(dinp, numeric, "gelu dinp");
}

TEST(Kernels, FastTanhIsAccurate) {
    // the float path's tanh (kernels.cpp): a few float ulps. 5e-7 abs = ~8 ulps at |tanh| ~ 1, measured 2.7e-7.
    double max_err = 0;
    for (int i = -240000; i <= 240000; i++) {
        const float x = float(i) * 5e-5f;  // [-12, 12], dense near 0
        max_err = std::max(max_err, std::fabs(double(tanh_f32(x)) - std::tanh(double(x))));
    }
    EXPECT_LT(max_err, 5e-7);
    EXPECT_EQ(tanh_f32(100.0f), tanh_f32(7.90531110763549805f));  // clamped, not NaN
    EXPECT_EQ(tanh_f32(0.0f), 0.0f);
}

TEST(Kernels, ResidualAdds) {
    const std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
    std::vector<float> out(3);
    residual_forward(out.data(), a.data(), b.data(), 3);
    EXPECT_EQ(out, (std::vector<float>{11, 22, 33}));
}

TEST(Kernels, SoftmaxForwardMatchesNaive) {
    const int N = 3, E = 5;
    const auto logits = random_vector<double>((size_t)N * E, 1, 3.0);
    std::vector<double> probs(logits.size());
    softmax_forward(probs.data(), logits.data(), N, E);
    for (int n = 0; n < N; n++) {
        double sum = 0;
        for (int e = 0; e < E; e++) sum += std::exp(logits[n * E + e]);
        for (int e = 0; e < E; e++) EXPECT_NEAR(probs[n * E + e], std::exp(logits[n * E + e]) / sum, 1e-15);
    }
}

TEST(Kernels, SoftmaxBackwardMatchesFiniteDifferences) {
    const int N = 3, E = 5;
    const auto logits = random_vector<double>((size_t)N * E, 1, 3.0);
    const auto r = random_vector<double>((size_t)N * E, 2);
    std::vector<double> probs(logits.size()), dlogits(logits.size(), 0.0);
    softmax_forward(probs.data(), logits.data(), N, E);
    softmax_backward(dlogits.data(), r.data(), probs.data(), N, E);
    auto loss = [&](const std::vector<double>& x) {
        std::vector<double> p(x.size());
        softmax_forward(p.data(), x.data(), N, E);
        return dot(p, r);
    };
    expect_fd_close(dlogits, fd_gradient(logits, loss), "softmax dlogits");
}

// ---- MoE gate ----------------------------------------------------------------------------------------------

TEST(Kernels, GateTopKTiesGoToLowerIndex) {
    const int E = 5;
    // row 0: 3 appears at experts 1, 2, 4 -> K=2 picks 1, 2; row 1: all equal -> 0, 1; row 2: strict order
    const std::vector<float> logits = {1, 3, 3, 0, 3, /**/ 2, 2, 2, 2, 2, /**/ 0.5f, -1, 4, 4.5f, 0};
    std::vector<int> idx(3 * 2);
    std::vector<float> w(3 * 2);
    gate_topk_forward(idx.data(), w.data(), logits.data(), 3, E, 2);
    EXPECT_EQ(idx, (std::vector<int>{1, 2, 0, 1, 3, 2}));
    EXPECT_FLOAT_EQ(w[0], 0.5f);  // equal logits: equal weights
    EXPECT_FLOAT_EQ(w[2], 0.5f);
    // K = 3 on row 0: the three tied 3s in index order
    std::vector<int> idx3(3);
    std::vector<float> w3(3);
    gate_topk_forward(idx3.data(), w3.data(), logits.data(), 1, E, 3);
    EXPECT_EQ(idx3, (std::vector<int>{1, 2, 4}));
    // K = E selects everything in descending order, weights = full softmax
    std::vector<int> idx5(5);
    std::vector<float> w5(5);
    gate_topk_forward(idx5.data(), w5.data(), logits.data() + 10, 1, E, 5);
    EXPECT_EQ(idx5, (std::vector<int>{3, 2, 0, 4, 1}));
}

TEST(Kernels, GateSoftmaxOverSelectedMatchesNaive) {
    const int N = 4, E = 6, K = 3;
    const auto logits = random_vector<double>((size_t)N * E, 11, 2.0);  // distinct with probability 1
    std::vector<int> idx((size_t)N * K);
    std::vector<double> w((size_t)N * K);
    gate_topk_forward(idx.data(), w.data(), logits.data(), N, E, K);
    for (int n = 0; n < N; n++) {
        // naive: sort indices by logit descending, softmax over the first K
        std::vector<int> order(E);
        for (int e = 0; e < E; e++) order[e] = e;
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return logits[n * E + a] > logits[n * E + b]; });
        double sum = 0;
        for (int k = 0; k < K; k++) sum += std::exp(logits[n * E + order[k]]);
        for (int k = 0; k < K; k++) {
            EXPECT_EQ(idx[n * K + k], order[k]);
            EXPECT_NEAR(w[n * K + k], std::exp(logits[n * E + order[k]]) / sum, 1e-15);
        }
    }
}

TEST(Kernels, GateSoftmaxOverSelectedBackwardMatchesFiniteDifferences) {
    const int N = 4, E = 6, K = 3;
    const auto logits = random_vector<double>((size_t)N * E, 11, 2.0);  // distinct with probability 1
    const auto r = random_vector<double>((size_t)N * K, 12);
    std::vector<int> idx((size_t)N * K);
    std::vector<double> w((size_t)N * K), dlogits((size_t)N * E, 9.0);
    gate_topk_forward(idx.data(), w.data(), logits.data(), N, E, K);
    gate_topk_backward(dlogits.data(), r.data(), w.data(), idx.data(), N, E, K);
    // perturbations of 1e-6 cannot reorder logits that differ by more than that (checked by the loss itself
    // asserting the same selection)
    auto loss = [&](const std::vector<double>& x) {
        std::vector<int> i2(idx.size());
        std::vector<double> w2(w.size());
        gate_topk_forward(i2.data(), w2.data(), x.data(), N, E, K);
        EXPECT_EQ(i2, idx) << "selection flipped under the finite-difference step";
        return dot(w2, r);
    };
    expect_fd_close(dlogits, fd_gradient(logits, loss), "gate dlogits");
}

// ---- cross-entropy with tied output ------------------------------------------------------------------------

TEST(Kernels, CrossEntropyTiedForwardMatchesNaive) {
    const int N = 5, C = 4, V = 7;
    const double denominator = 12.0;  // a "global" token count larger than N, as on one rank of several
    const auto x = random_vector<double>((size_t)N * C, 1);
    const auto wte = random_vector<double>((size_t)V * C, 2);
    const std::vector<int> targets = {0, 6, 3, 3, 1};
    std::vector<double> probs((size_t)N * V);
    const double loss =
        crossentropy_tied_forward(probs.data(), x.data(), wte.data(), targets.data(), N, C, V, denominator);
    double loss_ref = 0;
    for (int n = 0; n < N; n++) {
        std::vector<double> logits(V);
        double sum = 0;
        for (int v = 0; v < V; v++) {
            for (int c = 0; c < C; c++) logits[v] += x[n * C + c] * wte[v * C + c];
            sum += std::exp(logits[v]);
        }
        loss_ref += -(logits[targets[n]] - std::log(sum));
        for (int v = 0; v < V; v++) EXPECT_NEAR(probs[n * V + v], std::exp(logits[v]) / sum, 1e-14);
    }
    EXPECT_NEAR(loss, loss_ref / denominator, 1e-14);

    // a confident wrong prediction: the loss is large and finite (computed from logits, not log(prob))
    std::vector<float> xf = {100, 0}, wf = {1, 0, -1, 0};  // C = 2, V = 2, logits {100, -100}
    std::vector<float> pf(2);
    const int target = 1;
    EXPECT_NEAR(crossentropy_tied_forward(pf.data(), xf.data(), wf.data(), &target, 1, 2, 2, 1.0), 200.0, 1e-3);
}

TEST(Kernels, CrossEntropyTiedBackwardMatchesFiniteDifferences) {
    const int N = 5, C = 4, V = 7;
    const double denominator = 12.0;  // a "global" token count larger than N, as on one rank of several
    const auto x = random_vector<double>((size_t)N * C, 1);
    const auto wte = random_vector<double>((size_t)V * C, 2);
    const std::vector<int> targets = {0, 6, 3, 3, 1};
    std::vector<double> probs((size_t)N * V);
    crossentropy_tied_forward(probs.data(), x.data(), wte.data(), targets.data(), N, C, V, denominator);
    std::vector<double> dx((size_t)N * C, 3.0), dwte((size_t)V * C, 0.0);
    crossentropy_tied_backward(dx.data(), dwte.data(), probs.data(), x.data(), wte.data(), targets.data(), N, C, V,
                               denominator);
    auto loss_of = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
        std::vector<double> p((size_t)N * V);
        return crossentropy_tied_forward(p.data(), xv.data(), wv.data(), targets.data(), N, C, V, denominator);
    };
    expect_fd_close(dx, fd_gradient(x, [&](const std::vector<double>& v) { return loss_of(v, wte); }), "ce dx");
    expect_fd_close(dwte, fd_gradient(wte, [&](const std::vector<double>& v) { return loss_of(x, v); }), "ce dwte");
}
