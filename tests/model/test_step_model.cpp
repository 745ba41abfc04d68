// test_step_model.cpp: CpuStepModel (model/step_model.h), the trainer's way to the CPU model, is bitwise the free
// functions of moe_gpt.h it replaced in the trainer: same losses, gradient norms and parameters after several
// steps with clipping, masks and the auxiliary loss on; plus its routing counts, dispatch indices and the host
// copy a device model's checkpoints go through.
// Run: ./build/tests/test_model --gtest_filter='StepModel*'
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "kernels/optim.h"
#include "model/moe_gpt.h"
#include "model/step_model.h"

using namespace prophet;

namespace {

ModelConfig step_config() {
    ModelConfig cfg;
    cfg.V = 64, cfg.T = 16, cfg.C = 32, cfg.NH = 4, cfg.L = 2, cfg.E = 4, cfg.K = 2, cfg.B = 4;
    cfg.aux_loss_coef = 0.01;  // every term of the loss in play
    cfg.seed = 77;
    return cfg;
}

void random_tokens(const ModelConfig& cfg, uint64_t seed, std::vector<int>& inputs, std::vector<int>& targets) {
    Rng rng(seed);
    inputs.resize((size_t)cfg.B * cfg.T), targets.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); i++) inputs[i] = (int)rng.below(cfg.V), targets[i] = (int)rng.below(cfg.V);
}

}  // namespace

TEST(StepModel, CpuThroughTheInterfaceIsBitwiseTheFreeFunctions) {
    const ModelConfig cfg = step_config();
    Model<float> direct(cfg), through(cfg);
    CpuStepModel step(through);
    AdamWConfig adamw;
    adamw.weight_decay = 0.1;
    // the trainer's masks on rank 0 of one: every tensor counted and updated (a non-null mask takes the masked path)
    const std::vector<char> include(direct.num_tensors(), 1), skip(direct.num_tensors(), 0);
    const double denominator = (double)cfg.B * cfg.T;
    std::vector<int> inputs, targets;
    for (int s = 0; s < 4; s++) {
        random_tokens(cfg, 1000 + s, inputs, targets);
        const double lr = 1e-2 * (s + 1);

        model_zero_grad(direct);
        const double loss_a = model_forward(direct, inputs.data(), targets.data(), cfg.B, denominator);
        model_backward(direct);
        const double norm_a = grad_norm_sq(direct, &include);
        adamw_step(direct, lr, adamw, grad_clip_scale(std::sqrt(norm_a), 0.5), &skip);

        step.zero_grad();
        const double loss_b = step.forward(inputs.data(), targets.data(), cfg.B, denominator);
        step.backward();
        const double norm_b = step.grad_norm_sq(&include);
        step.adamw_step(lr, adamw, grad_clip_scale(std::sqrt(norm_b), 0.5), &skip);

        EXPECT_EQ(loss_a, loss_b) << "step " << s;
        EXPECT_EQ(norm_a, norm_b) << "step " << s;
        for (int l = 0; l < cfg.L; l++) {
            const std::vector<int64_t> counts = step.routing_counts(l);
            ASSERT_EQ(counts.size(), (size_t)cfg.E);
            for (int e = 0; e < cfg.E; e++) EXPECT_EQ(counts[e], direct.routing_counts[(size_t)l * cfg.E + e]);
        }
        const int* idx = step.dispatch_indices();  // [L,N,K]
        for (size_t i = 0; i < (size_t)cfg.L * cfg.B * cfg.T * cfg.K; i++)
            ASSERT_EQ(idx[i], direct.acts.dispatch_idx[i]) << "step " << s << " index " << i;
    }
    ASSERT_EQ(direct.params.size(), through.params.size());
    size_t differing = 0;
    for (size_t i = 0; i < direct.params.size(); i++)
        differing += direct.params[i] != through.params[i] || direct.adam_m[i] != through.adam_m[i] ||
                     direct.adam_v[i] != through.adam_v[i];
    EXPECT_EQ(differing, 0u);
    EXPECT_EQ(direct.adam_step, through.adam_step);
    EXPECT_EQ(direct.adam_step, 4);
}

TEST(StepModel, CpuHostCopyCarriesTheWholeTrainingState) {
    const ModelConfig cfg = step_config();
    Model<float> trained(cfg), host(cfg);
    CpuStepModel step(trained);
    std::vector<int> inputs, targets;
    random_tokens(cfg, 5, inputs, targets);
    step.zero_grad();
    step.forward(inputs.data(), targets.data(), cfg.B, (double)cfg.B * cfg.T);
    step.backward();
    step.adamw_step(1e-2, AdamWConfig{}, 1.0, nullptr);
    ASSERT_NE(trained.params, host.params);  // the step changed something the copy must carry
    step.to_host(host);
    EXPECT_EQ(host.params, trained.params);
    EXPECT_EQ(host.adam_m, trained.adam_m);
    EXPECT_EQ(host.adam_v, trained.adam_v);
    EXPECT_EQ(host.adam_step, 1);
    // and back: a fresh model takes the host's state
    Model<float> fresh(cfg);
    CpuStepModel fresh_step(fresh);
    fresh_step.from_host(host);
    EXPECT_EQ(fresh.params, trained.params);
    EXPECT_EQ(fresh.adam_v, trained.adam_v);
    EXPECT_EQ(fresh.adam_step, 1);
}
