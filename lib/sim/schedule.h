// schedule.h: the op DAG of one training iteration as plain data: which op runs on which stream, in which
// order, after which other ops. The simulator (simulator.h) times it; a trainer can walk the same list.
//
// Every device has four in-order streams: compute, comm, dense comm (the dense all-reduce only) and shadow comm
// (FasterMoE's Trans/Agg only). An op is either per-device (one instance per device,
// its dependencies read on the same device) or collective (one instance spanning every device's stream: it
// starts when every device's stream is free and every dependency has ended on every device, and ends at the same
// time everywhere). Ops are listed in issue order; each stream runs its ops in that order, so the order of two
// ops on one stream is a dependency too. docs/simulator.md draws the three schedules.
#pragma once

#include <string>
#include <vector>

namespace prophet::sim {

enum class OpKind : int {
    kGate,            // gate of block l (compute, per device)
    kPlan,            // Algorithm 1 for block l (compute, per device: every device plans on the gathered counts)
    kTrans,           // parameters of block l's replicated experts, owner -> holders (comm, collective)
    kDispatchA2a,     // forward dispatch all-to-all (comm, collective)
    kFec,             // forward expert compute, H_i tokens on device i (compute, per device)
    kCombineA2a,      // forward combine all-to-all
    kFnec,            // forward non-expert compute of the block
    kBnec,            // backward non-expert compute
    kCombineA2aBwd,   // backward all-to-all of the combine's gradient (first in backward)
    kBec,             // backward expert compute, 2x FEC
    kDispatchA2aBwd,  // backward all-to-all of the dispatch's gradient
    kAgg,             // replica gradients of block l, holders -> owner (comm, collective)
    kOptimizer,       // optimizer step (compute, per device), after every Agg (and every dense all-reduce)
    // the whole iteration (IterationOps::dense): the ops outside the MoE blocks' expert path
    kEmbedFwd,        // token + position embedding forward (compute, per device, layer -1)
    kAttnFwd,         // attention branch of block l, before its gate (compute, per device)
    kHeadFwd,         // final layernorm, LM head and loss (compute, per device, layer -1)
    kHeadBwd,         // their backward (compute, per device, layer -1)
    kAttnBwd,         // attention backward of block l, after its dispatch_bwd (compute, per device)
    kEmbedBwd,        // embedding backward (compute, per device, layer -1)
    kAllReduce,       // dense-gradient all-reduce of one bucket (comm, collective, layer -1)
};
constexpr int kNumOpKinds = 20;
const char* op_kind_name(OpKind kind);  // "gate", "plan", "trans", "dispatch_a2a", ..., "all_reduce"
bool is_comm_kind(OpKind kind);         // trans, the four all-to-alls, agg, all_reduce

// kDenseComm: the dense all-reduce's own stream (a DDP communicator of its own): buckets run beside the
// all-to-alls and Trans/Agg rather than queueing in front of them (their bandwidth sharing is not modelled).
// kShadowComm: FasterMoE's Trans (its world-communicator broadcast of the shadowed experts) and Agg (the reduce of
// their gradients to the owners) on a stream of their own, beside the all-to-alls on kComm; as for kDenseComm, the
// links they share with the all-to-all are not modelled (each runs at its full cost-model time).
enum class Resource : int { kCompute = 0, kComm = 1, kDenseComm = 2, kShadowComm = 3 };
constexpr int kNumResources = 4;

// Trans and Agg may be split in two sub-ops (blockwise schedule): the part hidden under the neighbouring block's
// non-expert compute (FNEC for Trans, BNEC for Agg) and the part under its expert compute (FEC / BEC).
enum class OpPart : int { kWhole = 0, kUnderNec = 1, kUnderExpert = 2 };
const char* op_part_name(OpPart part);  // "whole", "under_nec", "under_expert"

enum class ScheduleKind : int {
    kNone,       // Eq 6: Plan, Trans, A2A, FEC, A2A serialized per block; Agg before the next block's backward
    kBlockwise,  // Pro-Prophet §4: Plan(j+1) under A2A(j); Trans(l+1) under FEC(l) + FNEC(l);
                 // Agg(l+1) under BNEC(l) + BEC(l)
    kFasterMoE,  // FasterMoE's system (pro-prophet.md §7): Plan on the current counts, Trans(l) beside the dispatch
                 // A2A(l), Agg(l) beside the dispatch gradient's A2A(l), both on kShadowComm (the cost model's
                 // CostBreakdown::fastermoe_s)
};
// "none" | "blockwise" | "fastermoe"; config error otherwise
ScheduleKind parse_schedule_kind(const std::string& name);
const char* schedule_kind_name(ScheduleKind kind);

enum class AllReduceMode : int {
    kBlocking,  // one all-reduce of every dense gradient after the last backward op (the CPU trainer today)
    kBucketed,  // PyTorch DDP: gradients in buckets of bucket_bytes in the order backward finishes them; a
                // bucket's all-reduce is issued on the comm stream right after the backward op of its last unit
};
AllReduceMode parse_all_reduce_mode(const std::string& name);  // "blocking" | "bucketed"; config error otherwise

// What one iteration holds beyond the MoE blocks.
struct IterationOps {
    bool optimizer = false;  // the optimizer op, after every Agg and all-reduce
    bool dense = false;      // embedding, attention, LM head + loss and the dense all-reduce
    AllReduceMode all_reduce = AllReduceMode::kBlocking;
    // dense: gradient bytes in the order backward finishes them, [L + 2]: head, block L-1, ..., block 0,
    // embedding (sim/dense_ops.h DenseOpTimes::grad_bytes); bucketed: a bucket closes at the first unit that
    // brings it to >= bucket_bytes, and at the embedding
    std::vector<double> grad_bytes;
    double bucket_bytes = 0;
};

struct ScheduleOp {
    OpKind kind = OpKind::kGate;
    int layer = -1;                // the block the op belongs to (a Trans/Agg sub-op: the block whose experts move);
                                   // -1 for the optimizer
    OpPart part = OpPart::kWhole;
    Resource resource = Resource::kCompute;
    bool collective = false;
    bool next_iteration = false;   // Plan that decides iteration j+1's placement, run inside iteration j
    std::vector<int> deps;         // indices of earlier ops that must end first (data dependencies)
    double bytes = 0;              // all_reduce: the gradient bytes of its bucket
};

struct Schedule {
    ScheduleKind kind = ScheduleKind::kNone;
    int num_layers = 0;
    bool include_optimizer = false;
    bool dense = false;
    AllReduceMode all_reduce = AllReduceMode::kBlocking;
    std::vector<ScheduleOp> ops;   // issue order

