// test_model.cpp: the MoE-GPT as a whole: names and layout, init, loss at init, learning, determinism, the
// LocalMoeExecutor against a token-at-a-time oracle, gradient accumulation, the optimizer's skip mask, routing
// statistics and capacity drops, and the executor hook.
// Run: ./build/tests/test_model --gtest_filter='Model*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/optim.h"
#include "model/moe_gpt.h"

using namespace prophet;

namespace {

ModelConfig small_config() {
    ModelConfig cfg;
    cfg.V = 64;
    cfg.T = 16;
    cfg.C = 32;
    cfg.NH = 4;
    cfg.L = 2;
    cfg.E = 4;
    cfg.K = 2;
    cfg.B = 4;
    cfg.seed = 1234;
    return cfg;
}

struct Batch {
    std::vector<int> inputs, targets;  // [B,T]
};

Batch random_batch(const ModelConfig& cfg, uint64_t seed) {
    Rng rng(seed);
    Batch batch;
    for (int i = 0; i < cfg.B * cfg.T; i++) {
        batch.inputs.push_back((int)rng.below(cfg.V));
        batch.targets.push_back((int)rng.below(cfg.V));
    }
    return batch;
}

template <typename Float>
double train_step(Model<Float>& model, const Batch& batch, double lr) {
    const ModelConfig& cfg = model.config;
    model_zero_grad(model);
    const double loss = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, double(cfg.B) * cfg.T);
    model_backward(model);
    const double scale = grad_clip_scale(std::sqrt(grad_norm_sq(model)), 1.0);
    AdamWConfig adamw;
    adamw.weight_decay = 0.0;  // overfitting check: nothing pulls the weights back
    adamw_step(model, lr, adamw, scale);
    return loss;
}

}  // namespace

// ---- parameters --------------------------------------------------------------------------------------------

TEST(Model, ParameterShapesFollowTheConfig) {
    ModelConfig cfg = small_config();
    Model<float> model(cfg);
    const int C = cfg.C, F = 2 * cfg.C, E = cfg.E;
    EXPECT_EQ(model.config.F, F);  // F defaults to 2C
    auto shape_of = [&](const char* name) {
        const int i = model.find_tensor(name);
        EXPECT_GE(i, 0) << name;
        return i >= 0 ? model.tensor(i).shape : std::vector<int>{};
    };
    EXPECT_EQ(shape_of("wte"), (std::vector<int>{cfg.V, C}));
    EXPECT_EQ(shape_of("wpe"), (std::vector<int>{cfg.T, C}));
    EXPECT_EQ(shape_of("h.1.ln1.w"), (std::vector<int>{C}));
    EXPECT_EQ(shape_of("h.1.ln1.b"), (std::vector<int>{C}));
    EXPECT_EQ(shape_of("h.0.attn.qkv.w"), (std::vector<int>{C, 3 * C}));
    EXPECT_EQ(shape_of("h.0.attn.qkv.b"), (std::vector<int>{3 * C}));
    EXPECT_EQ(shape_of("h.0.attn.proj.w"), (std::vector<int>{C, C}));
    EXPECT_EQ(shape_of("h.0.attn.proj.b"), (std::vector<int>{C}));
    EXPECT_EQ(shape_of("h.1.ln2.w"), (std::vector<int>{C}));
    EXPECT_EQ(shape_of("h.1.ln2.b"), (std::vector<int>{C}));
    EXPECT_EQ(shape_of("h.1.moe.gate.w"), (std::vector<int>{C, E}));
    EXPECT_EQ(shape_of("h.1.moe.experts.3.w1"), (std::vector<int>{C, F}));
    EXPECT_EQ(shape_of("h.1.moe.experts.3.w2"), (std::vector<int>{F, C}));
    EXPECT_EQ(shape_of("ln_f.w"), (std::vector<int>{C}));
    EXPECT_EQ(shape_of("ln_f.b"), (std::vector<int>{C}));
    EXPECT_EQ(model.num_tensors(), 2 + 9 * cfg.L + 2 + 2 * cfg.L * E);
}

