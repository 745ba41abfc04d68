// replay.cpp: the recorded step's op DAG and its timing (see replay.h).
#include "sim/replay.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <tuple>

#include "core/error.h"
#include "store/store.h"

namespace prophet::sim {

namespace {

prophet::OpKind kind_from_name(const std::string& name, const std::string& where) {
    for (int k = 0; k < static_cast<int>(prophet::OpKind::kCount); ++k)
        if (name == prophet::op_kind_name(static_cast<prophet::OpKind>(k))) return static_cast<prophet::OpKind>(k);
    throw_input_error(where, "unknown op kind \"" + name + "\" in a timeline row",
                      "record the run with this prophet version (schedule/timeline.h lists the kinds)");
}

prophet::OpLane lane_from_name(const std::string& name, const std::string& where) {
    for (prophet::OpLane lane : {prophet::OpLane::kCompute, prophet::OpLane::kComm, prophet::OpLane::kPlan})
        if (name == prophet::op_lane_name(lane)) return lane;
    throw_input_error(where, "unknown lane \"" + name + "\" in a timeline row", "allowed: compute, comm, plan");
}

bool is_transfer(prophet::OpKind kind) { return kind == prophet::OpKind::kTrans || kind == prophet::OpKind::kAgg; }

// false for a wait's dependency on the op it awaits: the wait ends with it, with no lead after it
bool lead_applies(const ReplayGraph& g, int op, int dep) {
    return !(g.ops[op].lane == prophet::OpLane::kCompute && is_wait_kind(g.ops[op].kind) &&
             g.ops[dep].lane != prophet::OpLane::kCompute);
}

// the lane a wait waits on, and the kind it waits for
std::pair<prophet::OpLane, prophet::OpKind> awaited(prophet::OpKind wait) {
    switch (wait) {
        case prophet::OpKind::kTransWait: return {prophet::OpLane::kComm, prophet::OpKind::kTrans};
        case prophet::OpKind::kAggWait: return {prophet::OpLane::kComm, prophet::OpKind::kAgg};
        default: return {prophet::OpLane::kPlan, prophet::OpKind::kPlan};
    }
}

}  // namespace

bool is_collective_kind(prophet::OpKind kind) {
    switch (kind) {
        case prophet::OpKind::kDispatch:
        case prophet::OpKind::kCombine:
        case prophet::OpKind::kDispatchBwd:
        case prophet::OpKind::kCombineBwd:
        case prophet::OpKind::kAllReduce:
        case prophet::OpKind::kOptimizer:
        case prophet::OpKind::kStats:
        case prophet::OpKind::kTrans:
        case prophet::OpKind::kAgg:
        case prophet::OpKind::kLayout: return true;
        default: return false;
    }
}

bool is_wait_kind(prophet::OpKind kind) {
    return kind == prophet::OpKind::kTransWait || kind == prophet::OpKind::kAggWait || kind == prophet::OpKind::kPlanWait;
}

std::vector<ReplayOp> parse_timeline_payload(const std::string& json, int rank, const std::string& where) {
    nlohmann::json rows;
    try {
        rows = nlohmann::json::parse(json);
    } catch (const nlohmann::json::exception& e) {
        throw_input_error(where, std::string("the timeline payload is not JSON: ") + e.what(),
                          "re-record the run with prophet train --timeline");
    }
    if (!rows.is_array()) throw_input_error(where, "the timeline payload is not an array", "re-record the run");
    std::vector<ReplayOp> ops;
    ops.reserve(rows.size());
    for (const nlohmann::json& row : rows) {
        if (!row.is_array() || row.size() != 6 || !row[0].is_string() || !row[1].is_string() ||
            !row[2].is_number() || !row[3].is_number() || !row[4].is_number() || !row[5].is_number())
            throw_input_error(where, "timeline row " + row.dump() + " is not [kind, lane, block, part, start_us, end_us]",
                              "re-record the run with prophet train --timeline");
        ReplayOp op;
        op.kind = kind_from_name(row[0].get<std::string>(), where);
        op.lane = lane_from_name(row[1].get<std::string>(), where);
        op.block = row[2].get<int>();
        op.part = row[3].get<int>();
        op.rank = rank;
        op.start_us = row[4].get<double>();
        op.end_us = row[5].get<double>();
        if (op.end_us < op.start_us)
            throw_input_error(where, "timeline row " + row.dump() + " ends before it starts", "re-record the run");
        ops.push_back(op);
    }
    return ops;
}

namespace {

using LaneOps = std::vector<std::vector<std::vector<int>>>;  // [rank][lane] op indices in lane order
using UnitKey = std::tuple<int, int, int, int, int>;         // (lane, kind, block, part, occurrence)

// Each op's lane (ops sorted by rank, lane, start), and its dependence on the op before it on that lane.
LaneOps order_lanes(ReplayGraph& g, int num_ranks, const std::string& where) {
    const int n = static_cast<int>(g.ops.size());
    LaneOps lanes(num_ranks, std::vector<std::vector<int>>(3));
    for (int i = 0; i < n; ++i) {
        const ReplayOp& op = g.ops[i];
        if (op.rank < 0 || op.rank >= num_ranks)
            throw_input_error(where, "an op of rank " + std::to_string(op.rank) + " in a run of " +
                                         std::to_string(num_ranks) + " ranks", "re-record the run");
        auto& lane = lanes[op.rank][static_cast<int>(op.lane)];
        if (!lane.empty()) g.deps[i].push_back(lane.back());
        lane.push_back(i);
    }
    return lanes;
}

// Dependences across lanes: an op off the compute lane was submitted by the main thread (the compute-lane op that
// ended last before it started); a wait ends when the op it awaits ends.
void add_cross_lane_deps(ReplayGraph& g, const LaneOps& lanes) {
    const int n = static_cast<int>(g.ops.size());
    // the compute-lane op of `rank` that ended last at or before t (-1: none)
    auto compute_before = [&](int rank, double t) {
        int best = -1;
        for (int j : lanes[rank][static_cast<int>(prophet::OpLane::kCompute)])
            if (g.ops[j].end_us <= t && (best < 0 || g.ops[j].end_us >= g.ops[best].end_us)) best = j;
        return best;
    };
    for (int i = 0; i < n; ++i) {
        const ReplayOp& op = g.ops[i];
        if (op.lane != prophet::OpLane::kCompute) {  // submitted by the main thread
            const int submitter = compute_before(op.rank, op.start_us);
            if (submitter >= 0) g.deps[i].push_back(submitter);
        } else if (is_wait_kind(op.kind)) {  // ends when the awaited op ends
            const auto [lane, kind] = awaited(op.kind);
            int best = -1;
            for (int j : lanes[op.rank][static_cast<int>(lane)])
                if (g.ops[j].kind == kind && g.ops[j].block == op.block && g.ops[j].end_us <= op.end_us &&
                    (best < 0 || g.ops[j].end_us >= g.ops[best].end_us))
                    best = j;
            if (best >= 0) g.deps[i].push_back(best);
        }
    }
}

// The candidate units: a collective op is matched over ranks by (lane, kind, block, part, occurrence on its lane).
std::map<UnitKey, std::vector<int>> collective_groups(const ReplayGraph& g, const LaneOps& lanes, int num_ranks,
                                                      bool blockwise) {
    std::map<UnitKey, std::vector<int>> groups;
    for (int r = 0; r < num_ranks; ++r)
        for (int lane = 0; lane < 3; ++lane) {
            std::map<std::tuple<int, int, int>, int> seen;
            const std::vector<int>& ops = lanes[r][lane];
            for (size_t k = 0; k < ops.size(); ++k) {
                const ReplayOp& op = g.ops[ops[k]];
                const int occurrence = seen[{static_cast<int>(op.kind), op.block, op.part}]++;
                bool collective = is_collective_kind(op.kind) && num_ranks > 1;
                // NOTE: under the blockwise schedule the layout after the taken placement only builds the dispatch
                // layout (the placement check ran in fetch_ahead): local work
                if (collective && blockwise && op.kind == prophet::OpKind::kLayout && k > 0 &&
                    g.ops[ops[k - 1]].kind == prophet::OpKind::kPlan)
                    collective = false;
                if (collective) groups[{lane, static_cast<int>(op.kind), op.block, op.part, occurrence}].push_back(ops[k]);
            }
        }
    return groups;
}

// g.unit, g.members, g.collective: a unit per group whose members' spans all overlap, one per op otherwise.
void assign_units(ReplayGraph& g, const std::map<UnitKey, std::vector<int>>& groups, int num_ranks,
                  const std::string& where) {
    const int n = static_cast<int>(g.ops.size());
    g.unit.assign(n, -1);
    for (const auto& [key, members] : groups) {
        const ReplayOp& first = g.ops[members.front()];
        // Trans/Agg move between the owner and the holders only: a unit over the ranks that recorded it
        if (!is_transfer(first.kind) && static_cast<int>(members.size()) != num_ranks)
            throw_input_error(where, std::string("collective ") + prophet::op_kind_name(first.kind) + " of block " +
                                         std::to_string(first.block) + " (occurrence " +
                                         std::to_string(std::get<4>(key)) + ") was recorded on " +
                                         std::to_string(members.size()) + " of " + std::to_string(num_ranks) +
                                         " ranks", "the timeline is incomplete: re-record the run");
        // NOTE: a unit only when every member's span overlaps every other's: a Trans/Agg with nothing to move (a
        // placement without replicas) or an exchange with nothing to send returns without waiting for the others
        double last_start = 0, first_end = g.ops[members.front()].end_us;
        for (int m : members) {
            last_start = std::max(last_start, g.ops[m].start_us);
            first_end = std::min(first_end, g.ops[m].end_us);
        }
        if (members.size() < 2 || first_end < last_start) continue;
        const int u = static_cast<int>(g.members.size());
        for (int m : members) g.unit[m] = u;
        g.members.push_back(members);
        g.collective.push_back(1);
    }
    for (int i = 0; i < n; ++i)
        if (g.unit[i] < 0) {
            g.unit[i] = static_cast<int>(g.members.size());
            g.members.push_back({i});
            g.collective.push_back(0);
        }
}

}  // namespace

ReplayGraph build_replay_graph(const std::vector<ReplayOp>& in, int num_ranks, bool blockwise,
                               const std::string& where) {
    PROPHET_ASSERT(num_ranks >= 1);
    ReplayGraph g;
    g.num_ranks = num_ranks;
    g.ops = in;
    // record order within a lane is start order: sort (rank, lane, start) so lanes are contiguous
    std::stable_sort(g.ops.begin(), g.ops.end(), [](const ReplayOp& a, const ReplayOp& b) {
        return std::tie(a.rank, a.lane, a.start_us) < std::tie(b.rank, b.lane, b.start_us);
    });
    g.deps.assign(g.ops.size(), {});
    const LaneOps lanes = order_lanes(g, num_ranks, where);
    add_cross_lane_deps(g, lanes);
    assign_units(g, collective_groups(g, lanes, num_ranks, blockwise), num_ranks, where);
    return g;
}

ReplayDurations recorded_durations(const ReplayGraph& g) {
    const size_t n = g.ops.size();
    ReplayDurations d;
    d.own_us.assign(n, 0.0);
    d.lead_us.assign(n, 0.0);
    for (size_t u = 0; u < g.members.size(); ++u) {
        double last_arrival = 0;  // the unit's start: the last member's recorded start
        for (int m : g.members[u]) last_arrival = std::max(last_arrival, g.ops[m].start_us);
        for (int m : g.members[u]) {
            const ReplayOp& op = g.ops[m];
            if (g.collective[u]) {
                d.own_us[m] = op.end_us - std::max(op.start_us, last_arrival);
            } else if (is_wait_kind(op.kind)) {
                // the wake-up: from the later of its start and the awaited op's end to its return
                double awaited_end = op.start_us;
                for (int dep : g.deps[m])
                    if (!lead_applies(g, m, dep)) awaited_end = std::max(awaited_end, g.ops[dep].end_us);
                d.own_us[m] = std::max(0.0, op.end_us - awaited_end);
            } else {
                d.own_us[m] = op.end_us - op.start_us;
            }
            if (g.deps[m].empty()) continue;  // starts at its recorded time
            double ready = 0;
            for (int dep : g.deps[m])
                if (lead_applies(g, m, dep)) ready = std::max(ready, g.ops[dep].end_us);
            d.lead_us[m] = std::max(0.0, op.start_us - ready);
        }
    }
    return d;
}

ReplayTimes run_replay(const ReplayGraph& g, const ReplayDurations& dur) {
    const int n = static_cast<int>(g.ops.size());
    const int units = static_cast<int>(g.members.size());
    PROPHET_ASSERT(dur.own_us.size() == static_cast<size_t>(n) && dur.lead_us.size() == static_cast<size_t>(n));
    // Kahn's order over units: a unit is ready once every member's deps (in other units) have been timed
    std::vector<int> pending(units, 0);
    std::vector<std::vector<int>> dependents(units);
    for (int i = 0; i < n; ++i)
        for (int dep : g.deps[i])
            if (g.unit[dep] != g.unit[i]) {
                ++pending[g.unit[i]];
                dependents[g.unit[dep]].push_back(g.unit[i]);
            }
    std::vector<int> order;
    for (int u = 0; u < units; ++u)
        if (pending[u] == 0) order.push_back(u);
    ReplayTimes t;
    t.start_us.assign(n, 0.0);
    t.end_us.assign(n, 0.0);
    for (size_t k = 0; k < order.size(); ++k) {
        const int u = order[k];
        double start = 0;  // the unit's start: the last member's arrival
        for (int m : g.members[u]) {
            double arrive = g.ops[m].start_us;
            if (!g.deps[m].empty()) {
                arrive = 0;
                for (int dep : g.deps[m])
                    arrive = std::max(arrive, t.end_us[dep] + (lead_applies(g, m, dep) ? dur.lead_us[m] : 0.0));
            }
            t.start_us[m] = arrive;
            start = std::max(start, arrive);
        }
        for (int m : g.members[u]) {
            PROPHET_ASSERT_MSG(dur.own_us[m] >= 0, std::string("negative duration of ") + prophet::op_kind_name(g.ops[m].kind));
            if (g.collective[u]) t.start_us[m] = start;
            t.end_us[m] = t.start_us[m] + dur.own_us[m];
        }
        for (int v : dependents[u])
            if (--pending[v] == 0) order.push_back(v);
    }
    PROPHET_ASSERT_MSG(static_cast<int>(order.size()) == units, "the replay graph has a cycle");
    t.rank_step_us.assign(g.num_ranks, 0.0);
    std::vector<double> first(g.num_ranks, 0.0);
    std::vector<char> seen(g.num_ranks, 0);
    for (int i = 0; i < n; ++i) {
        const ReplayOp& op = g.ops[i];
        if (op.lane != prophet::OpLane::kCompute) continue;
        if (!seen[op.rank] || t.start_us[i] < first[op.rank]) first[op.rank] = t.start_us[i];
        if (!seen[op.rank] || t.end_us[i] > t.rank_step_us[op.rank]) t.rank_step_us[op.rank] = t.end_us[i];
        seen[op.rank] = 1;
    }
    for (int r = 0; r < g.num_ranks; ++r) {
        t.rank_step_us[r] -= first[r];
        t.step_us = std::max(t.step_us, t.rank_step_us[r]);
    }
    return t;
}

}  // namespace prophet::sim