    // index of the op, or -1
    int find(OpKind kind, int layer, OpPart part = OpPart::kWhole) const;
};

// The op list of one iteration with num_layers blocks (>= 1).
//   none:      per block l: gate, plan, trans, dispatch, fec, combine, fnec; then for l = L-1..0: bnec, combine_bwd,
//              bec, dispatch_bwd, agg; then the optimizer. Every op waits for the one before it on the critical path.
//   blockwise: trans(0) whole at the start; per block l: gate, plan (for j+1, beside dispatch), dispatch,
//              trans(l+1) under_expert beside fec(l), combine, trans(l+1) under_nec beside fnec(l); backward
//              l = L-1..0: agg(l+1) under_nec beside bnec(l), combine_bwd, agg(l+1) under_expert beside bec(l),
//              dispatch_bwd; agg(0) whole at the end; the optimizer after every agg.
//   fastermoe: per block l: gate, plan (this iteration's, on the current counts), trans(l) whole on the shadow
//              stream after plan, dispatch after plan (beside trans), fec after dispatch and trans, combine, fnec;
//              backward l = L-1..0: bnec, combine_bwd, bec, then dispatch_bwd and agg(l) whole on the shadow
//              stream, both after bec; the op after block l's backward (bnec(l-1), attn_bwd(l), the
//              optimizer) waits for both, so agg's exposed part is max(0, agg - a2a) as in fastermoe_s.
// With IterationOps::dense, in every schedule: embed_fwd opens the forward, attn_fwd(l) runs before gate(l),
// head_fwd and head_bwd sit between the last forward and the first backward block, attn_bwd(l) follows
// dispatch_bwd(l) (none: after agg(l); fastermoe: after both), embed_bwd closes the backward; the all-reduce is
// one op after embed_bwd (blocking) or one op per bucket right after the backward op that completes the bucket
// (bucketed).
Schedule build_schedule(ScheduleKind kind, int num_layers, bool include_optimizer);
Schedule build_schedule(ScheduleKind kind, int num_layers, const IterationOps& extra);

// "" or what is wrong: a dependency that does not point to an earlier op, a comm op on the compute stream, ...
std::string check_schedule(const Schedule& schedule);

// One line per op in issue order: "<index> <stream> <kind>[<layer>].<part> <- deps" (docs and debugging).
std::string schedule_to_text(const Schedule& schedule);

}  // namespace prophet::sim
