// step_model_tests.cpp: the GPU behind the trainer's interface (cuda/gpu_step_model.h) against the CPU one
// (model/step_model.h), and checkpoints crossing devices through the host Model<float>, as `prophet train
// --set device.kind=cuda` uses them. Registered as the "step_model" op test (op_tests.cpp).
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "cuda/gpu_step_model.h"
#include "harness.h"
#include "kernels/optim.h"
#include "model/step_model.h"

namespace prophet::gputest {

namespace {

struct Batches {
    std::vector<std::vector<int>> inputs, targets;  // [steps][B*T]
};

// One trainer step through the interface (trainer.cpp's order, one rank: no masks); returns the loss.
double train_step(StepModel& m, const ModelConfig& cfg, const std::vector<int>& inputs,
                  const std::vector<int>& targets) {
    const AdamWConfig adamw;
    m.zero_grad();
    const double loss = m.forward(inputs.data(), targets.data(), cfg.B, double(cfg.B) * cfg.T);
    m.backward();
    m.adamw_step(3e-3, adamw, grad_clip_scale(std::sqrt(m.grad_norm_sq(nullptr)), 1.0), nullptr);
    return loss;
}

}  // namespace

// 8 steps on the GPU and on the CPU from the same parameters; after step 5 the GPU state goes to a host model
// (the checkpoint's layout) and on into a fresh CPU model and a fresh GPU model, which take steps 6-8.
// Tolerances: the losses of the two devices within 1e-4 relative (the bar); the GPU state copied to
// the host exact against a second download; a fresh GPU model from that state within 1e-5 of the original
// (the same kernels; encoder_backward's atomicAdd order is the only nondeterminism); AdamW m and v on the host
// loosely against the CPU run's; the routing counts of step 1 exact (a flipped top-K choice would show).
void test_step_model(Case& c, Rng& rng, cuda::Context&) {
    ModelConfig cfg;
    cfg.V = 97, cfg.T = 32, cfg.C = 64, cfg.NH = 4, cfg.L = 2, cfg.E = 4, cfg.K = 2, cfg.F = 96, cfg.B = 4;
    cfg.seed = 11;
    Model<float> cpu_model(cfg);
    CpuStepModel cpu(cpu_model);
    cuda::GpuStepModel gpu(cpu_model, 0);
    Batches b;
    for (int s = 0; s < 8; s++) {
        b.inputs.push_back(random_ints(rng, (size_t)cfg.B * cfg.T, cfg.V));
        b.targets.push_back(random_ints(rng, (size_t)cfg.B * cfg.T, cfg.V));
    }
    double worst = 0.0;
    for (int s = 0; s < 5; s++) {
        const double lc = train_step(cpu, cfg, b.inputs[s], b.targets[s]);
        const double lg = train_step(gpu, cfg, b.inputs[s], b.targets[s]);
        worst = std::max(worst, std::fabs(lg - lc) / std::fabs(lc));
        if (s == 0)
            for (int l = 0; l < cfg.L; l++) {
                const auto cc = cpu.routing_counts(l), gc = gpu.routing_counts(l);
                c.expect_equal("routing counts layer " + std::to_string(l), std::vector<int>(cc.begin(), cc.end()),
                               std::vector<int>(gc.begin(), gc.end()));
            }
    }
    c.expect_true("steps 1-5 losses within 1e-4 rel", worst <= 1e-4, "worst rel " + std::to_string(worst));

    Model<float> host(cfg);  // the checkpoint's layout
    gpu.to_host(host);
    c.expect_true("AdamW step count carried", host.adam_step == 5, std::to_string(host.adam_step));
    Model<float> again(cfg);
    gpu.to_host(again);
    c.expect_close("state download repeats", host.params, again.params, kExact);
    // m and v reached the host, each in its own array: the CPU run's, loosely (small gradients differ most;
    // atol is a thousandth of the array's largest element, so zeros or a swapped array fail)
    for (const auto& [name, cpu_state, host_state] :
         {std::tuple{"AdamW m on the host", &cpu_model.adam_m, &host.adam_m},
          std::tuple{"AdamW v on the host", &cpu_model.adam_v, &host.adam_v}}) {
        float scale = 0.0f;
        for (float x : *cpu_state) scale = std::max(scale, std::fabs(x));
        c.expect_close(name, *cpu_state, *host_state, {1e-3 * scale, 5e-2});
    }

    Model<float> cpu_resumed_model(cfg);
    CpuStepModel cpu_resumed(cpu_resumed_model);
    cpu_resumed.from_host(host);
    Model<float> fresh(cfg);  // other initial values: from_host must replace all of them
    cuda::GpuStepModel gpu_resumed(fresh, 0);
    gpu_resumed.from_host(host);
    double worst_devices = 0.0, worst_gpu = 0.0;
    for (int s = 5; s < 8; s++) {
        const double lg = train_step(gpu, cfg, b.inputs[s], b.targets[s]);
        const double lr = train_step(gpu_resumed, cfg, b.inputs[s], b.targets[s]);
        const double lc = train_step(cpu_resumed, cfg, b.inputs[s], b.targets[s]);
        worst_gpu = std::max(worst_gpu, std::fabs(lr - lg) / std::fabs(lg));
        worst_devices = std::max(worst_devices, std::fabs(lc - lg) / std::fabs(lg));
    }
    c.expect_true("GPU resumed from the host state: steps 6-8 within 1e-5 rel", worst_gpu <= 1e-5,
                  "worst rel " + std::to_string(worst_gpu));
    c.expect_true("CPU resumed from the GPU's state: steps 6-8 within 1e-4 rel", worst_devices <= 1e-4,
                  "worst rel " + std::to_string(worst_devices));
}

}  // namespace prophet::gputest
