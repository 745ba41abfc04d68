// bench_reference.cpp: the machine-speed reference of ci/bench-regress.sh: OpenBLAS's cblas_sgemm called
// directly (not through prophet's gemm() wrapper or blas_setup), so that a change to this project can never move
// the yardstick its timings are divided by. One thread.
//
//   ./build/bench/bench_reference
// prints, per shape (row-major, no transposes, the tiny model's GEMMs: [M,K] x [K,N]), the best of 5 blocks of
// >= 20 ms CPU time, by CPU time and by wall time, then one line
//   reference cpu_gflops=<median over shapes> wall_gflops=<median over shapes>
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>

namespace {

int64_t clock_ns(clockid_t id) {
    timespec ts;
    clock_gettime(id, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main() {
    openblas_set_num_threads(1);
    struct Shape {
        const char* what;
        int M, N, K;
    };
    // tiny model (V=256 T=32 C=64 F=128 B=8 E=4 K=2): 256 tokens
    const Shape shapes[] = {{"qkv fwd", 256, 192, 64}, {"expert w1 fwd", 128, 128, 64}, {"lm head", 256, 256, 64}};
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    std::vector<double> cpu_rates, wall_rates;
    std::printf("# bench_reference: cblas_sgemm, 1 thread, best of 5 blocks of >= 20 ms CPU time\n");
    for (const Shape& s : shapes) {
        std::vector<float> a(size_t(s.M) * s.K), b(size_t(s.K) * s.N), c(size_t(s.M) * s.N);
        for (float& x : a) x = normal(rng);
        for (float& x : b) x = normal(rng);
        double best_cpu = 0, best_wall = 0;
        for (int rep = 0; rep < 5; rep++) {
            int64_t iters = 0;
            const int64_t wall0 = clock_ns(CLOCK_MONOTONIC), cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            while (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0 < 20'000'000) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.M, s.N, s.K, 1.0f, a.data(), s.K, b.data(),
                            s.N, 0.0f, c.data(), s.N);
                iters++;
            }
            const double flop = 2.0 * s.M * s.N * s.K * double(iters);
            best_cpu = std::max(best_cpu, flop / double(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0));
            best_wall = std::max(best_wall, flop / double(clock_ns(CLOCK_MONOTONIC) - wall0));
        }
        cpu_rates.push_back(best_cpu);
        wall_rates.push_back(best_wall);
        std::printf("  %-14s M=%d N=%d K=%d cpu_gflops=%.2f wall_gflops=%.2f\n", s.what, s.M, s.N, s.K, best_cpu,
                    best_wall);
    }
    std::printf("reference cpu_gflops=%.4f wall_gflops=%.4f\n", median(cpu_rates), median(wall_rates));
    return 0;
}
