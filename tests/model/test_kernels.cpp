// test_kernels.cpp: every op of lib/kernels against an independent oracle on random inputs.
//
// Forwards are checked against naive loops written here (in double). Backwards are checked against the naive
// loop where one is short (matmul, embedding, attention) and otherwise against central finite differences of
// the op's own forward in double: loss = sum(out * r) for a random r, so d loss / d out = r is what backward
// gets, and d loss / d x_i is compared with (loss(x_i + h) - loss(x_i - h)) / 2h.
// Run: ./build/tests/test_model --gtest_filter='Kernels*'
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "kernels/optim.h"

using namespace prophet;

namespace {

template <typename Float>
std::vector<Float> random_vector(size_t n, uint64_t seed, double scale = 1.0) {
    Rng rng(seed);
    std::vector<Float> v(n);
    for (auto& x : v) x = Float(scale * rng.normal());
    return v;
}

// Tolerances. double ops vs double naive loops: only summation order differs, errors ~1e-15 relative, so 1e-12
// is a loose bound that still catches any indexing bug (those give O(1) errors). float ops vs double naive:
// float eps is 6e-8 and the sums here are short (<= 64 terms of O(1) values), so 1e-5 abs + rel is ~100x the
// expected error. Finite differences in double with h = 1e-6: truncation ~h^2 * f''' ~ 1e-12, rounding
// ~1e-16 * |loss| / h ~ 1e-9 for loss ~ 10, so 1e-7 abs + 1e-6 rel.
constexpr double kTolDouble = 1e-12;
constexpr double kTolFloat = 1e-5;
constexpr double kFdStep = 1e-6;
constexpr double kTolFdAbs = 1e-7;
constexpr double kTolFdRel = 1e-6;

template <typename A, typename B>
void expect_close(const std::vector<A>& got, const std::vector<B>& want, double tol, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double max_err = 0;
    size_t worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double err = std::fabs(double(got[i]) - double(want[i])) / (1.0 + std::fabs(double(want[i])));
        if (err > max_err) {
            max_err = err;
            worst = i;
        }
    }
    EXPECT_LE(max_err, tol) << what << ": worst at " << worst << " got " << double(got[worst]) << " want "
                            << double(want[worst]);
}

// Finite-difference gradient of loss(x) at x, for the entries of x (all of them: the tests keep x small).
std::vector<double> fd_gradient(std::vector<double> x, const std::function<double(const std::vector<double>&)>& loss) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        const double saved = x[i];
        x[i] = saved + kFdStep;
        const double plus = loss(x);
        x[i] = saved - kFdStep;
        const double minus = loss(x);
        x[i] = saved;
        g[i] = (plus - minus) / (2 * kFdStep);
    }
    return g;
}

void expect_fd_close(const std::vector<double>& analytic, const std::vector<double>& numeric, const char* what) {
    ASSERT_EQ(analytic.size(), numeric.size());
    for (size_t i = 0; i < analytic.size(); i++) {
        EXPECT_NEAR(analytic[i], numeric[i], kTolFdAbs + kTolFdRel * std::fabs(numeric[i])) << what << " [" << i << "]";
    }
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}

template <typename To, typename From>
std::vector<To> cast(const std::vector<From>& v) {
    return std::vector<To>(v.begin(), v.end());
}

}  // namespace

// ---- matmul ------------------------------------------------------------------------------------------------

