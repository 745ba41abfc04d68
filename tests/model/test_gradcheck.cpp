// test_gradcheck.cpp: the whole model's analytic gradients against central finite differences, in float64.
//
// Tiny model (V=24 T=6 C=12 NH=2 L=2 E=4 K=2 B=2), every parameter tensor, a few sampled entries each. Parameters
// are re-drawn at a larger scale than the GPT-2 init (std 0.3 for weights, LayerNorm weights 1 +- 0.3, non-zero
// biases) so that every gradient, the gate's included, is far above the finite-difference noise floor and the
// network is non-linear enough for an indexing bug to show.
//
// Top-K selection is piecewise constant: the loss is smooth only while no perturbation flips a selection. The
// test asserts that the smallest logit margin at the selection boundary exceeds 1e-3 (a step of 1e-5 moves a
// logit by ~1e-5 * |h| ~ 1e-5) and that the selection of every layer is unchanged after every perturbation.
// Run: ./build/tests/test_model --gtest_filter='GradCheck*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "model/moe_gpt.h"

using namespace prophet;

namespace {

ModelConfig tiny_config() {
    ModelConfig cfg;
    cfg.V = 24;
    cfg.T = 6;
    cfg.C = 12;
    cfg.NH = 2;
    cfg.L = 2;
    cfg.E = 4;
    cfg.K = 2;
    cfg.B = 2;
    cfg.seed = 7;
    return cfg;
}

template <typename Float>
void rescale_params(Model<Float>& model, uint64_t seed) {
    Rng rng(seed);
    for (const ParamTensor& t : model.layout.tensors) {
        Float* p = model.params.data() + t.offset;
        const bool is_ln_weight = t.name.ends_with("ln1.w") || t.name.ends_with("ln2.w") || t.name == "ln_f.w";
        for (size_t i = 0; i < t.size; i++) p[i] = Float((is_ln_weight ? 1.0 : 0.0) + 0.3 * rng.normal());
    }
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

// The smallest gap, over layers and tokens, between the K-th selected logit and the best unselected one.
double min_selection_margin(const Model<double>& model) {
    const ModelConfig& cfg = model.config;
    const int N = model.acts.B * cfg.T;
    double margin = 1e300;
    for (int l = 0; l < cfg.L; l++) {
        for (int n = 0; n < N; n++) {
            const double* logits = model.acts.gate_logits + ((size_t)l * N + n) * cfg.E;  // [E]
            const int* idx = model.acts.expert_idx + ((size_t)l * N + n) * cfg.K;         // [K]
            const double kth = logits[idx[cfg.K - 1]];
            for (int e = 0; e < cfg.E; e++) {
                if (std::find(idx, idx + cfg.K, e) == idx + cfg.K) margin = std::min(margin, kth - logits[e]);
            }
        }
    }
    return margin;
}

// Tolerance: |analytic - numeric| <= 1e-6 * |numeric| + 1e-9.
// The relative part is the brief's bound. Why it holds: with h = 1e-5, truncation is h^2/6 * f''' ~ 2e-11 * f'''
// and rounding is ~1e-16 * |loss| / h ~ 3e-11 (loss ~ 3); measured |analytic - numeric| is 1e-11..6e-11 on every
// entry. That is far below 1e-6 relative for gradients >= 1e-4 (most sampled entries; measured worst 1e-7 there),
// but not for the few tiny ones (the key bias's gradient is exactly 0: softmax ignores a shift shared by all
// keys). The 1e-9 absolute floor is the measured noise with >10x margin, so near-zero entries cannot fail on
// noise alone, while a wrong gradient (errors of the gradient's own size, >= 1e-5 here) still fails.
constexpr double kStep = 1e-5;
constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-9;

void run_gradcheck(const ModelConfig& cfg, int samples_per_tensor) {
    Model<double> model(cfg);
    rescale_params(model, 99);
    const Batch batch = random_batch(cfg, 3);
    const double denominator = double(cfg.B) * cfg.T;

    model_zero_grad(model);
    const double loss = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, denominator);
    ASSERT_TRUE(std::isfinite(loss));
    if (cfg.capacity_factor > 0.0) {
        int64_t dropped = 0;
        for (int64_t d : model.num_dropped) dropped += d;
        ASSERT_GT(dropped, 0) << "the capacity config should drop something, or it tests nothing";
    }
    const double margin = min_selection_margin(model);
    ASSERT_GT(margin, 1e-3) << "pick another seed: a selection could flip under the finite-difference step";
    const std::vector<int> selection(model.acts.expert_idx,
                                     model.acts.expert_idx + (size_t)cfg.L * cfg.B * cfg.T * cfg.K);
    model_backward(model);
    const std::vector<double> analytic = model.grads;

    Rng pick(5);
    double max_rel = 0.0;     // over entries with |gradient| >= 1e-4, where 1e-6 relative is above the noise
    double max_budget = 0.0;  // max |analytic - numeric| / tolerance over all entries: the share of the budget used
    for (int i = 0; i < model.num_tensors(); i++) {
        const ParamTensor& t = model.tensor(i);
        for (int s = 0; s < samples_per_tensor; s++) {
            // first and last entries always (catch off-by-one layouts), random ones in between
            const size_t j = s == 0 ? 0 : (s == 1 ? t.size - 1 : (size_t)pick.below(t.size));
            double& p = model.params[t.offset + j];
            const double saved = p;
            p = saved + kStep;
            const double plus = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, denominator);
            ASSERT_TRUE(std::equal(selection.begin(), selection.end(), model.acts.expert_idx)) << t.name << " +h";
            p = saved - kStep;
            const double minus = model_forward(model, batch.inputs.data(), batch.targets.data(), cfg.B, denominator);
            ASSERT_TRUE(std::equal(selection.begin(), selection.end(), model.acts.expert_idx)) << t.name << " -h";
            p = saved;
            const double numeric = (plus - minus) / (2 * kStep);
            const double a = analytic[t.offset + j];
            const double tol = kRelTol * std::fabs(numeric) + kAbsTol;
            EXPECT_NEAR(a, numeric, tol) << t.name << "[" << j << "]";
            if (std::fabs(numeric) >= 1e-4) max_rel = std::max(max_rel, std::fabs(a - numeric) / std::fabs(numeric));
            max_budget = std::max(max_budget, std::fabs(a - numeric) / tol);
        }
    }
    ::testing::Test::RecordProperty("max_relative_error", std::to_string(max_rel));
    std::printf("  gradcheck: %d tensors x %d samples: max relative error %.3g (|g| >= 1e-4), %.0f%% of the "
                "tolerance budget used at worst; selection margin %.3g\n",
                model.num_tensors(), samples_per_tensor, max_rel, 100 * max_budget, margin);
}

}  // namespace