TEST(Model, ParameterLayoutIsContiguousDenseFirst) {
    ModelConfig cfg = small_config();
    Model<float> model(cfg);
    const int C = cfg.C, F = 2 * cfg.C, E = cfg.E;
    // contiguous, non-overlapping, dense tensors before expert tensors
    size_t offset = 0;
    bool seen_expert = false;
    for (const ParamTensor& t : model.layout.tensors) {
        EXPECT_EQ(t.offset, offset) << t.name;
        offset += t.size;
        if (t.is_expert) seen_expert = true;
        EXPECT_FALSE(seen_expert && !t.is_expert) << t.name << ": dense tensor after an expert tensor";
        EXPECT_EQ(t.is_matrix, t.shape.size() == 2) << t.name;
    }
    EXPECT_EQ(offset, model.layout.num_params);
    const size_t expert_params = (size_t)cfg.L * E * 2 * C * F;
    EXPECT_EQ(model.layout.num_dense_params, model.layout.num_params - expert_params);
    EXPECT_EQ(model_dense_grads(model).size, model.layout.num_dense_params);
    const Span<float> ex = model_expert_params(model, 1, 2);
    EXPECT_EQ(ex.data, model.param(model.find_tensor("h.1.moe.experts.2.w1")));
    EXPECT_EQ(ex.data + C * F, model.param(model.find_tensor("h.1.moe.experts.2.w2")));
    EXPECT_EQ(ex.size, (size_t)2 * C * F);
}

TEST(Model, InitIsGpt2Style) {
    ModelConfig cfg = small_config();
    cfg.C = 64;  // more samples for the std estimates
    Model<float> model(cfg);
    auto stats = [&](const char* name) {
        const ParamTensor& t = model.tensor(model.find_tensor(name));
        const float* p = model.params.data() + t.offset;
        double mean = 0, sq = 0;
        for (size_t i = 0; i < t.size; i++) {
            mean += p[i];
            sq += double(p[i]) * p[i];
        }
        mean /= t.size;
        return std::pair<double, double>{mean, std::sqrt(sq / t.size - mean * mean)};
    };
    // std estimates over >= 4096 samples: relative standard error ~1.1%, so 10% bands cannot fail by chance
    EXPECT_NEAR(stats("wte").second, 0.02, 0.002);
    EXPECT_NEAR(stats("h.0.attn.qkv.w").second, 0.02, 0.002);
    EXPECT_NEAR(stats("h.0.moe.experts.0.w1").second, 0.02, 0.002);
    const double residual_std = 0.02 / std::sqrt(2.0 * cfg.L);
    EXPECT_NEAR(stats("h.1.attn.proj.w").second, residual_std, 0.1 * residual_std);
    EXPECT_NEAR(stats("h.1.moe.experts.3.w2").second, residual_std, 0.1 * residual_std);
    EXPECT_EQ(stats("h.0.ln1.w"), (std::pair<double, double>{1.0, 0.0}));
    EXPECT_EQ(stats("h.0.attn.qkv.b"), (std::pair<double, double>{0.0, 0.0}));
    EXPECT_EQ(stats("ln_f.b"), (std::pair<double, double>{0.0, 0.0}));
}

TEST(Model, InitIsSeeded) {
    ModelConfig cfg = small_config();
    cfg.C = 64;
    Model<float> model(cfg);
    // same seed, same bits; another seed, other values; float holds double's values rounded
    Model<float> same(cfg);
    EXPECT_EQ(std::memcmp(same.params.data(), model.params.data(), model.params.size() * sizeof(float)), 0);
    cfg.seed += 1;
    Model<float> other(cfg);
    EXPECT_NE(other.params[0], model.params[0]);
    cfg.seed -= 1;
    Model<double> model_d(cfg);
    for (size_t i = 0; i < model.params.size(); i += 97) EXPECT_EQ(model.params[i], float(model_d.params[i]));
}

