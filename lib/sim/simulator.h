// simulator.h: trace-driven simulation of MoE training iterations under a schedule (docs/simulator.md).
//
// For every iteration j and block l the placement's token flow on the trace's counts gives the op durations
// (cost model terms, seconds):
//   gate, plan         options.gate_s, the plan time               per device, compute stream
//   trans / agg        CostBreakdown trans_s / agg_s (or a split)  collective, comm stream (fastermoe: shadow stream)
//   four all-to-alls   CostBreakdown a2a_s                         collective, comm stream
//   fec on device i    H_i * 4CF / t  (max_i = Eq 2)               per device, compute stream
//   bec on device i    2 * fec on device i (Eq 3)                  per device, compute stream
//   fnec, bnec         CostModel fnec_s(), bnec_s()                per device, compute stream
//   optimizer          options.optimizer_s                         per device, compute stream
// With options.dense.enabled (the whole iteration) also embedding, attention, LM head + loss, the dense-gradient
// all-reduce (blocking or bucketed) and the optimizer, from the model dims and the cluster (sim/dense_ops.h).
// The engine (engine.h) then times the schedule (schedule.h). Exposed communication is comm-stream time during
// which no device computes; iteration_s = compute_s + exposed_comm_s holds for every schedule built here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/evaluate.h"
#include "balance/placement.h"
#include "sim/dense_ops.h"
#include "sim/schedule.h"

