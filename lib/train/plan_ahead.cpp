// plan_ahead.cpp: the planner thread (see plan_ahead.h).
#include "train/plan_ahead.h"

#include "core/error.h"
#include "core/timer.h"

namespace prophet {

PlanAhead::PlanAhead(const PolicyRunner& runner, int num_layers) : runner_(runner), slots_(num_layers) {}

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
    // here, on the main thread: end_iteration may update the forecast while the planner thread plans
    std::vector<int64_t> planning = runner_.next_planning_counts(layer, counts);
    slot.ticket = planner_.submit([this, &slot, layer, planning = std::move(planning)] {
        const int64_t t0 = now_ns();
        slot.placement = runner_.plan_next(layer, planning.data());
        if (timeline_ != nullptr) timeline_->add(OpKind::kPlan, OpLane::kPlan, layer, 0, t0, now_ns());
    });
}

}  // namespace prophet
