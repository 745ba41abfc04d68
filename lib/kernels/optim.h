// optim.h: the optimizer-side kernels: AdamW update, gradient sum of squares and clip scale, LR schedule.
//
// All of them work on flat spans so the model can run them per tensor (weight decay and ownership are per-tensor
// flags) and a distributed trainer can run them on just the spans it owns.
#pragma once

#include <cstddef>

namespace prophet {

// AdamW hyper-parameters (ARCHITECTURE.md: beta1 0.9, beta2 0.95, eps 1e-8; decay on matrices only, which the
// caller applies by passing weight_decay = 0 for vectors).
struct AdamWConfig {
    double beta1 = 0.9;
    double beta2 = 0.95;
    double eps = 1e-8;
    double weight_decay = 0.1;
};

// One AdamW step on n elements, decoupled weight decay (Loshchilov & Hutter; torch.optim.AdamW):
//   g = grad * grad_scale;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   param -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + weight_decay * param )
// param [n], grad [n], m [n], v [n] (m and v start at 0); step_t is 1-based; grad_scale carries the clip
// factor (and any 1/num_microbatches) so no separate pass over the gradients is needed.
template <typename Float>
void adamw_update(Float* param, const Float* grad, Float* m, Float* v, size_t n, double lr, double beta1,
                  double beta2, double eps, double weight_decay, long step_t, double grad_scale);

// sum of x[i]^2 over n elements, accumulated in double. grad norm = sqrt(sum over all tensors); in a
// distributed run each rank sums what it owns and the caller all-reduces the sums before the sqrt.
template <typename Float>
double sum_squares(const Float* x, size_t n);

// The factor that clips a gradient of norm grad_norm to max_norm (torch.nn.utils.clip_grad_norm_):
// min(1, max_norm / (grad_norm + 1e-6)); max_norm <= 0 disables clipping (returns 1).
double grad_clip_scale(double grad_norm, double max_norm);

// Linear warmup from max_lr/warmup_steps to max_lr over warmup_steps, then cosine decay to min_lr at
// total_steps, min_lr after. step is 0-based.
struct LrSchedule {
    double max_lr = 1e-3;
    double min_lr = 1e-4;
    long warmup_steps = 0;
    long total_steps = 1;
};
double lr_at_step(const LrSchedule& schedule, long step);

}  // namespace prophet
