// optim.cpp: AdamW, sum of squares, clip scale, LR schedule (see optim.h).
#include "kernels/optim.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define PROPHET_ADAMW_SIMD 1
#endif

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/adamw_scalars.h"
#include "kernels/blas.h"  // cpu_features

namespace prophet {

namespace {

// The reference element loop. Every vector path below performs the same operations in the same order (no FMA),
// so all paths give bit-identical results and a run does not depend on which one the CPU selects.
template <typename Float>
void adamw_scalar(Float* param, const Float* grad, Float* m, Float* v, size_t begin, size_t n,
                  const AdamWScalars<Float>& k) {
    for (size_t i = begin; i < n; i++) adamw_element(param[i], grad[i], m[i], v[i], k);
}

#ifdef PROPHET_ADAMW_SIMD
// AdamW touches every parameter each step (2.4M floats in the benchmark model), and GCC does not vectorize the
// scalar loop: std::sqrt may set errno. Explicit AVX-512 and AVX2 versions of the same arithmetic fix that;
// they run only when cpu_features() says the CPU (and OS) support them. fp-contract=off: GCC would otherwise fuse
// the mul+add intrinsics into FMAs, which round differently from the scalar loop.
//
// The loop is written once (adamw_lanes) over an instruction set's operations (Avx512, Avx2: one intrinsic
// each). adamw_lanes carries no target attribute and is always inlined into adamw_avx512 / adamw_avx2, so it
// is compiled for their instruction set; GCC then inlines the operations (same target) into them.
// -Wpsabi: adamw_lanes passes 256/512-bit vectors; it never exists as a call, so the ABI note does not apply.
// -Wmaybe-uninitialized: GCC 12 flags _mm512_sqrt_ps's internal _mm512_undefined_ps, a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// An instruction set's operations for adamw_lanes, one intrinsic each: Name::Vec holds kLanes floats, and
// PREFIX##_add_ps is its add (_mm512_add_ps, _mm256_add_ps).
#define PROPHET_ADAMW_ISA(Name, isa, VecType, lanes, PREFIX)                                          \
    struct Name {                                                                                     \
        using Vec = VecType;                                                                          \
        static constexpr size_t kLanes = lanes;                                                       \
        __attribute__((target(isa))) static Vec set1(float x) { return PREFIX##_set1_ps(x); }         \
        __attribute__((target(isa))) static Vec load(const float* p) { return PREFIX##_loadu_ps(p); } \
        __attribute__((target(isa))) static void store(float* p, Vec x) { PREFIX##_storeu_ps(p, x); } \
        __attribute__((target(isa))) static Vec add(Vec a, Vec b) { return PREFIX##_add_ps(a, b); }   \
        __attribute__((target(isa))) static Vec sub(Vec a, Vec b) { return PREFIX##_sub_ps(a, b); }   \
        __attribute__((target(isa))) static Vec mul(Vec a, Vec b) { return PREFIX##_mul_ps(a, b); }   \
        __attribute__((target(isa))) static Vec div(Vec a, Vec b) { return PREFIX##_div_ps(a, b); }   \
        __attribute__((target(isa))) static Vec sqrt(Vec a) { return PREFIX##_sqrt_ps(a); }           \
    };
PROPHET_ADAMW_ISA(Avx512, "avx512f", __m512, 16, _mm512)
PROPHET_ADAMW_ISA(Avx2, "avx2", __m256, 8, _mm256)
#undef PROPHET_ADAMW_ISA

// adamw_scalar's operations, Isa::kLanes elements at a time; returns how many elements it did (a multiple of kLanes)
template <typename Isa>
__attribute__((always_inline)) inline size_t adamw_lanes(float* param, const float* grad, float* m, float* v, size_t n,
                                                         const AdamWScalars<float>& k) {
    using Vec = typename Isa::Vec;
    const Vec b1 = Isa::set1(k.b1), b2 = Isa::set1(k.b2);
    const Vec omb1 = Isa::set1(k.one_minus_b1), omb2 = Isa::set1(k.one_minus_b2);
    const Vec ib1 = Isa::set1(k.inv_bias1), ib2 = Isa::set1(k.inv_bias2);
    const Vec lr = Isa::set1(k.lr), wd = Isa::set1(k.wd), eps = Isa::set1(k.eps);
    const Vec scale = Isa::set1(k.scale);
    size_t i = 0;
    for (; i + Isa::kLanes <= n; i += Isa::kLanes) {
        const Vec g = Isa::mul(Isa::load(grad + i), scale);
        const Vec m_i = Isa::add(Isa::mul(b1, Isa::load(m + i)), Isa::mul(omb1, g));
        const Vec g2 = Isa::mul(Isa::mul(omb2, g), g);
        const Vec v_i = Isa::add(Isa::mul(b2, Isa::load(v + i)), g2);
        Isa::store(m + i, m_i);
        Isa::store(v + i, v_i);
        const Vec m_hat = Isa::mul(m_i, ib1);
        const Vec v_hat = Isa::mul(v_i, ib2);
        const Vec p = Isa::load(param + i);
        const Vec denom = Isa::add(Isa::sqrt(v_hat), eps);
        const Vec update = Isa::add(Isa::div(m_hat, denom), Isa::mul(wd, p));
        Isa::store(param + i, Isa::sub(p, Isa::mul(lr, update)));
    }
    return i;
}

__attribute__((target("avx512f"), optimize("fp-contract=off"))) size_t adamw_avx512(float* param, const float* grad,
                                                                                    float* m, float* v, size_t n,
                                                                                    const AdamWScalars<float>& k) {
    return adamw_lanes<Avx512>(param, grad, m, v, n, k);
}

__attribute__((target("avx2"), optimize("fp-contract=off")))
size_t adamw_avx2(float* param, const float* grad, float* m, float* v, size_t n, const AdamWScalars<float>& k) {
    return adamw_lanes<Avx2>(param, grad, m, v, n, k);
}
#pragma GCC diagnostic pop
#endif  // PROPHET_ADAMW_SIMD

}  // namespace

template <typename Float>
void adamw_update(Float* param, const Float* grad, Float* m, Float* v, size_t n, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step_t, double grad_scale) {
    PROPHET_ASSERT(step_t >= 1);
    // per-step scalars in double, then the element loop in Float
    const AdamWScalars<Float> k = adamw_scalars<Float>(lr, beta1, beta2, eps, weight_decay, step_t, grad_scale);
    size_t done = 0;
#ifdef PROPHET_ADAMW_SIMD
    if constexpr (std::is_same_v<Float, float>) {
        static const CpuFeatures cpu = cpu_features();
        if (cpu.avx512) {
            done = adamw_avx512(param, grad, m, v, n, k);
        } else if (cpu.avx2_fma) {
            done = adamw_avx2(param, grad, m, v, n, k);
        }
    }
#endif
    adamw_scalar(param, grad, m, v, done, n, k);  // the tail, or everything without a vector path
}

template <typename Float>
double sum_squares(const Float* x, size_t n) {
    // four partial sums: independent dependency chains, and the order is fixed so the result is reproducible
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += double(x[i]) * double(x[i]);
        s1 += double(x[i + 1]) * double(x[i + 1]);
        s2 += double(x[i + 2]) * double(x[i + 2]);
        s3 += double(x[i + 3]) * double(x[i + 3]);
    }
    for (; i < n; i++) s0 += double(x[i]) * double(x[i]);
    return (s0 + s1) + (s2 + s3);
}

double grad_clip_scale(double grad_norm, double max_norm) {
    if (max_norm <= 0.0) return 1.0;
    return std::min(1.0, max_norm / (grad_norm + 1e-6));
}

double lr_at_step(const LrSchedule& schedule, long step) {
    if (step < schedule.warmup_steps) return schedule.max_lr * double(step + 1) / double(schedule.warmup_steps);
    if (step >= schedule.total_steps) return schedule.min_lr;
    const long decay_steps = schedule.total_steps - schedule.warmup_steps;
    const double ratio = decay_steps > 0 ? double(step - schedule.warmup_steps) / double(decay_steps) : 1.0;
    const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));  // 1 -> 0
    return schedule.min_lr + coeff * (schedule.max_lr - schedule.min_lr);
}

template void adamw_update<float>(float*, const float*, float*, float*, size_t, double, double, double, double, double,
                                  long, double);
template void adamw_update<double>(double*, const double*, double*, double*, size_t, double, double, double, double,
                                   double, long, double);
template double sum_squares<float>(const float*, size_t);
template double sum_squares<double>(const double*, size_t);

}  // namespace prophet
