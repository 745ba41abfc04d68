// plan_ahead.cpp: the planner thread (see plan_ahead.h).
#include "train/plan_ahead.h"

#include "core/error.h"
#include "core/timer.h"

namespace prophet {

PlanAhead::PlanAhead(const PolicyRunner& runner, int num_layers, int num_devices, int num_experts)
    : runner_(runner), D_(num_devices), E_(num_experts), slots_(num_layers) {}

Placement PlanAhead::placement(int64_t iteration, int layer) {
    PROPHET_ASSERT(layer >= 0 && layer < (int)slots_.size());
    Slot& slot = slots_[layer];
    if (slot.iteration == iteration && slot.ticket != 0) {
        planner_.wait(slot.ticket);
        return slot.placement;
    }
    return runner_.plan_from_previous(layer);
}

void PlanAhead::observe(int64_t iteration, int layer, const int64_t* counts) {
    PROPHET_ASSERT(layer >= 0 && layer < (int)slots_.size());
    if (!runner_.plans_online()) return;
    Slot& slot = slots_[layer];
    slot.iteration = iteration + 1;
    std::vector<int64_t> copy(counts, counts + (size_t)D_ * E_);
    slot.ticket = planner_.submit([this, &slot, layer, copy = std::move(copy)] {
        const int64_t t0 = now_ns();
        slot.placement = runner_.plan_next(layer, copy.data());
        if (timeline_ != nullptr) timeline_->add(OpKind::kPlan, OpLane::kPlan, layer, 0, t0, now_ns());
    });
}

}  // namespace prophet
