// engine.cpp: in-order multi-stream (schedule.h Resource) list scheduling of one iteration's ops.
#include "sim/engine.h"

#include <algorithm>

#include "core/error.h"

namespace prophet::sim {

EngineTimes run_engine(const std::vector<ScheduleOp>& ops, int num_devices, const std::vector<double>& durations) {
    const int D = num_devices;
    const size_t n = ops.size();
    PROPHET_ASSERT(D >= 1 && durations.size() == n * static_cast<size_t>(D));
    EngineTimes t;
    t.num_devices = D;
    t.start.assign(n * D, 0.0);
    t.end.assign(n * D, 0.0);
    std::vector<double> free_at(static_cast<size_t>(D) * kNumResources, 0.0);  // [D][stream]
    auto ready_on = [&](const ScheduleOp& op, int d) {
        double ready = free_at[static_cast<size_t>(d) * kNumResources + static_cast<int>(op.resource)];
        for (int dep : op.deps) ready = std::max(ready, t.end[static_cast<size_t>(dep) * D + d]);
        return ready;
    };
    for (size_t i = 0; i < n; ++i) {
        const ScheduleOp& op = ops[i];
        const int stream = static_cast<int>(op.resource);
        if (op.collective) {
            double ready = 0.0;
            for (int d = 0; d < D; ++d) ready = std::max(ready, ready_on(op, d));
            const double duration = durations[i * D];
            PROPHET_ASSERT_MSG(duration >= 0, std::string("negative duration of ") + op_kind_name(op.kind));
            for (int d = 0; d < D; ++d) {
                t.start[i * D + d] = ready;
                t.end[i * D + d] = ready + duration;
                free_at[static_cast<size_t>(d) * kNumResources + stream] = ready + duration;
            }
        } else {
            for (int d = 0; d < D; ++d) {
                const double ready = ready_on(op, d);
                const double duration = durations[i * D + d];
                PROPHET_ASSERT_MSG(duration >= 0, std::string("negative duration of ") + op_kind_name(op.kind));
                t.start[i * D + d] = ready;
                t.end[i * D + d] = ready + duration;
                free_at[static_cast<size_t>(d) * kNumResources + stream] = ready + duration;
            }
        }
    }
    return t;
}

}  // namespace prophet::sim