TEST(Model, InvalidConfigIsAConfigError) {
    ModelConfig cfg = small_config();
    cfg.NH = 5;  // does not divide C = 32
    try {
        Model<float> model(cfg);
        FAIL() << "expected a config error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("model.NH"), std::string::npos) << e.what();
    }
    cfg = small_config();
    cfg.K = cfg.E + 1;
    EXPECT_THROW(Model<float>{cfg}, Error);
}

// ---- loss and learning -------------------------------------------------------------------------------------

TEST(Model, LossAtInitIsLogV) {
    // at init the logits are ~0.02*sqrt(C)-sized, so the predicted distribution is close to uniform: loss ~ ln V
    // + var(logits)/2 ~ ln V + 0.01. 0.1 is the brief's band.
    ModelConfig cfg = small_config();
    Model<float> model(cfg);
    const Batch batch = random_batch(cfg, 1);
    const double loss = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    EXPECT_NEAR(loss, std::log(double(cfg.V)), 0.1);
}

TEST(Model, ThirtyAdamWStepsOverfitAFixedBatch) {
    // random targets: the only way down is memorising 64 (input, position) -> target pairs. Measured: ln 64 = 4.16
    // at step 0, ~0.3 after 30 steps at lr 1e-2; the bound (below 40% of the start) leaves a wide margin while a
    // broken backward or optimizer (loss flat or rising) cannot meet it.
    ModelConfig cfg = small_config();
    Model<float> model(cfg);
    const Batch batch = random_batch(cfg, 2);
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        last = train_step(model, batch, 1e-2);
        if (step == 0) first = last;
        ASSERT_TRUE(std::isfinite(last)) << "step " << step;
    }
    const double final_loss = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    std::printf("  overfit: loss %.4f -> %.4f (after step 29: %.4f)\n", first, final_loss, last);
    EXPECT_LT(final_loss, 0.4 * first);
}

TEST(Model, SameSeedGivesBitIdenticalLosses) {
    ModelConfig cfg = small_config();
    cfg.aux_loss_coef = 0.01;
    const Batch batch = random_batch(cfg, 3);
    std::vector<double> losses[2];
    for (int run = 0; run < 2; run++) {
        Model<float> model(cfg);
        for (int step = 0; step < 5; step++) losses[run].push_back(train_step(model, batch, 3e-3));
    }
    for (int step = 0; step < 5; step++) {
        EXPECT_EQ(std::memcmp(&losses[0][step], &losses[1][step], sizeof(double)), 0)
            << "step " << step << ": " << losses[0][step] << " vs " << losses[1][step];
    }
    EXPECT_NE(losses[0][0], losses[0][4]);  // it did train
}

TEST(Model, BackwardAccumulatesIntoGrads) {
    // two forward+backward passes without zeroing = 2x one pass (the micro-batch accumulation contract, which
    // also covers the executor's += into expert gradients)
    ModelConfig cfg = small_config();
    Model<double> model(cfg);
    const Batch batch = random_batch(cfg, 4);
    model_zero_grad(model);
    model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    model_backward(model);
    const std::vector<double> once = model.grads;
    model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    model_backward(model);
    for (size_t i = 0; i < once.size(); i++) {
        ASSERT_NEAR(model.grads[i], 2 * once[i], 1e-12 + 1e-12 * std::fabs(once[i])) << i;
    }
}

