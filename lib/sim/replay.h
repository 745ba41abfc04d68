// replay.h: replays a recorded training step (`prophet train --timeline`) as the op DAG the trainer ran, so the
// simulator can be checked against real runs op by op (docs/simulator.md "Replay").
//
// The DAG of one step, over every rank's recorded ops (schedule/timeline.h):
//   - lanes are in order: each op on a rank's compute, comm or plan lane follows that lane's previous op;
//   - collectives end together: the all-to-alls (dispatch, combine and their backward), the layout all-gathers
//     (every layout op but the blockwise layout build that follows the taken placement), the dense all-reduce,
//     the optimizer (its gradient-norm all-reduce), the stats (loss all-reduce), and Trans/Agg (matched over the
//     ranks that recorded them: the owner's sends and the holders' receives) are one unit over the ranks: the unit
//     starts when its last rank arrives; only where the recorded spans overlap on every rank (a Trans/Agg with
//     nothing to move returns at once: then each rank's op is its own);
//   - a comm or plan lane op (a submitted Trans/Agg, the ahead planner) depends on the compute-lane op that ended
//     last before it started (the point where the main thread submitted it);
//   - a wait (trans_wait, agg_wait, plan_wait) ends when the op it waits for (the same kind and block on the comm /
//     plan lane that ended last before the wait did) has ended, plus its own wake-up time.
// An op with no dependency (a rank's first op, a plan started in the previous step) starts at its recorded time.
//
// Durations (per op, microseconds): own = the op's time once it may run; lead = time between its dependencies'
// end and its start that no op covers (the thread's untracked work: submitting a transfer, waking a thread; the
// timeline's remainder). Recorded: own = end - start for a per-rank op; for a collective unit, own on rank d =
// end_d - the LAST ARRIVER's start (the recorded duration on a rank that arrived early includes its wait for
// the slowest rank; the part after the last arrival is the collective's own). A wait's own is its wake-up: end -
// max(start, the awaited op's end) (the main thread's return after the transfer or plan finished; on a loaded
// machine milliseconds). The op model (op_model.h) predicts own, and no lead and no wake-up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "balance/placement.h"
#include "schedule/timeline.h"

namespace prophet {
class Store;
}

namespace prophet::sim {

// One recorded op of one rank; times in microseconds from the step's origin (the earliest rank's step start).
struct ReplayOp {
    prophet::OpKind kind = prophet::OpKind::kData;
    prophet::OpLane lane = prophet::OpLane::kCompute;
    int block = -1;  // -1: not a block's
    int part = 0;    // Trans/Agg: 0 whole, 1 beside the non-expert compute, 2 beside the expert compute
    int rank = 0;
    double start_us = 0, end_us = 0;
};

// The timeline event's payload of one rank: [[kind, lane, block, part, start_us, end_us], ...]. Throws an input
// error naming `where` and the bad row for unknown kinds/lanes or a row that is not 6 fields.
std::vector<ReplayOp> parse_timeline_payload(const std::string& json, int rank, const std::string& where);

// The dependency structure of one step (see the file comment).
struct ReplayGraph {
    int num_ranks = 0;
    std::vector<ReplayOp> ops;               // [n]
    std::vector<std::vector<int>> deps;      // [n] ops that must end before op i starts (lane predecessor included)
    std::vector<int> unit;                   // [n] the unit op i belongs to
    std::vector<std::vector<int>> members;   // [units] ops of one unit (one op, or one op per rank of a collective)
    std::vector<char> collective;            // [units]
};

// ops: every rank's ops of one step (any order). blockwise: the run's schedule.mode (decides which layout op is a
// local build). Throws an input error naming `where` when ranks disagree on a collective (a rank lacks one).
ReplayGraph build_replay_graph(const std::vector<ReplayOp>& ops, int num_ranks, bool blockwise,
                               const std::string& where);

bool is_collective_kind(prophet::OpKind kind);  // the all-to-alls, allreduce, optimizer, stats, trans, agg (layout: see above)
bool is_wait_kind(prophet::OpKind kind);        // trans_wait, agg_wait, plan_wait

struct ReplayDurations {
    std::vector<double> own_us;   // [n]
    std::vector<double> lead_us;  // [n]
};
// The recorded durations (file comment): replaying them reproduces the recorded step when the DAG is right.
ReplayDurations recorded_durations(const ReplayGraph& graph);

struct ReplayTimes {
    std::vector<double> start_us, end_us;  // [n]
    std::vector<double> rank_step_us;      // [ranks] end of the rank's last compute-lane op - start of its first
    double step_us = 0;                    // max over ranks (the trainer's step_ms is the same max)
};
// Times every op: a unit starts at max over its members of (max of the deps' ends + lead), or at its recorded
// start without deps; ends at start + own per member. Throws (an internal error) on a cycle.
ReplayTimes run_replay(const ReplayGraph& graph, const ReplayDurations& durations);

// ---- a recorded run, from the store ------------------------------------------------------------------------------

struct RecordedStep {
    int64_t step = 0;
    double measured_ms = 0;          // the step_ms metric (max over ranks of the rank's own step)
    std::vector<ReplayOp> ops;       // every rank's ops
    std::vector<int64_t> counts;     // [L][D][E] tokens rank d routed to expert e (expert_load); empty if absent
    std::vector<Placement> placements;  // [L] the placement each layer used (carried over unchanged steps)
};

struct RecordedRun {
    std::string run_id, experiment;
    int num_ranks = 0;
    // schedule.mode: none | blockwise | fastermoe. fastermoe plans in order as none does (its layout after the plan
    // is the collective placement check), so only blockwise changes the replay graph (build_replay_graph)
    std::string schedule = "none";
    bool blockwise = false;                                   // schedule == "blockwise"
    std::vector<std::pair<std::string, std::string>> params;  // the run's params (train config keys, testbed.*)
    std::vector<RecordedStep> steps;                          // steps with a timeline of every rank, in order
    // a param's value (a TOML string without its quotes), or fallback
    std::string param(const std::string& key, const std::string& fallback = "") const;
};

// Reads the run's timeline events (every rank), step_ms, expert loads and placements. Throws an input error
// naming the run when it has no timeline (record it with `prophet train --timeline`).
RecordedRun load_recorded_run(Store& store, const std::string& run_id);

// Replays every step of `run` with its recorded durations: per step the replayed and the measured step time.
struct StepReplay {
    int64_t step = 0;
    double measured_ms = 0, replayed_ms = 0;
    double error() const { return measured_ms > 0 ? (replayed_ms - measured_ms) / measured_ms : 0.0; }
};
std::vector<StepReplay> replay_recorded(const RecordedRun& run);

}  // namespace prophet::sim