TEST(GradCheck, EveryTensorMatchesFiniteDifferencesWithAuxLoss) {
    ModelConfig cfg = tiny_config();
    cfg.aux_loss_coef = 0.1;  // large enough that the aux path carries a visible share of the gate's gradient
    run_gradcheck(cfg, 5);
}

TEST(GradCheck, EveryTensorMatchesFiniteDifferencesWithCapacityDrops) {
    ModelConfig cfg = tiny_config();
    cfg.capacity_factor = 1.0;  // capacity = N*K/E = 6: any imbalance drops assignments
    run_gradcheck(cfg, 4);
}

TEST(GradCheck, Float32ForwardAgreesWithFloat64) {
    // same values: the double model gets the float model's (rounded) parameters, so only arithmetic differs.
    // 1e-5 relative: float eps 6e-8 times error growth through ~10 ops of depth and sums of <= C terms
    ModelConfig cfg = tiny_config();
    cfg.aux_loss_coef = 0.01;
    Model<float> model_f(cfg);
    Model<double> model_d(cfg);
    rescale_params(model_f, 99);
    std::copy(model_f.params.begin(), model_f.params.end(), model_d.params.begin());
    const Batch batch = random_batch(cfg, 3);
    const double loss_f = model_forward(model_f, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    const double loss_d = model_forward(model_d, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    EXPECT_NEAR(loss_f, loss_d, 1e-5 * std::fabs(loss_d)) << "float " << loss_f << " double " << loss_d;
    // also at the real init scale (smaller activations, different regime)
    Model<float> init_f(cfg);
    Model<double> init_d(cfg);
    std::copy(init_f.params.begin(), init_f.params.end(), init_d.params.begin());
    const double l_f = model_forward(init_f, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    const double l_d = model_forward(init_d, batch.inputs.data(), batch.targets.data(), cfg.B, cfg.B * cfg.T);
    EXPECT_NEAR(l_f, l_d, 1e-5 * std::fabs(l_d));
}
