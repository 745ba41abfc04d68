// timeline.cpp: OpTimeline and its summaries (see timeline.h).
#include "schedule/timeline.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "core/enum_table.h"
#include "core/error.h"
#include "core/timer.h"

namespace prophet {

namespace {
// every kind but kCount, by position (the names stored in timeline rows)
constexpr const char* kOpKindNames[] = {
    "data", "embed",      "attn",     "gate",     "dispatch",  "fec",          "combine",   "pack",        "unpack",
    "head", "head_bwd",   "gate_bwd", "attn_bwd", "embed_bwd", "dispatch_bwd", "bec",       "combine_bwd", "trans",
    "agg",  "trans_wait", "agg_wait", "plan",     "plan_wait", "layout",       "allreduce", "optimizer",   "stats"};
static_assert(std::size(kOpKindNames) == static_cast<size_t>(OpKind::kCount), "a kind without a name");
constexpr EnumName<OpLane> kOpLaneNames[] = {
    {OpLane::kCompute, "compute"}, {OpLane::kComm, "comm"}, {OpLane::kPlan, "plan"}};
}  // namespace

const char* op_kind_name(OpKind kind) { return enum_name(kOpKindNames, kind); }

const char* op_lane_name(OpLane lane) { return enum_name(kOpLaneNames, lane); }

void OpTimeline::add(OpKind kind, OpLane lane, int block, int part, int64_t start_ns, int64_t end_ns) {
    std::lock_guard lock(mutex_);
    ops_.push_back(OpRecord{kind, lane, (int16_t)block, (int8_t)part, start_ns, end_ns});
}

void mark_compute(OpTimeline* timeline, OpKind kind, int block, int64_t* cursor) {
    if (timeline == nullptr) return;
    const int64_t now = now_ns();
    timeline->add(kind, OpLane::kCompute, block, 0, *cursor, now);
    *cursor = now;
}

std::vector<OpRecord> OpTimeline::take() {
    std::lock_guard lock(mutex_);
    std::vector<OpRecord> out;
    out.swap(ops_);
    return out;
}

int64_t timeline_remainder_ns(const std::vector<OpRecord>& ops, int64_t step_start_ns, int64_t step_end_ns) {
    PROPHET_ASSERT(step_end_ns >= step_start_ns);
    std::vector<std::pair<int64_t, int64_t>> spans;  // compute-lane [start, end) clipped to the step
    for (const OpRecord& op : ops) {
        if (op.lane != OpLane::kCompute) continue;
        const int64_t a = std::max(op.start_ns, step_start_ns), b = std::min(op.end_ns, step_end_ns);
        if (b > a) spans.emplace_back(a, b);
    }
    std::sort(spans.begin(), spans.end());
    int64_t covered = 0, reach = step_start_ns;  // reach: the end of the union so far
    for (const auto& [a, b] : spans) {
        if (b <= reach) continue;
        covered += b - std::max(a, reach);
        reach = b;
    }
    return (step_end_ns - step_start_ns) - covered;
}

std::string timeline_json(const std::vector<OpRecord>& ops, int64_t origin_ns) {
    std::string out = "[";
    char buf[160];
    for (size_t i = 0; i < ops.size(); i++) {
        const OpRecord& op = ops[i];
        std::snprintf(buf, sizeof buf, "%s[\"%s\",\"%s\",%d,%d,%.3f,%.3f]", i ? "," : "", op_kind_name(op.kind),
                      op_lane_name(op.lane), (int)op.block, (int)op.part, (double)(op.start_ns - origin_ns) * 1e-3,
                      (double)(op.end_ns - origin_ns) * 1e-3);
        out += buf;
    }
    return out + "]";
}

}  // namespace prophet
