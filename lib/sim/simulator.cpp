// simulator.cpp: op durations from the cost model, the engine run per iteration, and the derived measures.
#include "sim/simulator.h"

#include <algorithm>
#include <utility>

#include "balance/device_load.h"
#include "balance/moves.h"
#include "balance/policy_registry.h"
#include "core/enum_table.h"
#include "core/error.h"
#include "sim/engine.h"

namespace prophet::sim {

namespace {
constexpr EnumName<SplitRule> kSplitRuleNames[] = {
    {SplitRule::kTime, "time"}, {SplitRule::kHalf, "half"}, {SplitRule::kFluid, "fluid"}};
}  // namespace

SplitRule parse_split_rule(const std::string& name) {
    return parse_enum(kSplitRuleNames, "sim.split_rule", name, "--set sim.split_rule=time");
}

const char* split_rule_name(SplitRule rule) { return enum_name(kSplitRuleNames, rule); }

ScheduleKind system_schedule(const std::string& policy) {
    const PolicyRow* row = find_policy(policy);
    return row ? parse_schedule_kind(row->system_schedule) : ScheduleKind::kNone;
}

namespace {

// Trans (or Agg) time of only the experts with subset[e] = 1, by the cost model.
double subset_transfer_s(const CostModel& cost, const LayerFlow& flow, const Placement& placement,
                         const std::vector<uint8_t>& subset, bool agg) {
    const int D = placement.num_devices;
    const int E = placement.num_experts;
    Placement part = placement;
    LayerFlow part_flow = flow;
    for (int e = 0; e < E; ++e) {
        if (subset[e]) continue;
        part_flow.replica_holders[e] = 0;  // an expert outside the subset moves nothing
        const auto row = part.replica.begin() + static_cast<size_t>(e) * D;
        std::fill(row, row + D, uint8_t{0});
    }
    const TransferSeconds t = transfer_seconds(cost, part_flow, part);
    return agg ? t.agg_s : t.trans_s;
}

using Interval = std::pair<double, double>;

// sorted, disjoint, non-empty intervals
std::vector<Interval> merge_intervals(std::vector<Interval> v) {
    std::sort(v.begin(), v.end());
    std::vector<Interval> out;
    for (const Interval& iv : v) {
        if (iv.second <= iv.first) continue;
        if (!out.empty() && iv.first <= out.back().second)
            out.back().second = std::max(out.back().second, iv.second);
        else
            out.push_back(iv);
    }
    return out;
}

double measure(const std::vector<Interval>& merged) {
    double total = 0;
    for (const Interval& iv : merged) total += iv.second - iv.first;
    return total;
}

// length of [s, e] covered by the merged intervals
double covered(const std::vector<Interval>& merged, double s, double e) {
    if (e <= s) return 0;
    auto it = std::upper_bound(merged.begin(), merged.end(), s,
                               [](double value, const Interval& iv) { return value < iv.second; });
    double total = 0;
    for (; it != merged.end() && it->first < e; ++it) total += std::min(e, it->second) - std::max(s, it->first);
    return total;
}

struct LayerState {
    LayerFlow flow;
    CostBreakdown cost;
    std::vector<double> fec_s;  // [D]
    TransferSplit trans, agg;   // blockwise split (blocks >= 1)
};

}  // namespace

TransferSplit split_transfer(const CostModel& cost, const LayerFlow& flow, const Placement& placement,
                             SplitRule rule, double budget_s, bool agg) {
    const int E = placement.num_experts;
    const TransferSeconds whole = transfer_seconds(cost, flow, placement);
    TransferSplit split;
    split.whole_s = agg ? whole.agg_s : whole.trans_s;
    if (rule == SplitRule::kFluid) {
        split.under_nec_s = std::min(split.whole_s, std::max(0.0, budget_s));
        split.under_expert_s = split.whole_s - split.under_nec_s;
        return split;
    }
    std::vector<int> moved;  // experts with a transfer (replicas), in expert order
    for (int e = 0; e < E; ++e)
        if (placement.transfer_receivers(e) > 0) moved.push_back(e);
    split.nec_experts.assign(E, 0);
    if (rule == SplitRule::kHalf) {
        const size_t first = (moved.size() + 1) / 2;
        for (size_t k = 0; k < first; ++k) split.nec_experts[moved[k]] = 1;
    } else {
        double filled = 0;
        std::vector<uint8_t> one(E, 0);
        for (int e : moved) {
            one[e] = 1;
            const double t = subset_transfer_s(cost, flow, placement, one, agg);
            one[e] = 0;
            if (filled + t <= budget_s) {
                split.nec_experts[e] = 1;
                filled += t;
            }
        }
    }
    std::vector<uint8_t> rest(E, 0);
    for (int e : moved) rest[e] = split.nec_experts[e] ? 0 : 1;
    split.under_nec_s = subset_transfer_s(cost, flow, placement, split.nec_experts, agg);
    split.under_expert_s = subset_transfer_s(cost, flow, placement, rest, agg);
    return split;
}

namespace {

// What every iteration of one simulate() call shares.
struct SimSetup {
    CostModel cost;         // blocks >= 1; Trans/Agg reach the replica holders only
    CostModel first_block;  // block 0's (its Eq 8 credits no window)
    bool dense_on = false, blockwise = false;
    DenseOpTimes dense;      // the whole iteration's non-expert ops (zeros without options.dense.enabled)
    ClusterSpec ar_cluster;  // the dense all-reduce's links, under the model's bandwidth scale
    double flops = 0;        // per device, under the model's compute scale
    int I = 0, L = 0, D = 0, E = 0;
};

SimSetup sim_setup(const TraceView& trace, const CostModel& planner_cost, const SimOptions& options) {
    SimSetup su;
    // the simulator times the bytes that move: Trans/Agg reach the replica holders only (Eq 4-5's D - n counts
    // the owner too, a planner's estimate)
    CostModel cost = planner_cost;
    cost.trans_receivers = TransReceivers::kReplicaHolders;
    // the per-block Eq 8 it reports credits what its split rule can hide: bytes (fluid) or whole experts
    cost.transfer_credit = options.split_rule == SplitRule::kFluid ? TransferCredit::kChunks : TransferCredit::kWholeExperts;
    su.first_block = model_for_layer(cost, 0);
    su.cost = model_for_layer(cost, 1);
    su.I = trace.num_iterations, su.L = trace.num_layers, su.D = trace.num_devices, su.E = trace.num_experts;
    PROPHET_ASSERT_MSG(trace.counts != nullptr && su.I >= 1 && su.L >= 1 && su.D >= 1 && su.E >= 1, "empty trace");
    su.dense_on = options.dense.enabled;
    su.blockwise = options.schedule == ScheduleKind::kBlockwise;
    su.dense = su.dense_on ? dense_op_times(su.cost, options.dense, su.L, su.E) : DenseOpTimes{};
    su.ar_cluster = su.cost.cluster;
    su.ar_cluster.intra_node_bytes_per_s *= su.cost.bandwidth_scale;
    su.ar_cluster.inter_node_bytes_per_s *= su.cost.bandwidth_scale;
    su.ar_cluster.node_nic_bytes_per_s *= su.cost.bandwidth_scale;
    su.flops = su.cost.cluster.compute_flops * su.cost.compute_scale;
    return su;
}

// The ops an iteration runs beside the MoE blocks: optimizer, dense ops, the all-reduce.
IterationOps extra_ops(const SimSetup& su, const SimOptions& options) {
    IterationOps extra;
    extra.optimizer = options.include_optimizer || su.dense_on;
    extra.dense = su.dense_on;
    extra.all_reduce = options.dense.all_reduce;
    extra.grad_bytes = su.dense.grad_bytes;
    extra.bucket_bytes = options.dense.bucket_bytes;
    return extra;
}

// Iteration it's flow, cost and expert compute per block under its placements [L], and each block's max/mean load.
void prepare_blocks(const SimSetup& su, const TraceView& trace, const std::vector<Placement>& placements,
                    const SimOptions& options, int it, std::vector<LayerState>& layers, IterationResult& ir) {
    const int D = su.D;
    for (int l = 0; l < su.L; ++l) {
        const Placement& p = placements[l];
        PROPHET_ASSERT_MSG(p.num_devices == D && p.num_experts == su.E, "placement shape differs from the trace");
        LayerState& st = layers[l];
        st.flow = compute_flow(trace.layer(it, l), D, su.E, p, options.route_rule, &su.cost);
        // block 0 opens the forward with its whole Trans and closes the backward with its whole Agg: its Eq 8
        // credits no window (CostModel::first_block), as this schedule runs it
        st.cost = predict_layer(l == 0 ? su.first_block : su.cost, st.flow, p);
        st.fec_s.assign(D, 0.0);
        for (int d = 0; d < D; ++d)
            st.fec_s[d] = static_cast<double>(st.flow.computed[d]) * su.cost.expert_flops_per_token() / su.flops;
        if (su.blockwise && l >= 1) {
            // the non-expert window: FNEC(l-1) (+ attention of block l), BNEC(l-1) (+ attention bwd of l)
            const double fwd_window = su.dense_on ? su.dense.fnec_s + su.dense.attn_fwd_s : st.cost.fnec_s;
            const double bwd_window = su.dense_on ? su.dense.bnec_s + su.dense.attn_bwd_s : st.cost.bnec_s;
            st.trans = split_transfer(su.cost, st.flow, p, options.split_rule, fwd_window, false);
            st.agg = split_transfer(su.cost, st.flow, p, options.split_rule, bwd_window, true);
        }
        BlockResult& br = ir.blocks[l];
        br.cost = st.cost;
        br.max_mean_load = max_mean_load(st.flow.computed.data(), D);
    }
}

// Seconds op runs on device d; st is its block's state (null for an op of no block), plan_s its Plan time.
double op_duration(const SimSetup& su, const SimOptions& options, const ScheduleOp& op, const LayerState* st, int d,
                   double plan_s) {
    const DenseOpTimes& dense = su.dense;
    switch (op.kind) {
        case OpKind::kGate:
            return options.gate_s;
        case OpKind::kPlan:
            return plan_s;
        case OpKind::kTrans:
            return op.part == OpPart::kWhole      ? st->cost.trans_s
                   : op.part == OpPart::kUnderNec ? st->trans.under_nec_s
                                                  : st->trans.under_expert_s;
        case OpKind::kAgg:
            return op.part == OpPart::kWhole      ? st->cost.agg_s
                   : op.part == OpPart::kUnderNec ? st->agg.under_nec_s
                                                  : st->agg.under_expert_s;
        case OpKind::kDispatchA2a:
        case OpKind::kCombineA2a:
        case OpKind::kCombineA2aBwd:
        case OpKind::kDispatchA2aBwd:
            return st->cost.a2a_s;
        case OpKind::kFec:
            return st->fec_s[d];
        case OpKind::kBec:
            return 2.0 * st->fec_s[d];
        case OpKind::kFnec:
            return su.dense_on ? dense.fnec_s : st->cost.fnec_s;
        case OpKind::kBnec:
            return su.dense_on ? dense.bnec_s : st->cost.bnec_s;
        case OpKind::kOptimizer:
            return su.dense_on ? dense.optimizer_s : options.optimizer_s;
        case OpKind::kEmbedFwd:
            return dense.embed_fwd_s;
        case OpKind::kAttnFwd:
            return dense.attn_fwd_s;
        case OpKind::kHeadFwd:
            return dense.head_fwd_s;
        case OpKind::kHeadBwd:
            return dense.head_bwd_s;
        case OpKind::kAttnBwd:
            return dense.attn_bwd_s;
        case OpKind::kEmbedBwd:
            return dense.embed_bwd_s;
        case OpKind::kAllReduce:
            return dense.all_reduce_in_tail ? 0.0 : all_reduce_s(su.ar_cluster, op.bytes, options.dense.algorithm);
    }
    return 0;
}

// Plan(it, l)'s seconds: options.plan_s, or the measured plan_s [I*L] (blockwise: Plan(j+1) runs in iteration j).
double plan_time(const SimSetup& su, const SimOptions& options, const std::vector<double>* plan_s, int it, int l) {
    if (!plan_s) return options.plan_s;
    const int planned = su.blockwise && it + 1 < su.I ? it + 1 : it;
    return (*plan_s)[static_cast<size_t>(planned) * su.L + l];
}

// durations [ops * D]: every op's seconds on every device in iteration it.
void op_durations(const SimSetup& su, const SimOptions& options, const std::vector<ScheduleOp>& ops,
                  const std::vector<LayerState>& layers, const std::vector<double>* plan_s, int it,
                  std::vector<double>& durations) {
    for (size_t i = 0; i < ops.size(); ++i) {
        const ScheduleOp& op = ops[i];
        const LayerState* st = op.layer >= 0 ? &layers[op.layer] : nullptr;
        const double plan = op.kind == OpKind::kPlan ? plan_time(su, options, plan_s, it, op.layer) : 0.0;
        for (int d = 0; d < su.D; ++d) durations[i * su.D + d] = op_duration(su, options, op, st, d, plan);
    }
}

// One iteration's engine run: ops [n], durations and times [n * D] (a collective reads device 0's entry).
struct IterationRun {
    const std::vector<ScheduleOp>& ops;
    const std::vector<double>& durations;
    const EngineTimes& times;
    int D;
};

// The iteration's length, per-kind busy time (max over devices) and compute time; returns the compute coverage
// (the union over devices of every compute op).
std::vector<Interval> account_compute(const IterationRun& run, IterationResult& ir) {
    const int D = run.D;
    const std::vector<ScheduleOp>& ops = run.ops;
    std::vector<Interval> compute_iv;
    std::vector<std::array<double, kNumOpKinds>> busy(D);
    for (auto& b : busy) b.fill(0.0);
    for (size_t i = 0; i < ops.size(); ++i)
        for (int d = 0; d < D; ++d) {
            const double s = run.times.start[i * D + d], e = run.times.end[i * D + d];
            ir.iteration_s = std::max(ir.iteration_s, e);
            busy[d][static_cast<int>(ops[i].kind)] += run.durations[i * D + (ops[i].collective ? 0 : d)];
            if (ops[i].resource == Resource::kCompute) compute_iv.emplace_back(s, e);
        }
    std::vector<Interval> compute_cover = merge_intervals(std::move(compute_iv));
    ir.compute_s = measure(compute_cover);
    for (int k = 0; k < kNumOpKinds; ++k)
        for (int d = 0; d < D; ++d) ir.kind_busy_s[k] = std::max(ir.kind_busy_s[k], busy[d][k]);
    return compute_cover;
}

// Exposed communication: the union of every comm interval (the all-reduce's and the shadow stream may overlap the
// comm stream) less the compute coverage.
void account_exposed_comm(const IterationRun& run, const std::vector<Interval>& compute_cover, IterationResult& ir) {
    std::vector<Interval> comm_iv;
    for (size_t i = 0; i < run.ops.size(); ++i)
        if (run.ops[i].resource != Resource::kCompute)
            comm_iv.emplace_back(run.times.start[i * run.D], run.times.end[i * run.D]);
    for (const Interval& iv : merge_intervals(std::move(comm_iv)))
        ir.exposed_comm_s += (iv.second - iv.first) - covered(compute_cover, iv.first, iv.second);
}

// Per kind, each op's own uncovered time; per block, its Trans/Agg lengths and exposed parts, FEC, and the
// intervals of its all-to-alls, FEC and BEC into moe_iv [L]. Returns the shadow-stream ops (fastermoe's
// Trans/Agg), measured once every block's all-to-alls are known.
std::vector<size_t> account_block_ops(const IterationRun& run, const std::vector<Interval>& compute_cover,
                                      std::vector<std::vector<Interval>>& moe_iv, IterationResult& ir) {
    const int D = run.D;
    std::vector<size_t> shadow_ops;
    for (size_t i = 0; i < run.ops.size(); ++i) {
        const ScheduleOp& op = run.ops[i];
        if (op.resource == Resource::kShadowComm) {
            shadow_ops.push_back(i);
            continue;
        }
        const double s = run.times.start[i * D], e = run.times.end[i * D];
        const double exposed =
            op.resource != Resource::kCompute ? std::max(0.0, (e - s) - covered(compute_cover, s, e)) : 0.0;
        ir.kind_exposed_s[static_cast<int>(op.kind)] += exposed;
        if (op.layer < 0) continue;  // embedding, head, all-reduce, optimizer: no block's
        BlockResult& br = ir.blocks[op.layer];
        const double length = run.durations[i * D];
        if (op.resource == Resource::kComm) {
            if (op.kind == OpKind::kTrans) {
                br.trans_s += length;
                br.exposed_trans_s += exposed;
                if (op.part == OpPart::kUnderNec) br.trans_under_nec_s = length;
                if (op.part == OpPart::kUnderExpert) br.trans_under_expert_s = length;
            } else if (op.kind == OpKind::kAgg) {
                br.agg_s += length;
                br.exposed_agg_s += exposed;
                if (op.part == OpPart::kUnderNec) br.agg_under_nec_s = length;
                if (op.part == OpPart::kUnderExpert) br.agg_under_expert_s = length;
            } else {
                moe_iv[op.layer].emplace_back(s, e);
            }
        } else if (op.kind == OpKind::kFec || op.kind == OpKind::kBec) {
            for (int d = 0; d < D; ++d) {
                moe_iv[op.layer].emplace_back(run.times.start[i * D + d], run.times.end[i * D + d]);
                if (op.kind == OpKind::kFec) br.fec_s = std::max(br.fec_s, run.durations[i * D + d]);
            }
        }
    }
    return shadow_ops;
}

// A shadow Trans/Agg runs beside its block's all-to-alls: its exposed part is what neither compute nor the
// block's all-to-alls cover (so Trans hidden under the dispatch is not counted twice in the kind sums),
// and the block's MoE time is the union of its all-to-alls, FEC, BEC and the transfers themselves.
void account_shadow_ops(const IterationRun& run, const std::vector<size_t>& shadow_ops,
                        const std::vector<Interval>& compute_cover, std::vector<std::vector<Interval>>& moe_iv,
                        IterationResult& ir) {
    const int D = run.D;
    for (size_t i : shadow_ops) {
        const ScheduleOp& op = run.ops[i];
        PROPHET_ASSERT_MSG(op.kind == OpKind::kTrans || op.kind == OpKind::kAgg, "only Trans and Agg shadow");
        const double s = run.times.start[i * D], e = run.times.end[i * D];
        std::vector<Interval> hide = moe_iv[op.layer];  // the block's all-to-alls, FEC and BEC so far
        hide.insert(hide.end(), compute_cover.begin(), compute_cover.end());
        const double exposed = std::max(0.0, (e - s) - covered(merge_intervals(std::move(hide)), s, e));
        ir.kind_exposed_s[static_cast<int>(op.kind)] += exposed;
        BlockResult& br = ir.blocks[op.layer];
        (op.kind == OpKind::kTrans ? br.trans_s : br.agg_s) += run.durations[i * D];
        (op.kind == OpKind::kTrans ? br.exposed_trans_s : br.exposed_agg_s) += exposed;
        moe_iv[op.layer].emplace_back(s, e);
    }
}

// Every measure of one iteration the engine ran, into ir.
void account_iteration(const IterationRun& run, int L, IterationResult& ir) {
    const std::vector<Interval> compute_cover = account_compute(run, ir);
    std::vector<std::vector<Interval>> moe_iv(L);
    account_exposed_comm(run, compute_cover, ir);
    const std::vector<size_t> shadow_ops = account_block_ops(run, compute_cover, moe_iv, ir);
    account_shadow_ops(run, shadow_ops, compute_cover, moe_iv, ir);
    for (int l = 0; l < L; ++l) {
        BlockResult& br = ir.blocks[l];
        // the comm-stream transfers (none, blockwise) are outside the union: their exposed parts add to it
        br.moe_s = measure(merge_intervals(std::move(moe_iv[l])));
        if (shadow_ops.empty()) br.moe_s = br.moe_s + br.exposed_trans_s + br.exposed_agg_s;
        ir.mean_max_mean_load += br.max_mean_load / L;
        ir.max_max_mean_load = std::max(ir.max_max_mean_load, br.max_mean_load);
    }
}

// Every op's interval on every device of iteration it, appended to timeline.
void record_timeline(const IterationRun& run, int it, std::vector<TimelineEntry>& timeline) {
    for (size_t i = 0; i < run.ops.size(); ++i)
        for (int d = 0; d < run.D; ++d) {
            TimelineEntry entry;
            entry.iteration = it;
            entry.op = static_cast<int>(i);
            entry.kind = run.ops[i].kind;
            entry.layer = run.ops[i].layer;
            entry.part = run.ops[i].part;
            entry.device = d;
            entry.start_s = run.times.start[i * run.D + d];
            entry.end_s = run.times.end[i * run.D + d];
            timeline.push_back(entry);
        }
}

}  // namespace

SimResult simulate(const TraceView& trace, const std::vector<std::vector<Placement>>& placements,
                   const CostModel& planner_cost, const SimOptions& options, const std::vector<double>* plan_s) {
    const SimSetup su = sim_setup(trace, planner_cost, options);
    const int I = su.I, L = su.L, D = su.D;
    PROPHET_ASSERT_MSG(static_cast<int>(placements.size()) == I, "placements must be [I][L]");
    PROPHET_ASSERT_MSG(!plan_s || plan_s->size() == static_cast<size_t>(I) * L, "plan_s must be [I*L]");
    PROPHET_ASSERT(options.gate_s >= 0 && options.plan_s >= 0 && options.optimizer_s >= 0);

    SimResult result;
    result.schedule = build_schedule(options.schedule, L, extra_ops(su, options));
    result.num_devices = D;
    const std::vector<ScheduleOp>& ops = result.schedule.ops;
    std::vector<LayerState> layers(L);
    std::vector<double> durations(ops.size() * D);
    double elapsed = 0;
    for (int it = 0; it < I; ++it) {
        PROPHET_ASSERT_MSG(static_cast<int>(placements[it].size()) == L, "placements must be [I][L]");
        IterationResult ir;
        ir.iteration = it;
        ir.start_s = elapsed;
        ir.blocks.resize(L);
        prepare_blocks(su, trace, placements[it], options, it, layers, ir);
        op_durations(su, options, ops, layers, plan_s, it, durations);
        const EngineTimes times = run_engine(ops, D, durations);
        const IterationRun run{ops, durations, times, D};
        account_iteration(run, L, ir);
        if (options.record_timeline) record_timeline(run, it, result.timeline);
        elapsed += ir.iteration_s;
        result.iterations.push_back(std::move(ir));
    }
    result.total_s = elapsed;
    result.mean_iteration_s = elapsed / I;
    for (const IterationResult& ir : result.iterations) result.mean_exposed_comm_s += ir.exposed_comm_s / I;
    return result;
}

TraceView dispatched_view(const std::string& policy, const TraceView& trace, const BalanceOptions& options,
                          std::vector<int64_t>* storage) {
    const PolicyRow* row = find_policy(policy);
    if (!row || !row->dispatch) return trace;
    const int I = trace.num_iterations, L = trace.num_layers;
    const size_t per_layer = static_cast<size_t>(trace.num_devices) * trace.num_experts;
    int64_t dropped = 0;
    // a dispatch pads every layer or none (static only reports drops): none keeps the trace's counts
    if (I == 0 || L == 0 ||
        row->dispatch(trace.layer(0, 0), trace.num_devices, trace.num_experts, options, &dropped).empty())
        return trace;
    storage->resize(static_cast<size_t>(I) * L * per_layer);
    for (int it = 0; it < I; ++it)
        for (int l = 0; l < L; ++l) {
            const std::vector<int64_t> one =
                row->dispatch(trace.layer(it, l), trace.num_devices, trace.num_experts, options, &dropped);
            PROPHET_ASSERT(one.size() == per_layer);
            std::copy(one.begin(), one.end(), storage->begin() + (static_cast<size_t>(it) * L + l) * per_layer);
        }
    TraceView view = trace;
    view.counts = storage->data();
    return view;
}

SimResult simulate_policy(const std::string& name, const TraceView& trace, const CostModel& cost,
                          const EvalSettings& settings, const SimOptions& options, PolicyScore* score) {
    PolicyScore s = evaluate_policy(name, trace, cost, settings, /*allow_skip=*/false);
    SimResult r = simulate_score(s, trace, cost, settings, options);
    if (score) *score = std::move(s);
    return r;
}

namespace {

// Training's owner moves of the scored placements (simulator.h), added blocking after the engine ran; the totals
// and each iteration's start follow.
void charge_owner_moves(SimResult& r, const PolicyScore& s, const CostModel& cost, int num_layers) {
    for (size_t k = 0; k < s.layers.size(); ++k) {
        const double move_s = layer_owner_moves(s.layers, k, num_layers, cost, kTrainingStateCopies).seconds;
        const LayerScore& ls = s.layers[k];
        IterationResult& ir = r.iterations[static_cast<size_t>(ls.iteration)];
        BlockResult& br = ir.blocks[static_cast<size_t>(ls.layer)];
        br.owner_move_s += move_s;
        br.moe_s += move_s;
        ir.owner_move_s += move_s;
        ir.iteration_s += move_s;
        ir.exposed_comm_s += move_s;
    }
    const double I = static_cast<double>(r.iterations.size());
    r.total_s = r.mean_exposed_comm_s = 0;
    for (IterationResult& ir : r.iterations) {
        ir.start_s = r.total_s;
        r.total_s += ir.iteration_s;
        r.mean_exposed_comm_s += ir.exposed_comm_s / I;
    }
    r.mean_iteration_s = r.total_s / I;
}

}  // namespace

SimResult simulate_score(const PolicyScore& s, const TraceView& trace, const CostModel& cost,
                         const EvalSettings& settings, const SimOptions& options) {
    const std::string& name = s.name;
    const int I = trace.num_iterations, L = trace.num_layers;
    PROPHET_ASSERT(s.layers.size() == static_cast<size_t>(I) * L);
    std::vector<std::vector<Placement>> placements(I);
    std::vector<double> plan(static_cast<size_t>(I) * L, 0.0);
    const bool offline = plans_offline(name, settings.options);  // planned before the run: no Plan op time
    for (const LayerScore& ls : s.layers) {
        placements[ls.iteration].push_back(ls.placement);
        plan[static_cast<size_t>(ls.iteration) * L + ls.layer] = offline ? 0.0 : ls.plan_us * 1e-6;
    }
    SimOptions o = options;
    o.route_rule = effective_route_rule(name, settings.options);
    const bool measured = options.plan_s < 0;
    if (measured) o.plan_s = 0;
    std::vector<int64_t> padded;
    const TraceView view = dispatched_view(name, trace, settings.options, &padded);
    SimResult r = simulate(view, placements, cost, o, measured ? &plan : nullptr);
    if (options.charge_owner_moves) charge_owner_moves(r, s, cost, L);
    return r;
}

}  // namespace prophet::sim
