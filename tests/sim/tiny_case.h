// tiny_case.h: the D = 2, E = 2 trace the hand-computed timelines share (test_timeline.cpp,
// test_fastermoe_schedule.cpp), with the unit cost model (balance_fixtures.h unit_cost_model).
#pragma once

#include <cstdint>
#include <vector>

#include "balance/placement.h"
#include "balance/evaluate.h"  // TraceView

namespace prophet::sim::tiny_case {

// device 0 routes 3 tokens to e0 and 5 to e1; device 1 routes 1 to e0 and 2 to e1 (every layer)
inline const std::vector<int64_t> kCounts = {3, 5, 1, 2};

struct Tiny {
    std::vector<int64_t> counts;  // [1][L][2][2]
    TraceView view;
    explicit Tiny(int L) {
        for (int l = 0; l < L; ++l) counts.insert(counts.end(), kCounts.begin(), kCounts.end());
        view.counts = counts.data();
        view.num_iterations = 1;
        view.num_layers = L;
        view.num_devices = 2;
        view.num_experts = 2;
    }
};

inline Placement replica_e1_on_d0() {
    Placement p = Placement::make_static(2, 2);
    p.add_replica(1, 0);  // H = {9, 2}, R = {1, 0}: a2a 1 s, FEC {9, 2} s, Trans = Agg = 2 B / (2 * B/s)
    return p;
}

}  // namespace prophet::sim::tiny_case
