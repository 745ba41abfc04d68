// The memory estimate that refuses too-large models (exit 4) is checked against what is really allocated: the
// parameter count against param_layout, the activation bytes against the arenas a forward carves (exactly), and
// the whole estimate against the heap a one-rank Trainer holds after a step (within a stated tolerance).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cmath>
#include <vector>

#include "comm/comm.h"
#include "core/error.h"
#include "core/huge_pages.h"
#include "model/moe_gpt.h"
#include "train/memory_estimate.h"
#include "train/train_config.h"
#include "train/trainer.h"

using namespace prophet;

#if defined(__SANITIZE_ADDRESS__)  // g++ -fsanitize=address (PROPHET_SANITIZE)
// the sanitizers' allocator interface (LLVM's sanitizer/allocator_interface.h, which g++ 12 does not ship)
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace {

ModelConfig shape(int V, int T, int C, int NH, int L, int E, int K, int F, int B) {
    ModelConfig m;
    m.V = V, m.T = T, m.C = C, m.NH = NH, m.L = L, m.E = E, m.K = K, m.F = F, m.B = B;
    return m;
}

const std::vector<ModelConfig>& shapes() {
    static const std::vector<ModelConfig> all = {shape(256, 32, 64, 4, 2, 8, 2, 128, 16),
                                                 shape(97, 7, 12, 3, 3, 4, 3, 0, 4),
                                                 shape(256, 64, 128, 4, 4, 8, 2, 256, 8)};
    return all;
}

double heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer serves malloc from its own allocator, which mallinfo2 does not see (it read 27 MB of a
    // 71 MB estimate): the bytes its allocator has handed out and not taken back
    const double malloc_bytes = static_cast<double>(__sanitizer_get_current_allocated_bytes());
#else
    const struct mallinfo2 info = mallinfo2();
    const double malloc_bytes = static_cast<double>(info.uordblks + info.hblkhd);  // small chunks + mmapped ones
#endif
    return malloc_bytes + static_cast<double>(prophet::huge_pages_bytes_in_use());  // + row buffers outside malloc
}

}  // namespace

TEST(MemoryEstimate, ParameterCountIsTheLayouts) {
    for (const ModelConfig& m : shapes()) {
        const MemoryEstimate est = estimate_train_memory(m, 1);
        EXPECT_EQ(est.num_params, static_cast<double>(param_layout(m).num_params)) << "C=" << m.C;
        EXPECT_EQ(est.parameters_bytes, 16.0 * est.num_params);  // params, grads, m, v in float
    }
}

TEST(MemoryEstimate, ActivationsAreTheArenasAForwardAllocates) {
    for (const ModelConfig& m : shapes()) {
        Model<float> model(m);
        for (int D : {1, 2, 4}) {  // a forward with another B_local reallocates the arenas for it
            if (m.B % D) continue;
            const int B_local = m.B / D;
            std::vector<int> tokens(static_cast<size_t>(B_local) * m.T);
            for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int>(i % m.V);
            model_forward(model, tokens.data(), tokens.data(), B_local, double(m.B) * m.T);
            const double arena_bytes = model.acts.float_arena.size() * sizeof(float) +
                                       model.acts.int_arena.size() * sizeof(int);
            const MemoryEstimate est = estimate_train_memory(m, D);
            EXPECT_EQ(est.activations_bytes, arena_bytes) << "C=" << m.C << " D=" << D;
            EXPECT_EQ(est.parameters_bytes, 4.0 * model.params.size() * sizeof(float));
        }
    }
}

// The heap a one-rank trainer holds after one step: the estimate (D = 1: balanced = worst routing) must not
// exceed it (the refusal would then refuse runs that fit) and may miss only what it says it leaves out (data,
// policy, bookkeeping): at most 15% + 4 MiB here.
TEST(MemoryEstimate, OneRankTrainerHeapIsCoveredByTheEstimate) {
    Config config(train_schema());
    config.merge_toml_file("experiments/train/skewed-4rank.toml");
    config.apply_set("model.C=128");
    config.apply_set("model.F=512");
    const TrainSettings settings = train_settings_from(config, 1);
    const MemoryEstimate est = estimate_train_memory(settings.model, 1);
    auto group = make_local_group(1);
    const double before = heap_in_use();
    double held = 0;
    {
        Trainer trainer(*group[0], settings, checkpoint_config_hash(config));
        trainer.step();
        held = heap_in_use() - before;
    }
    EXPECT_GE(held, est.total_bytes()) << "estimate " << est.total_bytes() << " B";
    EXPECT_LE(held, 1.15 * est.total_bytes() + 4.0 * 1048576) << "estimate " << est.total_bytes() << " B";
    std::printf("one-rank trainer heap %.0f B, estimate %.0f B (ratio %.3f)\n", held, est.total_bytes(),
                held / est.total_bytes());
}

TEST(MemoryEstimate, SkewedRoutingCanNeedUpToDTimesTheBalancedRows) {
    const ModelConfig m = shapes()[0];
    const MemoryEstimate one = estimate_train_memory(m, 1), four = estimate_train_memory(m, 4);
    EXPECT_EQ(one.ep_buffers_bytes, one.ep_buffers_worst_bytes);
    EXPECT_GT(four.ep_buffers_worst_bytes, 2 * four.ep_buffers_bytes);
}

TEST(MemoryEstimate, HugeShapesDoNotOverflow) {
    const MemoryEstimate est = estimate_train_memory(shape(1 << 20, 1 << 16, 1 << 16, 1024, 1024, 1 << 16, 8, 1 << 20, 1 << 20), 1);
    EXPECT_TRUE(std::isfinite(est.total_bytes()));
    EXPECT_GT(est.total_bytes(), 1e18);
}

TEST(MemoryEstimate, LimitRefusesWithExitFourNamingTheParts) {
    const MemoryEstimate est = estimate_train_memory(shapes()[2], 1);
    EXPECT_NO_THROW(check_memory_fits(est, 1000.0, 1, "train.max_memory_gib"));
    try {
        check_memory_fits(est, 0.001, 1, "train.max_memory_gib");  // 1 MiB
        FAIL() << "a 1 MiB limit must refuse " << est.total_bytes() << " B";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitResource);
        const std::string what = e.what();
        for (const char* needle : {"train.max_memory_gib", "activations", "AdamW", "expert-parallel", "fix:"})
            EXPECT_NE(what.find(needle), std::string::npos) << needle << " in: " << what;
    }
    // 0: MemAvailable of this machine, split over the ranks on the node
    EXPECT_GT(available_memory_bytes(), 0);
    const double quarter = available_memory_bytes() / 4;  // MemAvailable moves between reads: 10% slack
    EXPECT_NEAR(memory_limit_bytes(0, 4), quarter, 0.1 * quarter);
    EXPECT_DOUBLE_EQ(memory_limit_bytes(2, 4), 2.0 * 1073741824.0);
}