TEST(Model, LossSplitsAcrossRanksByTheGlobalDenominator) {
    // two "ranks" with half the batch each and the global denominator: losses and dense gradients sum to the
    // full batch's (what data parallelism relies on). double, so only summation order differs: 1e-12.
    ModelConfig cfg = small_config();
    const Batch batch = random_batch(cfg, 5);
    const int half = cfg.B / 2 * cfg.T;
    const double denominator = cfg.B * cfg.T;
    Model<double> full(cfg), rank0(cfg), rank1(cfg);
    model_zero_grad(full);
    const double loss_full = model_forward(full, batch.inputs.data(), batch.targets.data(), cfg.B, denominator);
    model_backward(full);
    model_zero_grad(rank0);
    model_zero_grad(rank1);
    const double loss0 = model_forward(rank0, batch.inputs.data(), batch.targets.data(), cfg.B / 2, denominator);
    model_backward(rank0);
    const double loss1 =
        model_forward(rank1, batch.inputs.data() + half, batch.targets.data() + half, cfg.B / 2, denominator);
    model_backward(rank1);
    EXPECT_NEAR(loss0 + loss1, loss_full, 1e-12);
    for (size_t i = 0; i < full.grads.size(); i++) {
        ASSERT_NEAR(rank0.grads[i] + rank1.grads[i], full.grads[i], 1e-12) << i;
    }
}

// ---- optimizer ---------------------------------------------------------------------------------------------

TEST(Model, AdamWSkipMaskLeavesSkippedTensorsAlone) {
    ModelConfig cfg = small_config();
    Model<float> model(cfg);
    const Batch batch = random_batch(cfg, 6);
    model_zero_grad(model);
    model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    model_backward(model);
    const std::vector<float> before = model.params;
    std::vector<char> skip(model.num_tensors(), 0);
    for (int i = 0; i < model.num_tensors(); i++) skip[i] = model.tensor(i).is_expert && model.tensor(i).expert != 1;
    AdamWConfig adamw;
    adamw_step(model, 1e-3, adamw, 1.0, &skip);
    for (int i = 0; i < model.num_tensors(); i++) {
        const ParamTensor& t = model.tensor(i);
        const bool unchanged = std::memcmp(before.data() + t.offset, model.params.data() + t.offset,
                                           t.size * sizeof(float)) == 0;
        EXPECT_EQ(unchanged, bool(skip[i])) << t.name;
    }
    // the grad norm with an include mask is the sum of the parts
    std::vector<char> experts(model.num_tensors()), dense(model.num_tensors());
    for (int i = 0; i < model.num_tensors(); i++) {
        experts[i] = model.tensor(i).is_expert;
        dense[i] = !experts[i];
    }
    EXPECT_NEAR(grad_norm_sq(model), grad_norm_sq(model, &experts) + grad_norm_sq(model, &dense),
                1e-12 * grad_norm_sq(model));
}

// ---- routing -----------------------------------------------------------------------------------------------

TEST(Model, RoutingCountsEveryAssignmentOnce) {
    ModelConfig cfg = small_config();
    const Batch batch = random_batch(cfg, 7);
    const int N = cfg.B * cfg.T;
    Model<float> dropless(cfg);
    model_forward(dropless, batch.inputs.data(), batch.targets.data(), cfg.B, N);
    for (int l = 0; l < cfg.L; l++) {
        int64_t total = 0;
        for (int e = 0; e < cfg.E; e++) total += dropless.routing_counts[l * cfg.E + e];
        EXPECT_EQ(total, (int64_t)N * cfg.K) << "each of the K assignments counts once";
        EXPECT_EQ(dropless.num_dropped[l], 0);
    }
}

TEST(Model, CapacityDropsTheOverflow) {
    ModelConfig cfg = small_config();
    const Batch batch = random_batch(cfg, 7);
    const int N = cfg.B * cfg.T;
    cfg.capacity_factor = 0.5;  // capacity = ceil(0.5 * N*K/E): at least half of all assignments must drop
    Model<float> capped(cfg);
    const double loss = model_forward(capped, batch.inputs.data(), batch.targets.data(), cfg.B, N);
    EXPECT_TRUE(std::isfinite(loss));
    const int64_t capacity = (int64_t)std::ceil(0.5 * N * cfg.K / cfg.E);
    for (int l = 0; l < cfg.L; l++) {
        int64_t expected_dropped = 0;
        std::vector<int64_t> kept(cfg.E, 0);
        for (int e = 0; e < cfg.E; e++) {
            expected_dropped += std::max<int64_t>(0, capped.routing_counts[l * cfg.E + e] - capacity);
        }
        EXPECT_EQ(capped.num_dropped[l], expected_dropped);
        const int* dispatch = capped.acts.dispatch_idx + (size_t)l * N * cfg.K;
        for (int i = 0; i < N * cfg.K; i++) {
            if (dispatch[i] >= 0) kept[dispatch[i]]++;
        }
        for (int e = 0; e < cfg.E; e++) EXPECT_LE(kept[e], capacity);
    }
}

