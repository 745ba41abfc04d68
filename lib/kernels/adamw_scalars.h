// adamw_scalars.h: the per-step scalars of one AdamW update and its element update, written once for the CPU
// reference loop (kernels/optim.cpp) and the CUDA kernel (cuda/loss_optim.cu). Plain C++, no CUDA runtime and no
// BLAS, so nvcc and the host compiler both include it.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define PROPHET_HOST_DEVICE __host__ __device__
#else
#define PROPHET_HOST_DEVICE
#endif

namespace prophet {

// The per-step scalars of one AdamW update, rounded to the element type once.
template <typename Float>
struct AdamWScalars {
    Float b1, b2, one_minus_b1, one_minus_b2, inv_bias1, inv_bias2, lr, wd, eps, scale;
};

// Computed in double (the bias corrections 1 / (1 - beta^t) at step t >= 1), then each rounded to Float.
template <typename Float>
AdamWScalars<Float> adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay, long step_t,
                                  double grad_scale) {
    const auto f = [](double x) { return static_cast<Float>(x); };
    const double t = static_cast<double>(step_t);
    return AdamWScalars<Float>{f(beta1),
                               f(beta2),
                               f(1.0 - beta1),
                               f(1.0 - beta2),
                               f(1.0 / (1.0 - std::pow(beta1, t))),
                               f(1.0 / (1.0 - std::pow(beta2, t))),
                               f(lr),
                               f(weight_decay),
                               f(eps),
                               f(grad_scale)};
}

// One element's update: gradient g (unscaled), moments m and v and the parameter updated in place. The CPU's
// vector paths (optim.cpp) perform the same operations in the same order, without FMA.
template <typename Float>
PROPHET_HOST_DEVICE inline void adamw_element(Float& param, Float grad, Float& m, Float& v,
                                              const AdamWScalars<Float>& k) {
    const Float g = grad * k.scale;
    const Float m_i = k.b1 * m + k.one_minus_b1 * g;
    const Float v_i = k.b2 * v + k.one_minus_b2 * g * g;
    m = m_i;
    v = v_i;
    const Float m_hat = m_i * k.inv_bias1;
    const Float v_hat = v_i * k.inv_bias2;
    param -= k.lr * (m_hat / (std::sqrt(v_hat) + k.eps) + k.wd * param);
}

}  // namespace prophet
