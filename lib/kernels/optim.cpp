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
#include "kernels/blas.h"  // cpu_features

namespace prophet {

namespace {

// The per-step scalars of one AdamW update, rounded to the element type once.
template <typename Float>
struct AdamWScalars {
    Float b1, b2, one_minus_b1, one_minus_b2, inv_bias1, inv_bias2, lr, wd, eps, scale;
};

// The reference element loop. Every vector path below performs the same operations in the same order (no FMA),
// so all paths give bit-identical results and a run does not depend on which one the CPU selects.
template <typename Float>
void adamw_scalar(Float* param, const Float* grad, Float* m, Float* v, size_t begin, size_t n,
                  const AdamWScalars<Float>& k) {
    for (size_t i = begin; i < n; i++) {
        const Float g = grad[i] * k.scale;
        const Float m_i = k.b1 * m[i] + k.one_minus_b1 * g;
        const Float v_i = k.b2 * v[i] + k.one_minus_b2 * g * g;
        m[i] = m_i;
        v[i] = v_i;
        const Float m_hat = m_i * k.inv_bias1;
        const Float v_hat = v_i * k.inv_bias2;
        param[i] -= k.lr * (m_hat / (std::sqrt(v_hat) + k.eps) + k.wd * param[i]);
    }
}

#ifdef PROPHET_ADAMW_SIMD
// AdamW touches every parameter each step (2.4M floats in the benchmark model), and GCC does not vectorize the
// scalar loop: std::sqrt may set errno. Explicit AVX-512 and AVX2 versions of the same arithmetic fix that;
// they run only when cpu_features() says the CPU (and OS) support them. fp-contract=off: GCC would otherwise fuse
// the mul+add intrinsics into FMAs, which round differently from the scalar loop.
// GCC 12 flags _mm512_sqrt_ps's internal _mm512_undefined_ps as maybe-uninitialized: a false positive
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"), optimize("fp-contract=off")))
size_t adamw_avx512(float* param, const float* grad, float* m, float* v, size_t n, const AdamWScalars<float>& k) {
    const __m512 b1 = _mm512_set1_ps(k.b1), b2 = _mm512_set1_ps(k.b2);
    const __m512 omb1 = _mm512_set1_ps(k.one_minus_b1), omb2 = _mm512_set1_ps(k.one_minus_b2);
    const __m512 ib1 = _mm512_set1_ps(k.inv_bias1), ib2 = _mm512_set1_ps(k.inv_bias2);
    const __m512 lr = _mm512_set1_ps(k.lr), wd = _mm512_set1_ps(k.wd), eps = _mm512_set1_ps(k.eps);
    const __m512 scale = _mm512_set1_ps(k.scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 g = _mm512_mul_ps(_mm512_loadu_ps(grad + i), scale);
        const __m512 m_i = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(omb1, g));
        const __m512 g2 = _mm512_mul_ps(_mm512_mul_ps(omb2, g), g);
        const __m512 v_i = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)), g2);
        _mm512_storeu_ps(m + i, m_i);
        _mm512_storeu_ps(v + i, v_i);
        const __m512 m_hat = _mm512_mul_ps(m_i, ib1);
        const __m512 v_hat = _mm512_mul_ps(v_i, ib2);
        const __m512 p = _mm512_loadu_ps(param + i);
        const __m512 denom = _mm512_add_ps(_mm512_sqrt_ps(v_hat), eps);
        const __m512 update = _mm512_add_ps(_mm512_div_ps(m_hat, denom), _mm512_mul_ps(wd, p));
        _mm512_storeu_ps(param + i, _mm512_sub_ps(p, _mm512_mul_ps(lr, update)));
    }
    return i;
}
#pragma GCC diagnostic pop

__attribute__((target("avx2"), optimize("fp-contract=off")))
size_t adamw_avx2(float* param, const float* grad, float* m, float* v, size_t n, const AdamWScalars<float>& k) {
    const __m256 b1 = _mm256_set1_ps(k.b1), b2 = _mm256_set1_ps(k.b2);
    const __m256 omb1 = _mm256_set1_ps(k.one_minus_b1), omb2 = _mm256_set1_ps(k.one_minus_b2);
    const __m256 ib1 = _mm256_set1_ps(k.inv_bias1), ib2 = _mm256_set1_ps(k.inv_bias2);
    const __m256 lr = _mm256_set1_ps(k.lr), wd = _mm256_set1_ps(k.wd), eps = _mm256_set1_ps(k.eps);
    const __m256 scale = _mm256_set1_ps(k.scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), scale);
        const __m256 m_i = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(omb1, g));
        const __m256 g2 = _mm256_mul_ps(_mm256_mul_ps(omb2, g), g);
        const __m256 v_i = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)), g2);
        _mm256_storeu_ps(m + i, m_i);
        _mm256_storeu_ps(v + i, v_i);
        const __m256 m_hat = _mm256_mul_ps(m_i, ib1);
        const __m256 v_hat = _mm256_mul_ps(v_i, ib2);
        const __m256 p = _mm256_loadu_ps(param + i);
        const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(v_hat), eps);
        const __m256 update = _mm256_add_ps(_mm256_div_ps(m_hat, denom), _mm256_mul_ps(wd, p));
        _mm256_storeu_ps(param + i, _mm256_sub_ps(p, _mm256_mul_ps(lr, update)));
    }
    return i;
}
#endif  // PROPHET_ADAMW_SIMD

}  // namespace

template <typename Float>
void adamw_update(Float* param, const Float* grad, Float* m, Float* v, size_t n, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step_t, double grad_scale) {
    PROPHET_ASSERT(step_t >= 1);
    // per-step scalars in double, then the element loop in Float
    const AdamWScalars<Float> k{Float(beta1),
                                Float(beta2),
                                Float(1.0 - beta1),
                                Float(1.0 - beta2),
                                Float(1.0 / (1.0 - std::pow(beta1, double(step_t)))),
                                Float(1.0 / (1.0 - std::pow(beta2, double(step_t)))),
                                Float(lr),
                                Float(weight_decay),
                                Float(eps),
                                Float(grad_scale)};
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