// ---- the expert executor -----------------------------------------------------------------------------------

namespace {

// The oracle: every (token, k) through its expert one token at a time, in double, with plain loops.
struct TokenOracle {
    int C, F, K;
    const std::vector<std::vector<double>>& w1;  // [E][C*F]
    const std::vector<std::vector<double>>& w2;  // [E][F*C]

    static double gelu(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
    static double gelu_grad(double x) {
        const double t = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
    }
    // y = expert_e(x); also returns pre-activations
    void expert(int e, const double* x, std::vector<double>& pre, std::vector<double>& y) const {
        pre.assign(F, 0.0);
        y.assign(C, 0.0);
        for (int f = 0; f < F; f++) {
            for (int c = 0; c < C; c++) pre[f] += x[c] * w1[e][c * F + f];
        }
        for (int c = 0; c < C; c++) {
            for (int f = 0; f < F; f++) y[c] += gelu(pre[f]) * w2[e][f * C + c];
        }
    }
};

}  // namespace

TEST(Model, LocalExecutorMatchesTokenAtATimeOracle) {
    // float executor vs double oracle on the same (float-representable) values, forward and backward, with some
    // assignments dropped (-1). Tolerance 1e-5 abs + rel: float sums of C=16 / F=32 terms of O(0.1-1) values
    // have errors ~1e-6.
    const int L = 1, E = 4, K = 2, C = 16, F = 32, N = 24;
    Rng rng(11);
    auto rnd = [&](size_t n, double scale) {
        std::vector<double> v(n);
        for (auto& x : v) x = double(float(scale * rng.normal()));
        return v;
    };
    std::vector<std::vector<double>> w1(E), w2(E);
    for (int e = 0; e < E; e++) {
        w1[e] = rnd((size_t)C * F, 0.3);
        w2[e] = rnd((size_t)F * C, 0.3);
    }
    const auto h = rnd((size_t)N * C, 1.0);
    const auto dout = rnd((size_t)N * C, 1.0);
    std::vector<int> expert_idx((size_t)N * K);
    std::vector<double> gate_w((size_t)N * K);
    for (int n = 0; n < N; n++) {
        const int e0 = (int)rng.below(E);
        const int e1 = (e0 + 1 + (int)rng.below(E - 1)) % E;  // distinct from e0
        expert_idx[n * K] = e0;
        expert_idx[n * K + 1] = n % 5 == 0 ? -1 : e1;  // every 5th token lost its second choice
        gate_w[n * K] = double(float(0.3 + 0.4 * rng.uniform()));
        gate_w[n * K + 1] = 1.0 - gate_w[n * K];
    }
    // oracle
    TokenOracle oracle{C, F, K, w1, w2};
    std::vector<double> out_ref((size_t)N * C, 0.0), dh_ref((size_t)N * C, 0.0), dgate_ref((size_t)N * K, 0.0);
    std::vector<std::vector<double>> dw1_ref(E, std::vector<double>((size_t)C * F, 0.0)),
        dw2_ref(E, std::vector<double>((size_t)F * C, 0.0));
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) {
            const int e = expert_idx[n * K + k];
            if (e < 0) continue;
            std::vector<double> pre, y;
            oracle.expert(e, &h[n * C], pre, y);
            const double w = gate_w[n * K + k];
            for (int c = 0; c < C; c++) {
                out_ref[n * C + c] += w * y[c];
                dgate_ref[n * K + k] += dout[n * C + c] * y[c];
            }
            std::vector<double> dpre(F, 0.0);
            for (int f = 0; f < F; f++) {
                for (int c = 0; c < C; c++) {
                    dw2_ref[e][f * C + c] += TokenOracle::gelu(pre[f]) * w * dout[n * C + c];
                    dpre[f] += w2[e][f * C + c] * w * dout[n * C + c];
                }
                dpre[f] *= TokenOracle::gelu_grad(pre[f]);
            }
            for (int c = 0; c < C; c++) {
                for (int f = 0; f < F; f++) {
                    dw1_ref[e][c * F + f] += h[n * C + c] * dpre[f];
                    dh_ref[n * C + c] += w1[e][c * F + f] * dpre[f];
                }
            }
        }
    }
    // executor under test
    std::vector<std::vector<float>> w1f(E), w2f(E), dw1f(E), dw2f(E);
    std::vector<ExpertWeights<float>> weights(E);
    for (int e = 0; e < E; e++) {
        w1f[e].assign(w1[e].begin(), w1[e].end());
        w2f[e].assign(w2[e].begin(), w2[e].end());
        dw1f[e].assign((size_t)C * F, 1.0f);  // start at 1: the executor must accumulate
        dw2f[e].assign((size_t)F * C, 1.0f);
        weights[e] = {w1f[e].data(), w2f[e].data(), dw1f[e].data(), dw2f[e].data()};
    }
    LocalMoeExecutor<float> executor(L, E, K, C, F, weights);
    const std::vector<float> hf(h.begin(), h.end()), doutf(dout.begin(), dout.end()), gwf(gate_w.begin(), gate_w.end());
    std::vector<float> out((size_t)N * C, 123.0f), dh((size_t)N * C, 123.0f), dgate((size_t)N * K, 123.0f);
    executor.forward(0, N, hf.data(), expert_idx.data(), gwf.data(), out.data());
    executor.backward(0, N, doutf.data(), dh.data(), dgate.data());

    auto check = [](const std::vector<float>& got, const std::vector<double>& want, double offset, const char* what) {
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); i++) {
            ASSERT_NEAR(got[i] - offset, want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << what << "[" << i << "]";
        }
    };
    check(out, out_ref, 0.0, "out");
    check(dh, dh_ref, 0.0, "dh");
    check(dgate, dgate_ref, 0.0, "dgate_w");
    for (int e = 0; e < E; e++) {
        check(dw1f[e], dw1_ref[e], 1.0, "dw1");
        check(dw2f[e], dw2_ref[e], 1.0, "dw2");
    }
    for (int n = 0; n < N; n += 5) EXPECT_EQ(dgate[n * K + 1], 0.0f) << "dropped assignment";
}

