// expert_compute_tests.cpp: GpuExpertCompute (cuda/gpu_expert_compute.h), the expert-parallel executor's experts on
// a GPU, against CpuExpertCompute (moe/cpu_expert_compute.h) on the same rows and parameters, and its staging of
// parameters / gradients between the GpuModel and a host arena. Registered as the "expert_compute" op test.
#include <string>
#include <vector>

#include "cuda/gpu_expert_compute.h"
#include "harness.h"
#include "moe/cpu_expert_compute.h"

namespace prophet::gputest {

// Layer 1 of a 2-layer model, 5 experts with rows {7, 0, 33, 1, 64} (an empty one, a one-row one): forward y,
// backward dx and the layer's expert gradients within moe_experts' tolerance (1e-4, 1e-3: the same GEMMs in
// another blocking). Then staging: new parameters for expert 2 in the host arena, params_from_host, and a second
// forward must match the CPU with those parameters; grads_to_host must copy the device gradients exactly.
void test_expert_compute(Case& c, Rng& rng, cuda::Context& ctx) {
    const Tolerance tol{1e-4, 1e-3};
    ModelConfig cfg;
    cfg.V = 31, cfg.T = 8, cfg.C = 40, cfg.NH = 4, cfg.L = 2, cfg.E = 5, cfg.K = 2, cfg.F = 72, cfg.B = 2;
    cfg.seed = 3;
    const int C = cfg.C, F = cfg.F, E = cfg.E, layer = 1;
    Model<float> cpu(cfg), stage(cfg);  // the CPU compute's arena; the GPU's host staging arena
    model_zero_grad(cpu);
    model_zero_grad(stage);
    cuda::GpuModel gpu(ctx, cpu);
    CpuExpertCompute cpu_compute(cfg.L, E, C, F, expert_storage_from_model(cpu));
    cuda::GpuExpertCompute gpu_compute(ctx, gpu, stage);

    const std::vector<int> rows = {7, 0, 33, 1, 64};
    std::vector<int64_t> offsets(E + 1, 0);
    for (int e = 0; e < E; e++) offsets[e + 1] = offsets[e] + rows[e];
    const size_t M = (size_t)offsets[E];
    auto x = random_normal(rng, M * C), dy = random_normal(rng, M * C);
    std::vector<float> y_cpu(M * C), y_gpu(M * C), dx_cpu(M * C), dx_gpu(M * C);
    cpu_compute.forward(layer, offsets, x.data(), y_cpu.data());
    gpu_compute.forward(layer, offsets, x.data(), y_gpu.data());
    c.expect_close("y", y_cpu, y_gpu, tol);
    cpu_compute.backward(layer, offsets, x.data(), dy.data(), dx_cpu.data());
    gpu_compute.backward(layer, offsets, x.data(), dy.data(), dx_gpu.data());
    c.expect_close("dx", dx_cpu, dx_gpu, tol);
    const std::vector<float> grads = gpu.download_grads();
    for (int e = 0; e < E; e++) {
        const Span<float> g = model_expert_grads(cpu, layer, e);
        const size_t offset = (size_t)(g.data - cpu.grads.data());
        c.expect_close("dW of expert " + std::to_string(e) + " (+=)", std::vector<float>(g.data, g.data + g.size),
                       std::vector<float>(grads.begin() + offset, grads.begin() + offset + g.size), tol);
    }

    // staging: expert 2's parameters arrive in the host arena (as a Trans leaves them) and go to the device
    const std::vector<float> fresh = random_normal(rng, 2 * (size_t)C * F, 0.1);
    std::copy(fresh.begin(), fresh.end(), model_expert_params(stage, layer, 2).data);
    std::copy(fresh.begin(), fresh.end(), model_expert_params(cpu, layer, 2).data);
    std::vector<uint8_t> only2(E, 0);
    only2[2] = 1;
    gpu_compute.params_from_host(layer, only2);
    cpu_compute.forward(layer, offsets, x.data(), y_cpu.data());
    gpu_compute.forward(layer, offsets, x.data(), y_gpu.data());
    c.expect_close("y after expert 2's parameters were staged in", y_cpu, y_gpu, tol);
    gpu_compute.grads_to_host(layer, std::vector<uint8_t>(E, 1));
    for (int e = 0; e < E; e++) {
        const Span<float> g = model_expert_grads(stage, layer, e);
        const size_t offset = (size_t)(g.data - stage.grads.data());
        c.expect_close("staged dW of expert " + std::to_string(e), std::vector<float>(g.data, g.data + g.size),
                       std::vector<float>(grads.begin() + offset, grads.begin() + offset + g.size), kExact);
    }
}

}  // namespace prophet::gputest