template <typename Float>
void check_matmul(double tol) {
    const int N = 7, IC = 5, OC = 9;  // odd sizes: no accidental agreement through a symmetric shape
    const auto inp = random_vector<double>((size_t)N * IC, 1);
    const auto w = random_vector<double>((size_t)IC * OC, 2);
    const auto bias = random_vector<double>(OC, 3);
    const auto dout = random_vector<double>((size_t)N * OC, 4);
    // naive
    std::vector<double> out_ref((size_t)N * OC), dinp_ref((size_t)N * IC, 0.0), dw_ref((size_t)IC * OC, 0.0),
        db_ref(OC, 0.0);
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) {
            double s = bias[o];
            for (int i = 0; i < IC; i++) s += inp[n * IC + i] * w[i * OC + o];
            out_ref[n * OC + o] = s;
            db_ref[o] += dout[n * OC + o];
            for (int i = 0; i < IC; i++) {
                dinp_ref[n * IC + i] += dout[n * OC + o] * w[i * OC + o];
                dw_ref[i * OC + o] += inp[n * IC + i] * dout[n * OC + o];
            }
        }
    }
    const auto inp_f = cast<Float>(inp), w_f = cast<Float>(w), b_f = cast<Float>(bias), dout_f = cast<Float>(dout);
    std::vector<Float> out((size_t)N * OC);
    matmul_forward(out.data(), inp_f.data(), w_f.data(), b_f.data(), N, IC, OC);
    expect_close(out, out_ref, tol, "matmul out");
    // without bias
    std::vector<double> out_nobias_ref(out_ref);
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) out_nobias_ref[n * OC + o] -= bias[o];
    }
    matmul_forward(out.data(), inp_f.data(), w_f.data(), (const Float*)nullptr, N, IC, OC);
    expect_close(out, out_nobias_ref, tol, "matmul out (no bias)");
    // backward: grads start at 1 to check they accumulate; dinp overwrites, then accumulates on request
    std::vector<Float> dinp((size_t)N * IC, Float(5)), dw((size_t)IC * OC, Float(1)), db(OC, Float(1));
    matmul_backward(dinp.data(), dw.data(), db.data(), dout_f.data(), inp_f.data(), w_f.data(), N, IC, OC, false);
    auto plus_one = [](std::vector<double> v) {
        for (auto& x : v) x += 1.0;
        return v;
    };
    expect_close(dinp, dinp_ref, tol, "matmul dinp");
    expect_close(dw, plus_one(dw_ref), tol, "matmul dweight (+=)");
    expect_close(db, plus_one(db_ref), tol, "matmul dbias (+=)");
    matmul_backward(dinp.data(), dw.data(), (Float*)nullptr, dout_f.data(), inp_f.data(), w_f.data(), N, IC, OC, true);
    std::vector<double> dinp_twice(dinp_ref);
    for (auto& x : dinp_twice) x *= 2;
    expect_close(dinp, dinp_twice, tol, "matmul dinp (accumulate)");
}

TEST(Kernels, MatmulMatchesTripleLoop) {
    check_matmul<double>(kTolDouble);
    check_matmul<float>(kTolFloat);
}

TEST(Kernels, GemmWithZeroInnerDimensionScalesC) {
    std::vector<float> c = {1, 2, 3, 4};
    gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
    EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
    gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, c.data(), 2);
    EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

// ---- embedding ---------------------------------------------------------------------------------------------

TEST(Kernels, EncoderMatchesNaive) {
    const int B = 2, T = 3, C = 4, V = 5;
    const std::vector<int> tokens = {1, 4, 1, 0, 1, 3};  // token 1 three times: dwte must accumulate
    const auto wte = random_vector<double>((size_t)V * C, 1);
    const auto wpe = random_vector<double>((size_t)T * C, 2);
    const auto dout = random_vector<double>((size_t)B * T * C, 3);
    std::vector<double> out((size_t)B * T * C), dwte((size_t)V * C, 0.0), dwpe((size_t)T * C, 0.0);
    encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
    encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
    std::vector<double> out_ref(out.size()), dwte_ref(dwte.size(), 0.0), dwpe_ref(dwpe.size(), 0.0);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < C; c++) {
                const int i = (b * T + t) * C + c;
                out_ref[i] = wte[tokens[b * T + t] * C + c] + wpe[t * C + c];
                dwte_ref[tokens[b * T + t] * C + c] += dout[i];
                dwpe_ref[t * C + c] += dout[i];
            }
        }
    }
    expect_close(out, out_ref, kTolDouble, "encoder out");
    expect_close(dwte, dwte_ref, kTolDouble, "encoder dwte");
    expect_close(dwpe, dwpe_ref, kTolDouble, "encoder dwpe");
}

