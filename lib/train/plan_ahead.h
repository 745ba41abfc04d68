// plan_ahead.h: Plan off the critical path (Pro-Prophet §4: Plan^{j+1}_l runs during A2A^j_l).
//
// Right after layer l's counts exchange in iteration j, observe() hands the counts to a planner thread, which
// computes layer l's placement for iteration j+1 (PolicyRunner::plan_next) while the main thread carries on with
// the all-to-all and the experts. placement(j+1, l) then returns it, waiting only if the planner is still busy
// (that wait is the plan's exposed time). With no plan in flight for (j, l) (the first iteration, a resume, an
// offline policy) it plans from the counts the runner kept, on the calling thread; both paths give the same
// placement, so the schedule never changes the numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "balance/placement.h"
#include "schedule/timeline.h"
#include "schedule/worker.h"
#include "train/policy_runner.h"

namespace prophet {

class PlanAhead {
  public:
    PlanAhead(const PolicyRunner& runner, int num_layers);
    Placement placement(int64_t iteration, int layer);
    void observe(int64_t iteration, int layer, const int64_t* counts);  // counts [D*E], read before it returns
    void set_timeline(OpTimeline* timeline) { timeline_ = timeline; }   // plan-lane spans (nullptr: off)

  private:
    struct Slot {
        int64_t iteration = -1;  // the iteration the slot's placement is for
        int64_t ticket = 0;
        Placement placement;     // written by the planner thread before its ticket completes
    };
    const PolicyRunner& runner_;
    OpTimeline* timeline_ = nullptr;
    std::vector<Slot> slots_;  // [L]
    OrderedWorker planner_{true};
};

}  // namespace prophet