namespace prophet::sim {

// How the blockwise schedule splits Trans(l+1) between FNEC(l) and FEC(l) (and Agg(l+1) between BNEC(l), BEC(l)).
enum class SplitRule : int {
    kTime,   // whole experts: fill the non-expert part first (first fit in expert order) by each expert's own
             // transfer time from the cost model, the rest under the expert compute
    kHalf,   // whole experts: the first ceil(n/2) replicated experts (expert order) under the non-expert part
    kFluid,  // bytes: exactly min(T, T_NEC) under the non-expert part, the rest under the expert compute
             // (a chunked transfer; Eq 8's assumption)
};
SplitRule parse_split_rule(const std::string& name);  // "time" | "half" | "fluid"
const char* split_rule_name(SplitRule rule);

struct SimOptions {
    ScheduleKind schedule = ScheduleKind::kBlockwise;
    SplitRule split_rule = SplitRule::kTime;
    RouteRule route_rule = RouteRule::kOwner;  // simulate_policy uses the policy's settings.options.route_rule
    double gate_s = 0;              // per block and device, seconds
    double plan_s = 0;              // per block and device, seconds; simulate_policy: < 0 = the policy's measured
                                    // planning time (online policies; offline ones plan once: 0)
    bool include_optimizer = false;
    double optimizer_s = 0;         // per device, seconds (dense.enabled: the optimizer is always in, its time
                                    // from dense_op_times)
    DenseOptions dense;             // the whole iteration: embedding, attention, LM head, all-reduce, optimizer
    bool record_timeline = true;
    bool charge_owner_moves = true;  // simulate_score / simulate_policy: add training's owner moves (below)
};

// The two parts of one block's Trans or Agg.
struct TransferSplit {
    double whole_s = 0;               // the unsplit transfer (CostBreakdown trans_s or agg_s)
    double under_nec_s = 0;           // beside FNEC / BNEC
    double under_expert_s = 0;        // beside FEC / BEC
    std::vector<uint8_t> nec_experts; // [E] 1: the expert moves in the under_nec part (time, half); empty for fluid
};
// budget_s: the non-expert time to fill (FNEC for Trans, BNEC for Agg). For time and half, each part's time is
// the cost model's transfer time of its expert subset (topology-aware: its own busiest link, so the parts may sum
// to more than the whole); for fluid the parts sum to the whole.
TransferSplit split_transfer(const CostModel& cost, const LayerFlow& flow, const Placement& placement,
                             SplitRule rule, double budget_s, bool agg);

struct TimelineEntry {
    int iteration = 0;
    int op = 0;          // index into SimResult::schedule.ops
    OpKind kind = OpKind::kGate;
    int layer = -1;
    OpPart part = OpPart::kWhole;
    int device = 0;
    double start_s = 0;  // from the start of the iteration
    double end_s = 0;
};

struct BlockResult {
    CostBreakdown cost;          // predict_layer on this (iteration, block)
    double max_mean_load = 0;    // max_i H_i / mean_i H_i (1 when no tokens)
    double fec_s = 0;            // simulated: max over devices of the FEC op's length
    double trans_s = 0;          // sum of the block's Trans sub-ops' lengths
    double agg_s = 0;
    double trans_under_nec_s = 0, trans_under_expert_s = 0;  // blockwise split of blocks >= 1 (0 otherwise)
    double agg_under_nec_s = 0, agg_under_expert_s = 0;      // blockwise split of blocks >= 1 (0 otherwise)
    double exposed_trans_s = 0;  // Trans time during which no device computes (fastermoe: nor the block's
                                 // all-to-alls run, beside which its Trans/Agg run on the shadow stream)
    double exposed_agg_s = 0;
    double moe_s = 0;         // union of the block's four all-to-alls, FEC and BEC + exposed Trans + exposed Agg
                              // (fastermoe: the union of those and its Trans and Agg intervals, the same sum)
                              // + owner_move_s
    double owner_move_s = 0;  // simulate_score: the block's owner moves (moves.h layer_owner_moves), blocking
};

struct IterationResult {
    int iteration = 0;
    double start_s = 0;          // sum of the previous iterations' times
    double iteration_s = 0;      // end of the last op
    double compute_s = 0;        // time during which at least one device computes
    double exposed_comm_s = 0;   // comm time during which no device computes (owner moves included)
    double owner_move_s = 0;     // simulate_score: the iteration's owner moves (sum over blocks), in iteration_s
    std::array<double, kNumOpKinds> kind_busy_s{};     // per kind: max over devices of the summed op lengths
    std::array<double, kNumOpKinds> kind_exposed_s{};  // per comm kind: exposed time (compute kinds: 0); an
                                                       // all-reduce beside an all-to-all counts in both kinds;
                                                       // a shadow Trans/Agg counts only beyond its block's
                                                       // all-to-alls (BlockResult::exposed_trans_s)
    double mean_max_mean_load = 0;  // over blocks
    double max_max_mean_load = 0;
    std::vector<BlockResult> blocks;  // [L]
};

struct SimResult {
    Schedule schedule;
    int num_devices = 0;
    std::vector<IterationResult> iterations;  // [I]
    std::vector<TimelineEntry> timeline;      // [I][ops][D] when options.record_timeline
    double total_s = 0;
    double mean_iteration_s = 0;
    double mean_exposed_comm_s = 0;
};

// placements: [I][L], each D devices by E experts. plan_s: optional [I*L] seconds; entry (j, l) is the time to
// plan iteration j's placement of block l (none: run in iteration j; blockwise: run in iteration j-1, and the
// last iteration's Plan for j+1 reuses its own entry); overrides options.plan_s.
SimResult simulate(const TraceView& trace, const std::vector<std::vector<Placement>>& placements,
                   const CostModel& cost, const SimOptions& options, const std::vector<double>* plan_s = nullptr);

// The counts a policy's system computes and sends: the trace's, except deepspeed's padded slots
// (deepspeed_dispatch_counts per iteration and layer, kept in *storage). Simulate deepspeed on this view.
TraceView dispatched_view(const std::string& policy, const TraceView& trace, const BalanceOptions& options,
                          std::vector<int64_t>* storage);

// evaluate_policy over the trace (placements from LayerScore::placement), then simulate. score: optional copy of
// the policy's PolicyScore. Throws prophet::Error for an unknown or skipped policy.
SimResult simulate_policy(const std::string& name, const TraceView& trace, const CostModel& cost,
                          const EvalSettings& settings, const SimOptions& options, PolicyScore* score = nullptr);

// simulate_policy's second half: simulate the placements a PolicyScore holds (evaluate_policy's output for the
// same trace, cost model and settings; not skipped), e.g. to simulate a placement already scored by one equation.
// Training's owner moves (options.charge_owner_moves): the schedule has no move op, so each (iteration, block)'s
// layer_owner_moves seconds on `cost` (weights + AdamW state from the previous iteration's owner, iteration 0 from
// the static layout; the rule of evaluate_policy's columns, docs/cost-model.md) are added after the engine ran,
// blocking: to the block's moe_s and owner_move_s and to the iteration's iteration_s, exposed_comm_s and
// owner_move_s; later iterations start that much later. simulate() on bare placements charges nothing.
SimResult simulate_score(const PolicyScore& score, const TraceView& trace, const CostModel& cost,
                         const EvalSettings& settings, const SimOptions& options);

// The schedule of the system a policy belongs to: blockwise for prophet, prophet-oracle and flow (system_cost_eq 8),
// fastermoe for fastermoe (its shadowing), none for the rest.
ScheduleKind system_schedule(const std::string& policy);

}  // namespace prophet::sim