// ---- layernorm ---------------------------------------------------------------------------------------------

TEST(Kernels, LayernormForwardMatchesNaive) {
    const int N = 3, C = 6;
    const auto inp = random_vector<double>((size_t)N * C, 1, 2.0);
    const auto w = random_vector<double>(C, 2);
    const auto b = random_vector<double>(C, 3);
    std::vector<double> out((size_t)N * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    std::vector<double> out_ref(out.size());
    for (int n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += inp[n * C + c] / C;
        for (int c = 0; c < C; c++) v += (inp[n * C + c] - m) * (inp[n * C + c] - m) / C;
        for (int c = 0; c < C; c++) out_ref[n * C + c] = (inp[n * C + c] - m) / std::sqrt(v + 1e-5) * w[c] + b[c];
    }
    expect_close(out, out_ref, kTolDouble, "layernorm out");
    // float forward too
    const auto inp_f = cast<float>(inp), w_f = cast<float>(w), b_f = cast<float>(b);
    std::vector<float> out_f(out.size()), mean_f(N), rstd_f(N);
    layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), inp_f.data(), w_f.data(), b_f.data(), N, C);
    expect_close(out_f, out_ref, kTolFloat, "layernorm out (float)");
}

TEST(Kernels, LayernormBackwardMatchesFiniteDifferences) {
    const int N = 3, C = 6;
    const auto inp = random_vector<double>((size_t)N * C, 1, 2.0);
    const auto w = random_vector<double>(C, 2);
    const auto b = random_vector<double>(C, 3);
    const auto r = random_vector<double>((size_t)N * C, 4);
    std::vector<double> out((size_t)N * C), mean(N), rstd(N);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    std::vector<double> dinp(inp.size(), 0.0), dw(C, 0.0), db(C, 0.0);
    layernorm_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), mean.data(), rstd.data(), N,
                       C);
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& wv, const std::vector<double>& bv) {
        std::vector<double> o(x.size()), m(N), s(N);
        layernorm_forward(o.data(), m.data(), s.data(), x.data(), wv.data(), bv.data(), N, C);
        return dot(o, r);
    };
    expect_fd_close(dinp, fd_gradient(inp, [&](const std::vector<double>& x) { return loss(x, w, b); }), "ln dinp");
    expect_fd_close(dw, fd_gradient(w, [&](const std::vector<double>& x) { return loss(inp, x, b); }), "ln dweight");
    expect_fd_close(db, fd_gradient(b, [&](const std::vector<double>& x) { return loss(inp, w, x); }), "ln dbias");
}

// ---- attention ---------------------------------------------------------------------------------------------

namespace {

// llm.c's CPU attention, a loop per (b, t, h): the naive oracle for both directions.
void attention_naive(std::vector<double>& out, std::vector<double>& att, const std::vector<double>& qkv, int B, int T,
                     int C, int NH) {
    const int hs = C / NH;
    const double scale = 1.0 / std::sqrt(double(hs));
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
                double* a = &att[((b * NH + h) * T + t) * T];
                double maxval = -1e300;
                for (int j = 0; j <= t; j++) {
                    const double* k = &qkv[(b * T + j) * 3 * C + C + h * hs];
                    double s = 0;
                    for (int i = 0; i < hs; i++) s += q[i] * k[i];
                    a[j] = s * scale;
                    maxval = std::max(maxval, a[j]);
                }
                double sum = 0;
                for (int j = 0; j <= t; j++) {
                    a[j] = std::exp(a[j] - maxval);
                    sum += a[j];
                }
                for (int j = 0; j < T; j++) a[j] = j <= t ? a[j] / sum : 0.0;
                double* o = &out[(b * T + t) * C + h * hs];
                for (int i = 0; i < hs; i++) o[i] = 0;
                for (int j = 0; j <= t; j++) {
                    const double* v = &qkv[(b * T + j) * 3 * C + 2 * C + h * hs];
                    for (int i = 0; i < hs; i++) o[i] += a[j] * v[i];
                }
            }
        }
    }
}

