// adamw_scalars.h: the per-step scalars of one AdamW update, written once for the CPU element loops
// (kernels/optim.cpp) and the CUDA kernel (cuda/loss_optim.cu). Plain C++, no CUDA and no BLAS, so nvcc and the
// host compiler both include it.
#pragma once

#include <cmath>

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

}  // namespace prophet
