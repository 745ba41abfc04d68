// ep_tests.cpp: expert parallelism on one GPU shared by two ranks, in process (two LocalGroup threads, a CUDA context
// each on device 0): the trainer's step order (docs/gpu.md "Expert parallelism on GPUs") over GpuStepModel,
// ExpertParallelExecutor and GpuExpertCompute, against one GpuStepModel with the whole batch. Registered as the
// "ep_two_ranks" op test; `ci/gpu-check.sh`'s placement-invariance stage repeats it through `prophet train`.
#include <cmath>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "cuda/gpu_step_model.h"
#include "harness.h"
#include "kernels/optim.h"
#include "moe/ep_executor.h"

namespace prophet::gputest {

namespace {

constexpr int kSteps = 6;

ModelConfig ep_config() {
    ModelConfig cfg;
    cfg.V = 97, cfg.T = 16, cfg.C = 64, cfg.NH = 4, cfg.L = 2, cfg.E = 4, cfg.K = 2, cfg.F = 96, cfg.B = 4;
    cfg.seed = 5;
    return cfg;
}

// Every expert replicated on both ranks: every step's Trans and Agg move every expert, and each rank computes its
// own tokens' experts (RouteRule::kOwner sends only a non-holder's tokens away).
Placement replicated(int D, int E) {
    Placement p = Placement::make_static(D, E);
    for (int e = 0; e < E; e++)
        for (int d = 0; d < D; d++) p.add_replica(e, d);
    return p;
}

// One trainer step on rank `comm` (train/trainer.cpp's order); returns the global loss.
double ep_step(Communicator& comm, StepModel& step, const ModelConfig& cfg, const std::vector<int>& inputs,
               const std::vector<int>& targets, const std::vector<char>& skip, const std::vector<char>& include) {
    const int B_local = cfg.B / comm.size();
    step.zero_grad();
    double loss = step.forward(inputs.data(), targets.data(), B_local, double(cfg.B) * cfg.T);
    step.backward();
    step.reduce_dense_grads([&](float* data, size_t n) { comm.all_reduce_sum(data, n); });
    double norm_sq = step.grad_norm_sq(&include);
    comm.all_reduce_sum(&norm_sq, 1);
    step.adamw_step(3e-3, AdamWConfig{}, grad_clip_scale(std::sqrt(norm_sq), 1.0), &skip);
    comm.all_reduce_sum(&loss, 1);
    return loss;
}

}  // namespace

// Tolerance: the 1e-5 relative of the CPU placement-invariance tests (tests/train/test_trainer.cpp): two ranks
// change which rows a GEMM sees and sum expert gradients over ranks (Agg), a few ulp per step over 6 AdamW steps.
void test_ep_two_ranks(Case& c, Rng& rng, cuda::Context& ctx) {
    const ModelConfig cfg = ep_config();
    const int D = 2, N = cfg.B * cfg.T;
    std::vector<std::vector<int>> inputs, targets;  // [steps][B*T], the global batch
    for (int s = 0; s < kSteps; s++) {
        inputs.push_back(random_ints(rng, N, cfg.V));
        targets.push_back(random_ints(rng, N, cfg.V));
    }
    // the reference: one GPU model, every expert local, the whole batch
    std::vector<double> reference;
    {
        Model<float> host(cfg);
        cuda::GpuStepModel one(host, ctx.device());
        for (int s = 0; s < kSteps; s++) {
            one.zero_grad();
            const double loss = one.forward(inputs[s].data(), targets[s].data(), cfg.B, double(N));
            one.backward();
            one.adamw_step(3e-3, AdamWConfig{}, grad_clip_scale(std::sqrt(one.grad_norm_sq(nullptr)), 1.0), nullptr);
            reference.push_back(loss);
        }
    }
    // two ranks on the same GPU, expert parallel, host-staged
    auto comms = make_local_group(D);
    std::vector<std::vector<double>> losses(D);
    std::vector<std::string> errors(D);
    std::vector<std::thread> threads;
    for (int r = 0; r < D; r++) {
        comms[r]->set_timeout_s(120.0);
        threads.emplace_back([&, r] {
            try {
                Communicator& comm = *comms[r];
                Model<float> host(cfg);
                cuda::GpuStepModel step(host, ctx.device());  // a context of this thread's own, on the same GPU
                ExpertParallelExecutor ep(&comm, host, RouteRule::kOwner);
                ep.set_placement_provider([&](int, const int64_t*) { return replicated(D, cfg.E); });
                ep.set_expert_compute(step.expert_compute(host));
                step.set_moe_executor(&ep);
                const std::vector<char> skip = ep.optimizer_skip_mask(host.layout);
                std::vector<char> include = ep.home_expert_tensor_mask(host.layout);
                for (size_t i = 0; i < include.size(); i++)
                    if (!host.layout.tensors[i].is_expert && r == 0) include[i] = 1;
                const size_t begin = (size_t)r * (cfg.B / D) * cfg.T, count = (size_t)(cfg.B / D) * cfg.T;
                for (int s = 0; s < kSteps; s++) {
                    const std::vector<int> in(inputs[s].begin() + begin, inputs[s].begin() + begin + count);
                    const std::vector<int> tg(targets[s].begin() + begin, targets[s].begin() + begin + count);
                    losses[r].push_back(ep_step(comm, step, cfg, in, tg, skip, include));
                }
            } catch (const std::exception& e) {
                errors[r] = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < D; r++) c.expect_true("rank " + std::to_string(r) + " ran", errors[r].empty(), errors[r]);
    if (!errors[0].empty() || !errors[1].empty()) return;
    double worst = 0.0;
    for (int s = 0; s < kSteps; s++)
        worst = std::max(worst, std::fabs(losses[0][s] - reference[s]) / std::fabs(reference[s]));
    c.expect_true("2 ranks sharing the GPU repeat the one-rank losses within 1e-5 rel", worst <= 1e-5,
                  "worst rel " + std::to_string(worst) + "; step 1 " + std::to_string(losses[0][0]) + " vs " +
                      std::to_string(reference[0]));
    c.expect_true("both ranks report the same losses", losses[0] == losses[1], "");
}

}  // namespace prophet::gputest
