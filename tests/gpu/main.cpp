// main.cpp: test_gpu_ops, the GPU op harness (docs/gpu.md).
//
//   test_gpu_ops                      every op test (GPU vs CPU on fresh random inputs); exit 0 all pass, 1 not
//   test_gpu_ops --op layernorm       one op test (ctest runs one per op: gpu_<op>)
//   test_gpu_ops --bench [--json F]   the GPU ops at MoE-GPT-S shapes, ms and TFLOP/s or GB/s (F: JSON rows)
//   test_gpu_ops --list               the op test names
//   test_gpu_ops --self-check         the comparisons' own check (no GPU needed): exit 0 right, 1 wrong
// Exit 77 when there is no CUDA device (ctest SKIP_RETURN_CODE), 2 for a usage error.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "harness.h"

namespace {

constexpr int kExitSkip = 77;

int usage(const std::string& problem) {
    std::fprintf(stderr,
                 "test_gpu_ops: %s\nusage: test_gpu_ops [--op NAME] [--seed N] [--bench [--json PATH]] [--list] "
                 "[--self-check]\n",
                 problem.c_str());
    return prophet::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace prophet;
    std::string only_op, json_path;
    bool bench = false, list = false;
    uint64_t seed = 20260;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&](const char* flag) -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (a == "--op") {
            const char* v = value("--op");
            if (v == nullptr) return usage("--op needs a name (--list shows them)");
            only_op = v;
        } else if (a == "--seed") {
            const char* v = value("--seed");
            char* end = nullptr;
            if (v == nullptr || (seed = std::strtoull(v, &end, 10), *end != '\0'))
                return usage(std::string("--seed = ") + (v ? v : "") + ": needs a non-negative integer");
        } else if (a == "--json") {
            const char* v = value("--json");
            if (v == nullptr) return usage("--json needs a path");
            json_path = v;
        } else if (a == "--bench") {
            bench = true;
        } else if (a == "--list") {
            list = true;
        } else if (a == "--self-check") {
            return gputest::harness_self_check() ? 0 : 1;
        } else {
            return usage("unknown argument '" + a + "'");
        }
    }
    const auto& tests = gputest::op_tests();
    if (list) {
        for (const auto& t : tests) std::printf("%s\n", t.name);
        return 0;
    }
    if (!bench && !only_op.empty()) {
        bool known = false;
        for (const auto& t : tests) known |= only_op == t.name;
        if (!known) return usage("--op = " + only_op + ": not an op test (--list shows them)");
    }

    const char* reason = "no device";
    if (cuda::device_count(&reason) == 0) {
        std::printf("SKIP: no CUDA device (cudaGetDeviceCount: %s); the GPU op tests need one\n", reason);
        return kExitSkip;
    }
    try {
        cuda::Context ctx(0);
        cudaDeviceProp prop{};
        PROPHET_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        std::printf("device 0: %s (sm_%d%d, %.1f GiB)\n", prop.name, prop.major, prop.minor,
                    double(prop.totalGlobalMem) / (1 << 30));
        if (bench) {
            const auto rows = gputest::run_benchmarks(ctx, only_op);
            if (!json_path.empty()) {
                nlohmann::json j = {{"device", prop.name}, {"rows", nlohmann::json::array()}};
                for (const auto& r : rows)
                    j["rows"].push_back({{"op", r.op}, {"shape", r.shape}, {"ms", r.ms}, {"flops", r.flops},
                                         {"bytes", r.bytes}, {"tflops", r.flops / (r.ms * 1e-3) / 1e12},
                                         {"gbps", r.bytes / (r.ms * 1e-3) / 1e9},
                                         {"tokens_per_s", r.tokens / (r.ms * 1e-3)}});
                std::ofstream out(json_path);
                out << j.dump(2) << "\n";
                if (!out) throw Error(kExitRunFailed, "test_gpu_ops: cannot write --json " + json_path);
            }
            return 0;
        }
        int failed = 0, checks = 0;
        for (const auto& t : tests) {
            if (!only_op.empty() && only_op != t.name) continue;
            Rng rng(seed);
            gputest::Case c(t.name);
            t.run(c, rng, ctx);
            checks += c.checks();
            if (!c.ok()) failed++;
        }
        std::printf("%s: %d checks, %d op test(s) failed (seed %llu)\n", failed ? "FAIL" : "PASS", checks, failed,
                    (unsigned long long)seed);
        return failed ? 1 : 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return e.exit_code();
    }
}
