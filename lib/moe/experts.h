// experts.h: one expert's forward and backward on a contiguous block of rows (the sorted buffer of layout.h):
// expert(x) = gelu_tanh(x W1) W2, W1 [C,F], W2 [F,C], no biases -- the same GEMMs as LocalMoeExecutor.
#pragma once

namespace prophet {

// x [M,C]; w1 [C,F]; w2 [F,C]; pre [M,F], act [M,F], y [M,C] (overwrite; pre and act are kept for backward)
void moe_expert_forward(int M, int C, int F, const float* x, const float* w1, const float* w2, float* pre, float* act,
                        float* y);

// x [M,C], pre [M,F], act [M,F] from forward; dy [M,C]; dw1 (+=) [C,F], dw2 (+=) [F,C];
// dpre [M,F] scratch; dx [M,C] (overwrite)
void moe_expert_backward(int M, int C, int F, const float* x, const float* pre, const float* act, const float* dy,
                         const float* w1, const float* w2, float* dw1, float* dw2, float* dpre, float* dx);

}  // namespace prophet
