// engine.h: times a schedule's ops on D devices with in-order streams each (compute, comm, dense comm, shadow comm).
//
// Rule (exact for in-order streams, so no event queue is needed): ops are taken in issue order; a per-device op
// starts on device d at max(d's stream free, end of each dependency on d); a collective starts on every device at
// the max of that over all devices and ends together everywhere. A dependency on a collective reads its common
// end; a collective's dependency on a per-device op waits for it on every device. Units: seconds.
#pragma once

#include <vector>

#include "sim/schedule.h"

namespace prophet::sim {

struct EngineTimes {
    int num_devices = 0;
    std::vector<double> start;  // [ops * D] start of op i on device d at i*D + d (collectives: equal over d)
    std::vector<double> end;    // [ops * D]
};

// durations: [ops * D] seconds, >= 0; a collective reads device 0's entry.
EngineTimes run_engine(const std::vector<ScheduleOp>& ops, int num_devices, const std::vector<double>& durations);

}  // namespace prophet::sim
