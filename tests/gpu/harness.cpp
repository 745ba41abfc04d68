// harness.cpp: comparisons, random inputs, timing (harness.h).
#include "harness.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "cuda/check.h"

namespace prophet::gputest {

void Case::report(const std::string& what, bool pass, const std::string& detail) {
    checks_++;
    if (!pass) failures_++;
    std::printf("  %-4s %-14s %-28s %s\n", pass ? "ok" : "FAIL", op_.c_str(), what.c_str(), detail.c_str());
}

void Case::expect_close(const std::string& what, const std::vector<float>& cpu, const std::vector<float>& gpu,
                        Tolerance tol) {
    std::ostringstream detail;
    if (cpu.size() != gpu.size()) {
        detail << "size cpu " << cpu.size() << " gpu " << gpu.size();
        report(what, false, detail.str());
        return;
    }
    // worst: the largest |diff| / (atol + rtol |cpu|); pass when <= 1 (a NaN anywhere fails)
    double max_abs = 0.0, worst = 0.0;
    size_t worst_i = 0, bad = 0;
    for (size_t i = 0; i < cpu.size(); i++) {
        const double diff = std::fabs(double(gpu[i]) - double(cpu[i]));
        const double allowed = tol.atol + tol.rtol * std::fabs(double(cpu[i]));
        const bool good = diff <= allowed;  // false for NaN
        double ratio = allowed > 0 ? diff / allowed : (diff > 0 ? INFINITY : 0.0);
        if (std::isnan(diff)) ratio = INFINITY;
        if (!good) bad++;
        if (ratio > worst || (!good && bad == 1)) worst = ratio, worst_i = i;
        if (!(diff <= max_abs)) max_abs = diff;  // keeps a NaN
    }
    detail << "n " << cpu.size() << "  max|d| " << max_abs << "  worst/allowed " << worst << "  (atol " << tol.atol
           << ", rtol " << tol.rtol << ")";
    if (bad > 0)
        detail << "  " << bad << " bad, e.g. [" << worst_i << "] cpu " << cpu[worst_i] << " gpu " << gpu[worst_i];
    report(what, bad == 0, detail.str());
}

void Case::expect_close(const std::string& what, double cpu, double gpu, Tolerance tol) {
    const double diff = std::fabs(gpu - cpu);
    const bool pass = diff <= tol.atol + tol.rtol * std::fabs(cpu);
    std::ostringstream detail;
    detail.precision(12);
    detail << "cpu " << cpu << "  gpu " << gpu << "  |d| " << diff << "  (atol " << tol.atol << ", rtol " << tol.rtol
           << ")";
    report(what, pass, detail.str());
}

void Case::expect_equal(const std::string& what, const std::vector<int>& cpu, const std::vector<int>& gpu) {
    std::ostringstream detail;
    size_t bad = 0, first = 0;
    if (cpu.size() != gpu.size()) {
        detail << "size cpu " << cpu.size() << " gpu " << gpu.size();
        report(what, false, detail.str());
        return;
    }
    for (size_t i = 0; i < cpu.size(); i++) {
        if (cpu[i] != gpu[i] && bad++ == 0) first = i;
    }
    detail << "n " << cpu.size() << " exact";
    if (bad > 0)
        detail << "  " << bad << " differ, first [" << first << "] cpu " << cpu[first] << " gpu " << gpu[first];
    report(what, bad == 0, detail.str());
}

void Case::expect_true(const std::string& what, bool cond, const std::string& detail) { report(what, cond, detail); }

std::vector<float> random_normal(Rng& rng, size_t n, double scale) {
    std::vector<float> v(n);
    for (auto& x : v) x = float(rng.normal() * scale);
    return v;
}

std::vector<int> random_ints(Rng& rng, size_t n, int bound) {
    std::vector<int> v(n);
    for (auto& x : v) x = int(rng.below(uint64_t(bound)));
    return v;
}

double time_ms(cuda::Context& ctx, const std::function<void()>& fn, int warmup, int iters) {
    for (int i = 0; i < warmup; i++) fn();
    cudaEvent_t start, stop;
    PROPHET_CUDA_CHECK(cudaEventCreate(&start));
    PROPHET_CUDA_CHECK(cudaEventCreate(&stop));
    PROPHET_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
    for (int i = 0; i < iters; i++) fn();
    PROPHET_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
    ctx.synchronize();
    float ms = 0.0f;
    PROPHET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    PROPHET_CUDA_CHECK(cudaEventDestroy(start));
    PROPHET_CUDA_CHECK(cudaEventDestroy(stop));
    return double(ms) / iters;
}

}  // namespace prophet::gputest
