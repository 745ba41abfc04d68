// experts.cpp: expert forward/backward on a block of rows (see experts.h).
#include "moe/experts.h"

#include "kernels/blas.h"
#include "kernels/kernels.h"

namespace prophet {

void moe_expert_forward(int M, int C, int F, const float* x, const float* w1, const float* w2, float* pre, float* act,
                        float* y) {
    if (M == 0) return;
    gemm<float>(false, false, M, F, C, 1.0f, x, C, w1, F, 0.0f, pre, F);
    gelu_forward(act, pre, (size_t)M * F);
    gemm<float>(false, false, M, C, F, 1.0f, act, F, w2, C, 0.0f, y, C);
}

void moe_expert_backward(int M, int C, int F, const float* x, const float* pre, const float* act, const float* dy,
                         const float* w1, const float* w2, float* dw1, float* dw2, float* dpre, float* dx) {
    if (M == 0) return;
    // y = act W2: d act = dy W2^T, dW2 += act^T dy
    gemm<float>(false, true, M, F, C, 1.0f, dy, C, w2, C, 0.0f, dpre, F);
    gemm<float>(true, false, F, C, M, 1.0f, act, F, dy, C, 1.0f, dw2, C);
    gelu_backward(dpre, pre, dpre, (size_t)M * F);
    // pre = x W1: dW1 += x^T dpre, dx = dpre W1^T
    gemm<float>(true, false, C, F, M, 1.0f, x, C, dpre, F, 1.0f, dw1, F);
    gemm<float>(false, true, M, C, F, 1.0f, dpre, F, w1, F, 0.0f, dx, C);
}

}  // namespace prophet
