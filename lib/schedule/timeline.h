// timeline.h: what each rank did when, op by op, for the scheduler's evidence (`prophet train --timeline`).
//
// An op is (kind, block, part, lane, start, end). Lanes are the threads of one rank: compute (the main thread:
// non-expert and expert compute, the all-to-alls it runs, and its WAITS on Trans/Agg), comm (the communication
// stream's thread: the Trans/Agg transfers themselves) and plan (the planner thread). Times are steady-clock
// nanoseconds, one clock for every rank of one machine (CLOCK_MONOTONIC), so ranks' timelines line up.
//
// Exposed communication is the compute lane's time in trans_wait / agg_wait ops (blocked on a transfer the
// schedule launched earlier) plus, in the unscheduled mode, the Trans/Agg it ran itself (kind trans/agg on the
// compute lane): the time Trans/Agg added to the step on this rank.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace prophet {

enum class OpKind : uint8_t {
    kData,        // the step's batch (data loader) and zeroing the gradients
    kEmbed,       // token + position embedding forward (block -1)
    kAttn,        // forward attention branch of a block: ln1, qkv, attention, proj, residual (and the previous
                  // block's MoE residual add)
    kGate,        // forward gate of a block: ln2, gate logits, top-k, counts, capacity, aux loss
    kDispatch,    // forward dispatch all-to-all (the exchange only)
    kFec,         // forward expert compute
    kCombine,     // forward combine all-to-all (the exchange only)
    kPack,        // copies into an all-to-all's send buffer or back to expert order (pack / sort / unsort)
    kUnpack,      // copies out of an all-to-all's buffers into token order (weighted sum, pack backward)
    kHead,        // forward final layernorm, tied LM head and cross-entropy loss (block -1)
    kHeadBwd,     // their backward (block -1)
    kGateBwd,     // backward gate of a block: top-k, softmax (aux loss), gate matmul, ln2
    kAttnBwd,     // backward attention branch of a block: proj, attention, qkv, ln1
    kEmbedBwd,    // embedding backward (block -1)
    kDispatchBwd, // backward dispatch all-to-all (the exchange only)
    kBec,         // backward expert compute
    kCombineBwd,  // backward combine all-to-all (the exchange only)
    kTrans,       // parameter transfer of (a part of) a block's replicas
    kAgg,         // gradient reduce of (a part of) a block's replicas
    kTransWait,   // compute lane blocked on a Trans
    kAggWait,     // compute lane blocked on an Agg
    kPlan,        // placement search (plan lane; compute lane under the blocking schedule)
    kPlanWait,    // compute lane blocked on the planner
    kLayout,      // counts all-gather (notify) or building the dispatch layout (with the placement check)
    kAllReduce,   // dense gradient all-reduce (block -1)
    kOptimizer,   // global gradient norm (an all-reduce of one number) + AdamW (block -1)
    kStats,       // end of step: loss all-reduce, routing counts, the policy's update, balance statistics
    kCount
};
const char* op_kind_name(OpKind kind);

enum class OpLane : uint8_t { kCompute = 0, kComm = 1, kPlan = 2 };
const char* op_lane_name(OpLane lane);

struct OpRecord {
    OpKind kind;
    OpLane lane;
    int16_t block;  // -1: not a block's
    int8_t part;    // Trans/Agg: 0 whole, 1 beside the non-expert compute, 2 beside the expert compute
    int64_t start_ns, end_ns;
};

// Thread-safe append; one per rank.
class OpTimeline {
  public:
    void add(OpKind kind, OpLane lane, int block, int part, int64_t start_ns, int64_t end_ns);
    // Everything recorded since the last take(), in record order.
    std::vector<OpRecord> take();

  private:
    std::mutex mutex_;
    std::vector<OpRecord> ops_;
};

// Records [*cursor, now) as one compute-lane op of `block` (-1: none) when `timeline` is set, and moves *cursor to
// now: consecutive marks tile the time between them with no gap. Without a timeline it does nothing.
void mark_compute(OpTimeline* timeline, OpKind kind, int block, int64_t* cursor);

// The part of [step_start_ns, step_end_ns) that no compute-lane op covers, in ns: the step's length minus the
// union of its compute-lane intervals (each clipped to the step). The compute lane is the main thread, so this
// is the time the timeline does not explain (docs/scheduler.md); ops on other lanes run beside it and do not count.
int64_t timeline_remainder_ns(const std::vector<OpRecord>& ops, int64_t step_start_ns, int64_t step_end_ns);

// JSON array of [kind, lane, block, part, start_us, end_us] with times relative to origin_ns (microseconds,
// 3 decimals): the store's timeline event payload (docs/store.md).
std::string timeline_json(const std::vector<OpRecord>& ops, int64_t origin_ns);

}  // namespace prophet
