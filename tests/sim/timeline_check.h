// timeline_check.h: compares a simulated timeline with hand-computed (start, end) pairs, op by op.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/simulator.h"

namespace prophet::sim::timeline_check {

struct Expected {
    OpKind kind;
    int layer;
    OpPart part;
    std::vector<std::pair<double, double>> times;  // one pair: every device; else one per device
    int occurrence = 0;  // the n-th op with this kind, layer and part (the all-reduce buckets share layer -1)
};

// index of the n-th op with (kind, layer, part), or -1
inline int find_nth(const Schedule& s, OpKind kind, int layer, OpPart part, int n) {
    for (size_t i = 0; i < s.ops.size(); ++i)
        if (s.ops[i].kind == kind && s.ops[i].layer == layer && s.ops[i].part == part && n-- == 0)
            return static_cast<int>(i);
    return -1;
}

// Every op of the schedule appears exactly once in `expected`, and every device's start and end match.
inline void expect_timeline(const SimResult& r, const std::vector<Expected>& expected) {
    const int D = r.num_devices;
    const size_t n_ops = r.schedule.ops.size();
    ASSERT_EQ(r.timeline.size(), n_ops * D);
    std::set<int> seen;
    for (const Expected& e : expected) {
        const std::string tag =
            std::string(op_kind_name(e.kind)) + "[" + std::to_string(e.layer) + "]." + op_part_name(e.part) + "#" +
            std::to_string(e.occurrence);
        const int op = find_nth(r.schedule, e.kind, e.layer, e.part, e.occurrence);
        ASSERT_GE(op, 0) << tag << " is not in the schedule";
        EXPECT_TRUE(seen.insert(op).second) << tag << " listed twice";
        for (int d = 0; d < D; ++d) {
            const TimelineEntry& t = r.timeline[static_cast<size_t>(op) * D + d];
            ASSERT_EQ(t.op, op);
            ASSERT_EQ(t.device, d);
            const auto& want = e.times.size() == 1 ? e.times[0] : e.times[d];
            EXPECT_DOUBLE_EQ(t.start_s, want.first) << tag << " start on device " << d;
            EXPECT_DOUBLE_EQ(t.end_s, want.second) << tag << " end on device " << d;
        }
    }
    EXPECT_EQ(seen.size(), n_ops) << "some ops of the schedule were not checked";
}

}  // namespace prophet::sim::timeline_check
