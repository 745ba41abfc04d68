// test_kernels_layers.cpp: matmul (and the BLAS under it), embedding, layernorm and attention of lib/kernels against
// naive loops and finite differences (kernel_test_helpers.h), forward and backward, on random inputs.
// Run: ./build/tests/test_model --gtest_filter='Kernels*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_helpers.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"

using namespace prophet;
using namespace prophet::testing;

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
