// timeline_tests.cpp: GPU op times from cudaEvent pairs (cuda/event_timeline.h) as `prophet train --timeline`
// records them for a GPU run. Registered as the "event_timeline" op test.
#include <string>
#include <vector>

#include "core/timer.h"
#include "cuda/gpu_model.h"
#include "harness.h"
#include "kernels/optim.h"

namespace prophet::gputest {

// One GpuModel step with a timeline attached: every block's attention and gate forward/backward and its local
// experts (FEC/BEC), the embedding, the head and AdamW appear once each; every span lies within the host
// interval of the step; spans of one stream follow each other (a span never starts before the previous one ended,
// up to 1 us of clock alignment). Without a timeline, nothing is recorded.
void test_event_timeline(Case& c, Rng& rng, cuda::Context& ctx) {
    ModelConfig cfg;
    cfg.V = 97, cfg.T = 32, cfg.C = 64, cfg.NH = 4, cfg.L = 2, cfg.E = 4, cfg.K = 2, cfg.F = 96, cfg.B = 4;
    Model<float> cpu(cfg);
    cuda::GpuModel gpu(ctx, cpu);
    OpTimeline timeline;
    const int N = cfg.B * cfg.T;
    auto inputs = random_ints(rng, N, cfg.V), targets = random_ints(rng, N, cfg.V);
    auto step = [&] {
        gpu.zero_grad();
        gpu.forward(inputs.data(), targets.data(), cfg.B, double(N));
        gpu.backward();
        gpu.adamw_step(1e-3, AdamWConfig{}, 1.0);
        ctx.synchronize();
        gpu.flush_timeline();
    };
    step();
    c.expect_true("no timeline: nothing recorded", timeline.take().empty(), "");
    gpu.set_timeline(&timeline);
    const int64_t t0 = now_ns();
    step();
    const int64_t t1 = now_ns();
    const std::vector<OpRecord> ops = timeline.take();
    // per block: attn, gate, fec, bec, gate bwd, attn bwd; plus embed, head, head bwd, embed bwd, optimizer
    c.expect_true("span count", (int)ops.size() == 6 * cfg.L + 5, std::to_string(ops.size()) + " spans");
    std::vector<int> seen((size_t)OpKind::kCount, 0);
    int64_t prev_end = t0;
    for (const OpRecord& op : ops) {
        seen[(size_t)op.kind]++;
        const std::string what = std::string(op_kind_name(op.kind)) + " block " + std::to_string(op.block);
        c.expect_true(what + " inside the step", op.start_ns >= t0 - 1000 && op.end_ns <= t1 + 1000 &&
                                                     op.start_ns <= op.end_ns,
                      std::to_string(op.start_ns - t0) + " .. " + std::to_string(op.end_ns - t0) + " ns");
        c.expect_true(what + " after the previous span", op.start_ns >= prev_end - 1000,
                      std::to_string(prev_end - op.start_ns) + " ns early");
        prev_end = op.end_ns;
    }
    for (OpKind k : {OpKind::kAttn, OpKind::kGate, OpKind::kFec, OpKind::kBec, OpKind::kGateBwd, OpKind::kAttnBwd})
        c.expect_true(std::string(op_kind_name(k)) + " once per block", seen[(size_t)k] == cfg.L,
                      std::to_string(seen[(size_t)k]));
    for (OpKind k : {OpKind::kEmbed, OpKind::kHead, OpKind::kHeadBwd, OpKind::kEmbedBwd, OpKind::kOptimizer})
        c.expect_true(std::string(op_kind_name(k)) + " once", seen[(size_t)k] == 1, std::to_string(seen[(size_t)k]));
}

}  // namespace prophet::gputest