namespace {

// Delegates to another executor and counts the calls: stands in for the distributed one.
template <typename Float>
struct CountingExecutor : MoeExecutor<Float> {
    MoeExecutor<Float>* inner;
    int forwards = 0, backwards = 0;
    explicit CountingExecutor(MoeExecutor<Float>* e) : inner(e) {}
    void forward(int l, int N, const Float* h, const int* idx, const Float* w, Float* out) override {
        forwards++;
        inner->forward(l, N, h, idx, w, out);
    }
    void backward(int l, int N, const Float* dout, Float* dh, Float* dw) override {
        backwards++;
        inner->backward(l, N, dout, dh, dw);
    }
    const char* name() const override { return "counting"; }
};

}  // namespace

TEST(Model, ExecutorHookRunsEveryLayerWithoutChangingTheLoss) {
    ModelConfig cfg = small_config();
    const Batch batch = random_batch(cfg, 8);
    Model<float> model(cfg);
    const double reference = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    CountingExecutor<float> counting(model.local_executor.get());
    model_set_executor(model, &counting);
    model_zero_grad(model);
    const double loss = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    model_backward(model);
    EXPECT_EQ(loss, reference);
    EXPECT_EQ(counting.forwards, cfg.L);
    EXPECT_EQ(counting.backwards, cfg.L);
    model_set_executor<float>(model, nullptr);
    EXPECT_EQ(model.executor, model.local_executor.get());
}
