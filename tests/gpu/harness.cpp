// harness.cpp: comparisons, random inputs, timing (harness.h).
#include "harness.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <functional>
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
    detail.precision(9);  // enough digits to tell floats one ulp apart
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

bool harness_self_check() {
    struct Expectation {
        const char* what;
        bool expected_ok;
        std::function<void(Case&)> run;
    };
    const std::vector<float> ref = {1.0f, -2.0f, 0.0f, 1e-3f};
    const std::vector<Expectation> cases = {
        {"equal floats pass exactly", true, [&](Case& c) { c.expect_close("x", ref, ref, kExact); }},
        {"a 1-ulp change fails exact", false,
         [&](Case& c) {
             auto g = ref;
             g[1] = std::nextafter(g[1], 0.0f);
             c.expect_close("x", ref, g, kExact);
         }},
        {"within atol + rtol|cpu| passes", true,
         [&](Case& c) {
             auto g = ref;
             g[0] += 1.5e-6f;  // allowed: 1e-6 + 1e-6 * 1
             c.expect_close("x", ref, g, {1e-6, 1e-6});
         }},
        {"just outside fails", false,
         [&](Case& c) {
             auto g = ref;
             g[2] += 2e-6f;  // allowed at 0: 1e-6
             c.expect_close("x", ref, g, {1e-6, 1e-6});
         }},
        {"a NaN fails", false,
         [&](Case& c) {
             auto g = ref;
             g[3] = std::nanf("");
             c.expect_close("x", ref, g, {1.0, 1.0});
         }},
        {"a size mismatch fails", false,
         [&](Case& c) { c.expect_close("x", ref, std::vector<float>(ref.begin(), ref.end() - 1), {1.0, 1.0}); }},
        {"a differing int fails", false, [&](Case& c) { c.expect_equal("i", {1, 2, 3}, {1, 2, 4}); }},
        {"equal ints pass", true, [&](Case& c) { c.expect_equal("i", {1, 2, 3}, {1, 2, 3}); }},
        {"a scalar outside rtol fails", false, [&](Case& c) { c.expect_close("s", 1.0, 1.0 + 2e-5, {0.0, 1e-5}); }},
    };
    bool all_right = true;
    for (const Expectation& e : cases) {
        Case c(std::string("self-check"));
        e.run(c);
        const bool right = c.ok() == e.expected_ok && c.checks() == 1;
        std::printf("%s self-check: %s (expected %s)\n", right ? "ok  " : "FAIL", e.what,
                    e.expected_ok ? "pass" : "fail");
        all_right = all_right && right;
    }
    return all_right;
}

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
