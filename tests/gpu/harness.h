// harness.h: the GPU op-test harness (tests/gpu, docs/gpu.md): random inputs, GPU-vs-CPU comparison with a
// written tolerance, and cudaEvent timing for the benchmark mode.
//
// A check passes when every element satisfies |gpu - cpu| <= atol + rtol * |cpu| (the CPU op is the oracle;
// each op's tolerance and the reason for it sit next to the op in op_tests.cpp). Integer outputs and pure data
// movement are compared exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "cuda/context.h"

namespace prophet::gputest {

struct Tolerance {
    double atol;
    double rtol;
};
constexpr Tolerance kExact{0.0, 0.0};

// The record of one op test: every comparison made, printed as it is made.
class Case {
  public:
    explicit Case(std::string op) : op_(std::move(op)) {}
    void expect_close(const std::string& what, const std::vector<float>& cpu, const std::vector<float>& gpu,
                      Tolerance tol);
    void expect_close(const std::string& what, const std::vector<float>& cpu, const cuda::DeviceBuffer<float>& gpu,
                      Tolerance tol) {
        expect_close(what, cpu, gpu.download(), tol);
    }
    void expect_close(const std::string& what, double cpu, double gpu, Tolerance tol);
    void expect_equal(const std::string& what, const std::vector<int>& cpu, const std::vector<int>& gpu);
    // a condition that is not a numeric comparison (an error was raised, a message names the call)
    void expect_true(const std::string& what, bool cond, const std::string& detail);
    bool ok() const { return failures_ == 0; }
    int checks() const { return checks_; }

  private:
    void report(const std::string& what, bool pass, const std::string& detail);
    std::string op_;
    int checks_ = 0;
    int failures_ = 0;
};

// Runs without a GPU: feeds the comparisons known good and bad inputs (a NaN, one element just outside the
// tolerance, a differing integer, a size mismatch) and returns whether each verdict is the right one, so a
// comparison that cannot fail is caught in CI (ctest gpu_harness_self_check).
bool harness_self_check();

// normal(0, scale) floats; uniform ints in [0, bound)
std::vector<float> random_normal(Rng& rng, size_t n, double scale = 1.0);
std::vector<int> random_ints(Rng& rng, size_t n, int bound);

template <typename T>
cuda::DeviceBuffer<T> to_device(const std::vector<T>& host) {
    cuda::DeviceBuffer<T> d(host.size());
    d.upload(host);
    return d;
}

// Milliseconds per call of fn on ctx's stream: `warmup` untimed calls, then the mean of `iters` timed with
// cudaEvents around the whole loop.
double time_ms(cuda::Context& ctx, const std::function<void()>& fn, int warmup = 3, int iters = 10);

}  // namespace prophet::gputest

namespace prophet::gputest {

// One op test: runs the GPU op and the CPU op on the same fresh random inputs and compares (op_tests.cpp).
struct OpTest {
    const char* name;
    void (*run)(Case& c, Rng& rng, cuda::Context& ctx);
};
const std::vector<OpTest>& op_tests();

// One benchmark row (bench.cpp): the GPU op at the MoE-GPT-S shapes, ms per call and the achieved rate.
struct BenchRow {
    std::string op, shape;
    double ms = 0.0;
    double flops = 0.0;  // useful FLOPs per call (0 if the op is memory-bound)
    double bytes = 0.0;  // minimum bytes moved per call (inputs read + outputs written once)
    double tokens = 0.0; // tokens per call (the training-step row), for tokens/s
};
std::vector<BenchRow> run_benchmarks(cuda::Context& ctx, const std::string& only_op);

}  // namespace prophet::gputest