void attention_backward_naive(std::vector<double>& dqkv, const std::vector<double>& dout,
                              const std::vector<double>& qkv, const std::vector<double>& att, int B, int T, int C,
                              int NH) {
    const int hs = C / NH;
    const double scale = 1.0 / std::sqrt(double(hs));
    std::fill(dqkv.begin(), dqkv.end(), 0.0);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                const double* a = &att[((b * NH + h) * T + t) * T];
                const double* dy = &dout[(b * T + t) * C + h * hs];
                std::vector<double> da(T, 0.0), ds(T, 0.0);
                for (int j = 0; j <= t; j++) {
                    const double* v = &qkv[(b * T + j) * 3 * C + 2 * C + h * hs];
                    double* dv = &dqkv[(b * T + j) * 3 * C + 2 * C + h * hs];
                    for (int i = 0; i < hs; i++) {
                        da[j] += v[i] * dy[i];
                        dv[i] += a[j] * dy[i];
                    }
                }
                for (int j = 0; j <= t; j++) {
                    for (int j2 = 0; j2 <= t; j2++) ds[j2] += a[j] * ((j == j2 ? 1.0 : 0.0) - a[j2]) * da[j];
                }
                const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
                double* dq = &dqkv[(b * T + t) * 3 * C + h * hs];
                for (int j = 0; j <= t; j++) {
                    const double* k = &qkv[(b * T + j) * 3 * C + C + h * hs];
                    double* dk = &dqkv[(b * T + j) * 3 * C + C + h * hs];
                    for (int i = 0; i < hs; i++) {
                        dq[i] += k[i] * ds[j] * scale;
                        dk[i] += q[i] * ds[j] * scale;
                    }
                }
            }
        }
    }
}

}  // namespace

template <typename Float>
void check_attention(double tol) {
    const int B = 2, T = 5, C = 8, NH = 2;
    const auto qkv = random_vector<double>((size_t)B * T * 3 * C, 1);
    const auto dout = random_vector<double>((size_t)B * T * C, 2);
    std::vector<double> out_ref((size_t)B * T * C), att_ref((size_t)B * NH * T * T), dqkv_ref(qkv.size());
    attention_naive(out_ref, att_ref, qkv, B, T, C, NH);
    attention_backward_naive(dqkv_ref, dout, qkv, att_ref, B, T, C, NH);

    const auto qkv_f = cast<Float>(qkv), dout_f = cast<Float>(dout);
    std::vector<Float> out(out_ref.size()), att(att_ref.size()), dqkv(qkv.size(), Float(7)), scratch((size_t)T * T);
    attention_forward(out.data(), att.data(), qkv_f.data(), B, T, C, NH);
    attention_backward(dqkv.data(), scratch.data(), dout_f.data(), qkv_f.data(), att.data(), B, T, C, NH);
    expect_close(out, out_ref, tol, "attention out");
    expect_close(att, att_ref, tol, "attention att (zero above the diagonal)");
    expect_close(dqkv, dqkv_ref, tol, "attention dqkv");
}

TEST(Kernels, AttentionMatchesNaive) {
    check_attention<double>(kTolDouble);
    check_attention<float>(kTolFloat);
}

TEST(Kernels, AttentionBackwardMatchesFiniteDifferences) {
    // the naive backward above is itself hand-written; finite differences check it independently
    const int B = 1, T = 4, C = 4, NH = 2;
    const auto qkv = random_vector<double>((size_t)B * T * 3 * C, 5);
    const auto r = random_vector<double>((size_t)B * T * C, 6);
    std::vector<double> out((size_t)B * T * C), att((size_t)B * NH * T * T), dqkv(qkv.size()), scratch(T * T);
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    attention_backward(dqkv.data(), scratch.data(), r.data(), qkv.data(), att.data(), B, T, C, NH);
    auto loss = [&](const std::vector<double>& x) {
        std::vector<double> o(out.size()), a(att.size());
        attention_forward(o.data(), a.data(), x.data(), B, T, C, NH);
        return dot(o, r);
    };
    expect_fd_close(dqkv, fd_gradient(qkv, loss), "attention dqkv");
}

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
    const double loss = crossentropy_tied_forward(probs.data(), x.data(), wte.data(), targets.data(), N, C, V,
                                                  denominator);
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
    EXPECT_DOUBLE_EQ(grad_clip_scale(13.0, 0.0), 1.0);   // disabled
    EXPECT_DOUBLE_EQ(grad_clip_scale(0.5, 1.0), 1.0);    // below the limit
    EXPECT_NEAR(grad_clip_scale(13.0, 1.0), 1.0 / 13.0, 1e-8);
}

TEST(Kernels, LrScheduleWarmupThenCosine) {
    LrSchedule s;
    s.max_lr = 1.0;
    s.min_lr = 0.1;
    s.warmup_steps = 10;
    s.total_steps = 110;
    EXPECT_DOUBLE_EQ(lr_at_step(s, 0), 0.1);   // (0+1)/10
    EXPECT_DOUBLE_EQ(lr_at_step(s, 4), 0.5);
    EXPECT_DOUBLE_EQ(lr_at_step(s, 9), 1.0);
    EXPECT_DOUBLE_EQ(lr_at_step(s, 10), 1.0);  // cosine starts at max
    EXPECT_NEAR(lr_at_step(s, 60), 0.55, 1e-12);  // halfway: (max + min) / 2
    EXPECT_NEAR(lr_at_step(s, 110), 0.1, 1e-12);
    EXPECT_NEAR(lr_at_step(s, 1000), 0.1, 1e-12);
    EXPECT_GT(lr_at_step(s, 30), lr_at_step(s, 31));  // decreasing
}

// ---- BLAS choice -------------------------------------------------------------------------------------------

TEST(Kernels, BlasCoreChoiceNeverExceedsTheCpu) {
    CpuFeatures none, avx2, avx512, bf16;
    avx2.avx2_fma = true;
    avx512.avx2_fma = avx512.avx512 = true;
    bf16.avx2_fma = bf16.avx512 = bf16.avx512_bf16 = true;
    // the case PERFORMANCE.md describes: AVX-512 CPU detected as Prescott
    EXPECT_STREQ(blas_choose_coretype("Prescott", avx512), "SkylakeX");
    EXPECT_STREQ(blas_choose_coretype("Prescott", bf16), "Cooperlake");
    EXPECT_STREQ(blas_choose_coretype("Haswell", avx512), "SkylakeX");
    EXPECT_STREQ(blas_choose_coretype("Prescott", avx2), "Haswell");
    // already good, or nothing better available: keep
    EXPECT_EQ(blas_choose_coretype("Cooperlake", bf16), nullptr);
    EXPECT_EQ(blas_choose_coretype("SKYLAKEX", avx512), nullptr);
    EXPECT_EQ(blas_choose_coretype("Zen", avx2), nullptr);
    EXPECT_EQ(blas_choose_coretype("Prescott", none), nullptr);
    EXPECT_EQ(blas_choose_coretype("Nehalem", none), nullptr);
    // never a core above the CPU
    EXPECT_EQ(blas_core_tier(blas_choose_coretype("Prescott", avx2)), 1);

    const std::string config = blas_config();
    EXPECT_NE(config.find("OpenBLAS"), std::string::npos) << config;
    EXPECT_NE(config.find("; core "), std::string::npos) << config;
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
