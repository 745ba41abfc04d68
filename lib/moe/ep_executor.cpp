// ep_executor.cpp: ExpertParallelExecutor, the stages of layout.h, dispatch.h, experts.h and trans_agg.h, either
// blocking in order, under the block-wise schedule or under FasterMoE's, with per-layer timings (see ep_executor.h).
#include "moe/ep_executor.h"

#include <algorithm>
#include <string>

#include "comm/comm.h"
#include "core/error.h"
#include "core/fnv.h"
#include "core/timer.h"
#include "model/moe_gpt.h"
#include "moe/dispatch.h"
#include "moe/trans_agg.h"

namespace prophet {

namespace {

// NOTE: tags of the per-expert Trans/Agg exchanges, tag_base + expert; below 32767 (MPI's guaranteed tag bound)
// for E <= 8192.
constexpr int kTagTrans = 8192;
constexpr int kTagAgg = 16384;

double ms_since(int64_t t0) { return (double)(now_ns() - t0) * 1e-6; }

// FNV-1a over the owner and replica arrays: ranks compare placements without sending them
uint64_t placement_hash(const Placement& p) {
    Fnv1a f;
    f.bytes(&p.num_devices, sizeof(int));
    f.bytes(&p.num_experts, sizeof(int));
    f.bytes(p.owner.data(), sizeof(int) * p.owner.size());
    f.bytes(p.replica.data(), p.replica.size());
    return f.h;
}

}  // namespace

ExpertParallelExecutor::ExpertParallelExecutor(Communicator* comm, int L, int E, int K, int C, int F, RouteRule rule,
                                               ExpertStorage storage)
    : comm_(comm), L_(L), E_(E), K_(K), C_(C), F_(F), D_(comm->size()), rule_(rule), storage_(storage),
      cpu_compute_(L, E, C, F, std::move(storage)), compute_(&cpu_compute_), layers_(L) {
    PROPHET_ASSERT(L > 0 && E > 0 && K > 0 && K <= E && C > 0 && F > 0);
    PROPHET_ASSERT_MSG(E % D_ == 0, "expert parallelism needs E (" + std::to_string(E) +
                                        ") divisible by the number of ranks (" + std::to_string(D_) + ")");
    PROPHET_ASSERT((int)storage_.params.size() == L * E && (int)storage_.grads.size() == L * E);
}

ExpertParallelExecutor::ExpertParallelExecutor(Communicator* comm, Model<float>& model, RouteRule rule)
    : ExpertParallelExecutor(comm, model.config.L, model.config.E, model.config.K, model.config.C,
                             model.config.hidden_size(), rule, expert_storage_from_model(model)) {}

int ExpertParallelExecutor::rank() const { return comm_->rank(); }

void ExpertParallelExecutor::set_expert_compute(ExpertCompute* compute) {
    compute_ = compute != nullptr ? compute : &cpu_compute_;
}

namespace {
// Which experts of a layer the compute must copy around this rank's Trans / Agg ([E], 1 = copy): the home sends
// its parameters, the other holders receive them; every member of a moving group (home included: the sums land in
// its copy) takes part in Agg.
enum class StageSet { kTransSend, kTransReceive, kAggMembers };
std::vector<uint8_t> staged_experts(const Placement& p, int rank, StageSet set) {
    std::vector<uint8_t> moving = moe_moving_experts(p);  // [E]
    for (int e = 0; e < p.num_experts; e++) {
        const bool home = p.home(e) == rank, holds = p.holds(e, rank);
        const bool in = set == StageSet::kTransSend ? home : set == StageSet::kTransReceive ? holds && !home
                                                                                              : home || holds;
        moving[e] = moving[e] && in ? 1 : 0;
    }
    return moving;
}
// staged_experts restricted to one part of a split transfer (only [E])
std::vector<uint8_t> staged_part(const Placement& p, int rank, StageSet set, const std::vector<uint8_t>& only) {
    std::vector<uint8_t> staged = staged_experts(p, rank, set);
    for (size_t e = 0; e < staged.size(); e++) staged[e] = staged[e] && only[e] ? 1 : 0;
    return staged;
}
}  // namespace

std::vector<char> ExpertParallelExecutor::home_expert_mask() const {
    std::vector<char> mask((size_t)L_ * E_, 0);  // [L*E]
    for (int l = 0; l < L_; l++)
        for (int e = 0; e < E_; e++) mask[(size_t)l * E_ + e] = home_of(e) == rank() ? 1 : 0;
    return mask;
}

std::vector<char> ExpertParallelExecutor::optimizer_skip_mask(const ParamLayout& layout) const {
    std::vector<char> skip(layout.tensors.size(), 0);  // [num tensors]
    for (size_t i = 0; i < layout.tensors.size(); i++) {
        const ParamTensor& t = layout.tensors[i];
        if (t.is_expert) skip[i] = home_of(t.expert) != rank() ? 1 : 0;
    }
    return skip;
}

std::vector<char> ExpertParallelExecutor::home_expert_tensor_mask(const ParamLayout& layout) const {
    std::vector<char> include(layout.tensors.size(), 0);  // [num tensors]
    for (size_t i = 0; i < layout.tensors.size(); i++) {
        const ParamTensor& t = layout.tensors[i];
        if (t.is_expert) include[i] = home_of(t.expert) == rank() ? 1 : 0;
    }
    return include;
}

MoeLayerStats ExpertParallelExecutor::step_stats() const {
    MoeLayerStats sum;
    for (const LayerState& st : layers_) {
        const MoeLayerStats& s = st.stats;
        sum.rows_sent += s.rows_sent;
        sum.rows_received += s.rows_received;
        sum.rows_computed += s.rows_computed;
        sum.layout_ms += s.layout_ms;
        sum.plan_ms += s.plan_ms;
        sum.trans_ms += s.trans_ms;
        sum.dispatch_fwd_ms += s.dispatch_fwd_ms;
        sum.combine_fwd_ms += s.combine_fwd_ms;
        sum.dispatch_bwd_ms += s.dispatch_bwd_ms;
        sum.combine_bwd_ms += s.combine_bwd_ms;
        sum.expert_fwd_ms += s.expert_fwd_ms;
        sum.expert_bwd_ms += s.expert_bwd_ms;
        sum.agg_ms += s.agg_ms;
        sum.trans_exposed_ms += s.trans_exposed_ms;
        sum.agg_exposed_ms += s.agg_exposed_ms;
        sum.plan_wait_ms += s.plan_wait_ms;
    }
    return sum;
}

Placement ExpertParallelExecutor::plan(int layer, const int64_t* counts) {
    return validate(layer, provider_ ? provider_(layer, counts) : Placement::make_static(D_, E_));
}

Placement ExpertParallelExecutor::validate(int layer, Placement p) {
    if (p.num_devices != D_ || p.num_experts != E_ || (int)p.owner.size() != E_ ||
        p.replica.size() != (size_t)E_ * D_)
        throw Error(kExitRunFailed, "expert parallelism: layer " + std::to_string(layer) + ": the placement is for " +
                                        std::to_string(p.num_devices) + " devices and " +
                                        std::to_string(p.num_experts) + " experts, the run has " +
                                        std::to_string(D_) + " ranks and " + std::to_string(E_) + " experts");
    const std::string problem = check_placement(p, 0);
    if (!problem.empty())
        throw Error(kExitRunFailed, "expert parallelism: layer " + std::to_string(layer) + ": invalid placement: " +
                                        problem);
    return p;
}

void ExpertParallelExecutor::check_same_placement(int layer, const Placement& p) {
    if (!check_placement_ || D_ == 1) return;
    const uint64_t mine = placement_hash(p);
    std::vector<uint64_t> all(D_);  // [D]
    comm_->all_gather(&mine, sizeof(mine), all.data());
    for (int d = 0; d < D_; d++)
        if (all[d] != mine)
            throw Error(kExitDistributed, "expert parallelism: layer " + std::to_string(layer) + ": rank " +
                                              std::to_string(rank()) + " and rank " + std::to_string(d) +
                                              " planned different placements on the same counts; the placement "
                                              "provider must be deterministic on every rank");
}

// ---- block-wise schedule ---------------------------------------------------------------------------------------

void ExpertParallelExecutor::set_schedule(const EpSchedule& schedule) {
    PROPHET_ASSERT(schedule.fnec_s >= 0 && schedule.bnec_s >= 0 && schedule.expert_transfer_s >= 0);
    schedule_ = schedule;
    comm_stream_ = std::make_unique<OrderedWorker>(schedule.mode != EpScheduleMode::kBlocking);
    ahead_placement_.assign(L_, Placement{});
    trans_parts_.assign(L_, {});
    trans_ticket_.assign(L_, 0);
    agg_ticket_.assign(L_, 0);
    agg_pending_.assign(L_, {});
    carried_trans_wait_ms_.assign(L_, 0.0);
}

void ExpertParallelExecutor::record(OpKind kind, int block, int64_t start_ns, int64_t end_ns, int part) {
    if (timeline_ != nullptr) timeline_->add(kind, OpLane::kCompute, block, part, start_ns, end_ns);
}

void ExpertParallelExecutor::fetch_ahead(int layer) {
    PROPHET_ASSERT_MSG(ahead_, "the block-wise schedule needs an ahead placement provider");
    const int64_t t0 = now_ns();
    Placement p = validate(layer, ahead_(layer));
    const int64_t t1 = now_ns();
    carried_plan_wait_ms_ = (double)(t1 - t0) * 1e-6;
    record(OpKind::kPlanWait, layer, t0, t1);
    // NOTE: the consistency check is a collective that absorbs the ranks' skew: it counts as layout, as in forward
    check_same_placement(layer, p);
    trans_parts_[layer] = split_layer(layer, p, schedule_.fnec_s);  // budget: this block's FNEC window
    ahead_placement_[layer] = std::move(p);
    record(OpKind::kLayout, layer, t1, now_ns());
}

ExpertParallelExecutor::TransferParts ExpertParallelExecutor::split_layer(int layer, const Placement& p,
                                                                          double budget_s) const {
    TransferParts parts;
    const std::vector<uint8_t> moving = moe_moving_experts(p);
    std::vector<double> expert_s(E_, 0.0);  // each expert's time: its receivers x one expert over one link
    for (int e = 0; e < E_; e++)
        if (moving[e]) expert_s[e] = moe_receivers(p, e) * schedule_.expert_transfer_s;
    parts.beside_nec = layer == 0 ? moving : split_transfers(moving, expert_s, budget_s, schedule_.split);
    parts.beside_expert = moving;
    for (int e = 0; e < E_; e++) parts.beside_expert[e] &= !parts.beside_nec[e];
    return parts;
}

int64_t ExpertParallelExecutor::submit_transfer(bool trans, int layer, int part, std::vector<uint8_t> only,
                                                const Placement* placement) {
    bool any = false;
    for (uint8_t v : only) any |= v != 0;
    if (!any) return 0;
    float* const* buffers = (trans ? storage_.params.data() : storage_.grads.data()) + (size_t)layer * E_;  // [E]
    const size_t numel = 2 * (size_t)C_ * F_;
    const int64_t ticket = comm_stream_->submit([this, trans, layer, part, placement, buffers, numel,
                                                 only = std::move(only)] {
        const int64_t t0 = now_ns();
        // the compute's staging runs here too, on this communication thread (a GPU compute copies on a stream
        // of its own, so the copies overlap the main thread's kernels as the transfers do)
        const int r = rank();
        if (trans) {
            compute_->params_to_host(layer, staged_part(*placement, r, StageSet::kTransSend, only));
            moe_trans(comm_, *placement, buffers, numel, kTagTrans, only.data());
            compute_->params_from_host(layer, staged_part(*placement, r, StageSet::kTransReceive, only));
        } else {
            const std::vector<uint8_t> members = staged_part(*placement, r, StageSet::kAggMembers, only);
            compute_->grads_to_host(layer, members);
            moe_agg(comm_, *placement, buffers, numel, kTagAgg, only.data());
            compute_->grads_from_host(layer, members);
        }
        transfers_.add(trans ? OpKind::kTrans : OpKind::kAgg, OpLane::kComm, layer, part, t0, now_ns());
    });
    (trans ? trans_ticket_ : agg_ticket_)[layer] = ticket;
    return ticket;
}

void ExpertParallelExecutor::wait_transfer(bool trans, int layer, int64_t ticket) {
    if (ticket == 0) return;
    const int64_t t0 = now_ns();
    comm_stream_->wait(ticket);
    const int64_t t1 = now_ns();
    record(trans ? OpKind::kTransWait : OpKind::kAggWait, layer, t0, t1);
    const double ms = (double)(t1 - t0) * 1e-6;
    if (!trans) layers_[layer].stats.agg_exposed_ms += ms;
    else carried_trans_wait_ms_[layer] += ms;
}

void ExpertParallelExecutor::block_forward_begin(int layer) {
    PROPHET_ASSERT(layer >= 0 && layer < L_);
    if (schedule_.mode != EpScheduleMode::kBlockwise) return;
    if (layer == 0) {
        // a new step: the previous step's transfers were all waited for by finish_backward
        transfers_.take();
        for (double& ms : carried_trans_wait_ms_) ms = 0;
        fetch_ahead(0);
        layer0_plan_wait_ms_ = carried_plan_wait_ms_;
    }
    submit_transfer(true, layer, 1, trans_parts_[layer].beside_nec, &ahead_placement_[layer]);
}

void ExpertParallelExecutor::finish_backward() {
    if (schedule_.mode == EpScheduleMode::kBlocking) return;
    for (int l = L_ - 1; l >= 0; l--) wait_transfer(false, l, agg_ticket_[l]);
    comm_stream_->wait_all();
    // the transfers' own time per layer, from the communication stream's spans
    std::vector<OpRecord> spans = transfers_.take();
    for (const OpRecord& op : spans) {
        MoeLayerStats& s = layers_[op.block].stats;
        const double ms = (double)(op.end_ns - op.start_ns) * 1e-6;
        (op.kind == OpKind::kTrans ? s.trans_ms : s.agg_ms) += ms;
        if (timeline_ != nullptr) timeline_->add(op.kind, op.lane, op.block, op.part, op.start_ns, op.end_ns);
    }
    std::fill(trans_ticket_.begin(), trans_ticket_.end(), 0);
    std::fill(agg_ticket_.begin(), agg_ticket_.end(), 0);
}

// ---- forward / backward ----------------------------------------------------------------------------------------

void ExpertParallelExecutor::forward(int layer, int N, const float* h, const int* expert_idx, const float* gate_w,
                                     float* out) {
    PROPHET_ASSERT(layer >= 0 && layer < L_ && N >= 0);
    layers_[layer].stats = MoeLayerStats{};
    forward_layout(layer, N, expert_idx);
    const int64_t fastermoe_trans = forward_trans(layer);
    forward_dispatch(layer, h);
    MoeLayerStats& stats = layers_[layer].stats;
    // FasterMoE: the replicas' parameters are read by the expert compute below, so Trans(l) must be complete
    if (fastermoe_trans != 0) {
        carried_trans_wait_ms_[layer] = 0;
        wait_transfer(true, layer, fastermoe_trans);
        stats.trans_exposed_ms = carried_trans_wait_ms_[layer];
        trans_ticket_[layer] = 0;
    }
    // ---- block-wise: the next layer's placement, and the part of its Trans that goes beside this FEC
    int64_t next_fec_ticket = 0;
    if (schedule_.mode == EpScheduleMode::kBlockwise && layer + 1 < L_) {
        fetch_ahead(layer + 1);
        next_plan_wait_ms_ = carried_plan_wait_ms_;
        next_fec_ticket =
            submit_transfer(true, layer + 1, 2, trans_parts_[layer + 1].beside_expert, &ahead_placement_[layer + 1]);
    }
    forward_experts(layer);
    if (next_fec_ticket != 0) {
        // NOTE: waited before the combine all-to-all, so the transfer never shares the links with it
        wait_transfer(true, layer + 1, next_fec_ticket);
    }
    forward_combine(layer, N, gate_w, out);
}

// Layout + notify, the placement (blocking and FasterMoE: planned on this step's counts; block-wise: fetched
// before the layer, the next step's started), then the dispatch layout.
void ExpertParallelExecutor::forward_layout(int layer, int N, const int* expert_idx) {
    const int D = D_, E = E_, K = K_, r = rank();
    const bool blockwise = schedule_.mode == EpScheduleMode::kBlockwise;
    LayerState& st = layers_[layer];
    MoeLayerStats& stats = st.stats;
    const int64_t t0 = now_ns();
    local_counts_.resize(E);
    moe_layout_count(N, K, E, expert_idx, local_counts_.data());
    stats.counts.resize(static_cast<size_t>(D) * E);
    moe_notify(comm_, E, local_counts_.data(), stats.counts.data());
    stats.layout_ms = ms_since(t0);
    record(OpKind::kLayout, layer, t0, now_ns());

    int64_t t1 = now_ns();
    if (blockwise) {
        stats.placement = ahead_placement_[layer];
        stats.plan_wait_ms = layer == 0 ? layer0_plan_wait_ms_ : next_plan_wait_ms_;
        stats.trans_exposed_ms = carried_trans_wait_ms_[layer];
        if (observe_) observe_(layer, stats.counts.data());
    } else {
        stats.placement = plan(layer, stats.counts.data());
    }
    stats.route = route_layer(stats);
    stats.plan_ms = ms_since(t1);
    record(OpKind::kPlan, layer, t1, now_ns());  // the blocking planner, or taking the fetched placement

    // NOTE: the consistency check is a collective, so it also absorbs the ranks' skew; it counts as layout
    t1 = now_ns();
    if (!blockwise) check_same_placement(layer, stats.placement);
    moe_layout_build_split(r, D, E, N, K, expert_idx, stats.counts.data(), stats.route, &st.layout);
    const MoeDispatchLayout& lo = st.layout;
    stats.layout_ms += ms_since(t1);
    stats.rows_sent = lo.num_send_rows - lo.send_rows[r];
    stats.rows_received = lo.num_recv_rows - lo.recv_rows[r];
    stats.rows_computed = lo.num_recv_rows;
    record(OpKind::kLayout, layer, t1, now_ns());
}

RouteSplit ExpertParallelExecutor::route_layer(const MoeLayerStats& stats) {
    const CostModel* pricing = route_priced_ ? &route_cost_ : nullptr;
    if (!solves_split_per_batch(rule_) || D_ == 1)
        return route_split(stats.counts.data(), stats.placement, rule_, pricing);
    RouteSplit split;
    if (rank() == 0) {
        split = route_split(stats.counts.data(), stats.placement, rule_, pricing);
    } else {
        split.num_devices = D_;
        split.num_experts = E_;
        split.group_start.resize(static_cast<size_t>(D_) * E_ + 1);
    }
    comm_->broadcast(split.group_start.data(), sizeof(int) * split.group_start.size(), 0);
    const size_t parts = static_cast<size_t>(split.group_start.back());
    split.part_device.resize(parts);
    split.part_tokens.resize(parts);
    if (parts == 0) return split;  // every rank knows: the counts were all zero
    comm_->broadcast(split.part_device.data(), sizeof(int) * parts, 0);
    comm_->broadcast(split.part_tokens.data(), sizeof(int64_t) * parts, 0);
    return split;
}

// Trans of layer's placement: inline, or wait for this layer's parts (block-wise), or launch it whole beside the
// dispatch all-to-all (FasterMoE: its shadow broadcast overlaps the token sends; returns its ticket, else 0).
int64_t ExpertParallelExecutor::forward_trans(int layer) {
    MoeLayerStats& stats = layers_[layer].stats;
    const int64_t t1 = now_ns();
    if (schedule_.mode == EpScheduleMode::kFasterMoE)
        return submit_transfer(true, layer, 0, moe_moving_experts(stats.placement), &stats.placement);
    if (schedule_.mode == EpScheduleMode::kBlockwise) {
        const double before = carried_trans_wait_ms_[layer];
        wait_transfer(true, layer, trans_ticket_[layer]);
        stats.trans_exposed_ms += carried_trans_wait_ms_[layer] - before;
        return 0;
    }
    const int r = rank();
    float* const* params = storage_.params.data() + static_cast<size_t>(layer) * E_;  // [E]
    if (resident_replicas_ && last_trans_.empty()) last_trans_.assign(L_, Placement{});
    compute_->params_to_host(layer, staged_experts(stats.placement, r, StageSet::kTransSend));
    moe_trans(comm_, stats.placement, params, 2 * static_cast<size_t>(C_) * F_, kTagTrans, nullptr,
              resident_replicas_ ? &last_trans_[layer] : nullptr);
    compute_->params_from_host(layer, staged_experts(stats.placement, r, StageSet::kTransReceive));
    if (resident_replicas_) last_trans_[layer] = stats.placement;
    stats.trans_ms = ms_since(t1);
    stats.trans_exposed_ms = stats.trans_ms;
    if (timeline_ != nullptr) timeline_->add(OpKind::kTrans, OpLane::kCompute, layer, 0, t1, now_ns());
    return 0;
}

// Dispatch: h [N,C] packed by destination, exchanged, sorted by expert into the layer's x [M_recv,C].
void ExpertParallelExecutor::forward_dispatch(int layer, const float* h) {
    const int C = C_;
    LayerState& st = layers_[layer];
    const MoeDispatchLayout& lo = st.layout;
    const int64_t t1 = now_ns();
    size_exchange_buffers(layer, st.x);
    moe_dispatch_pack(lo, C, h, send_.data());
    const int64_t t2 = now_ns();
    record(OpKind::kPack, layer, t1, t2);
    exchange_and_sort(layer, OpKind::kDispatch, t2, st.x);
    st.stats.dispatch_fwd_ms = ms_since(t1);
}

void ExpertParallelExecutor::size_exchange_buffers(int layer, RowsVector<float>& sorted) {
    const MoeDispatchLayout& lo = layers_[layer].layout;
    send_.resize(static_cast<size_t>(lo.num_send_rows) * C_);
    recv_.resize(static_cast<size_t>(lo.num_recv_rows) * C_);
    sorted.resize(static_cast<size_t>(lo.num_recv_rows) * C_);
}

void ExpertParallelExecutor::exchange_and_sort(int layer, OpKind kind, int64_t packed_ns, RowsVector<float>& sorted) {
    const MoeDispatchLayout& lo = layers_[layer].layout;
    moe_dispatch_exchange(comm_, lo, C_, send_.data(), recv_.data());
    const int64_t exchanged_ns = now_ns();
    record(kind, layer, packed_ns, exchanged_ns);
    moe_dispatch_sort(lo, C_, recv_.data(), sorted.data());
    record(OpKind::kPack, layer, exchanged_ns, now_ns());
}

// The experts this rank holds over their rows: x [M_recv,C] -> sorted_ [M_recv,C].
void ExpertParallelExecutor::forward_experts(int layer) {
    LayerState& st = layers_[layer];
    const MoeDispatchLayout& lo = st.layout;
    const int64_t t1 = now_ns();
    sorted_.resize(static_cast<size_t>(lo.num_recv_rows) * C_);
    if (identity_experts_) {
        std::copy(st.x.begin(), st.x.end(), sorted_.begin());
    } else {
        for (int e = 0; e < E_; e++)
            PROPHET_ASSERT_MSG(lo.expert_offsets[e + 1] == lo.expert_offsets[e] || st.stats.placement.holds(e, rank()),
                               "rows routed to a rank that does not hold the expert");
        compute_->forward(layer, lo.expert_offsets, st.x.data(), sorted_.data());
    }
    st.stats.expert_fwd_ms = ms_since(t1);
    record(OpKind::kFec, layer, t1, now_ns());
}

// Combine: the rows back to their sources, then out [N,C] = the gate-weighted sum over k.
void ExpertParallelExecutor::forward_combine(int layer, int N, const float* gate_w, float* out) {
    const int C = C_;
    LayerState& st = layers_[layer];
    const MoeDispatchLayout& lo = st.layout;
    const int64_t t1 = now_ns();
    st.y_src.resize(static_cast<size_t>(lo.num_send_rows) * C);
    moe_combine_unsort(lo, C, sorted_.data(), recv_.data());
    const int64_t t2 = now_ns();
    record(OpKind::kPack, layer, t1, t2);
    moe_combine_exchange(comm_, lo, C, recv_.data(), st.y_src.data());
    const int64_t t3 = now_ns();
    record(OpKind::kCombine, layer, t2, t3);
    st.gate_w.assign(gate_w, gate_w + static_cast<size_t>(N) * K_);
    moe_combine_reduce(lo, C, st.gate_w.data(), st.y_src.data(), out);
    record(OpKind::kUnpack, layer, t3, now_ns());
    st.stats.combine_fwd_ms = ms_since(t1);
}

void ExpertParallelExecutor::backward(int layer, int N, const float* dout, float* dh, float* dgate_w) {
    PROPHET_ASSERT(layer >= 0 && layer < L_);
    const bool blockwise = schedule_.mode == EpScheduleMode::kBlockwise;
    LayerState& st = layers_[layer];
    PROPHET_ASSERT_MSG(st.layout.num_tokens == N, "backward called with a different N than forward");

    // block-wise: Agg(l+1)'s part beside BNEC(l+1) must be done before this layer's all-to-alls
    if (blockwise && layer + 1 < L_) wait_transfer(false, layer + 1, agg_ticket_[layer + 1]);
    backward_dispatch(layer, dout, dgate_w);

    // block-wise: the rest of Agg(l+1) beside this BEC
    int64_t prev_bec_ticket = 0;
    if (blockwise && layer + 1 < L_)
        prev_bec_ticket =
            submit_transfer(false, layer + 1, 2, std::move(agg_pending_[layer + 1]), &ahead_placement_[layer + 1]);
    backward_experts(layer);
    if (prev_bec_ticket != 0) wait_transfer(false, layer + 1, prev_bec_ticket);

    // FasterMoE: Agg(l) whole beside the combine all-to-all below (its reduce to the owner overlaps the backward
    // all-to-all); the gradients are complete once the expert backward above has run
    const int64_t fastermoe_agg =
        schedule_.mode == EpScheduleMode::kFasterMoE
            ? submit_transfer(false, layer, 0, moe_moving_experts(st.stats.placement), &st.stats.placement)
            : 0;
    backward_combine(layer, dh);
    backward_agg(layer, fastermoe_agg);
}

// Combine backward at the source (dout [N,C] -> dgate_w and the rows' dy), then dy dispatched to where each row
// was computed, sorted by expert into sorted_ [M_recv,C].
void ExpertParallelExecutor::backward_dispatch(int layer, const float* dout, float* dgate_w) {
    const int C = C_;
    LayerState& st = layers_[layer];
    const MoeDispatchLayout& lo = st.layout;
    const int64_t t0 = now_ns();
    size_exchange_buffers(layer, sorted_);
    moe_combine_reduce_backward(lo, C, st.gate_w.data(), dout, st.y_src.data(), dgate_w, send_.data());
    const int64_t t1 = now_ns();
    record(OpKind::kPack, layer, t0, t1);
    exchange_and_sort(layer, OpKind::kDispatchBwd, t1, sorted_);
    st.stats.dispatch_bwd_ms = ms_since(t0);
}

// The experts' backward: sorted_ dy [M_recv,C] -> dx_sorted_ [M_recv,C] (and the experts' gradients).
void ExpertParallelExecutor::backward_experts(int layer) {
    LayerState& st = layers_[layer];
    const int64_t t0 = now_ns();
    dx_sorted_.resize(static_cast<size_t>(st.layout.num_recv_rows) * C_);
    if (identity_experts_) {
        std::copy(sorted_.begin(), sorted_.end(), dx_sorted_.begin());
    } else {
        compute_->backward(layer, st.layout.expert_offsets, st.x.data(), sorted_.data(), dx_sorted_.data());
    }
    st.stats.expert_bwd_ms = ms_since(t0);
    record(OpKind::kBec, layer, t0, now_ns());
}

// dx back to the sources: dh [N,C] = the sum over k of each token's rows.
void ExpertParallelExecutor::backward_combine(int layer, float* dh) {
    const int C = C_;
    LayerState& st = layers_[layer];
    const MoeDispatchLayout& lo = st.layout;
    const int64_t t0 = now_ns();
    moe_combine_unsort(lo, C, dx_sorted_.data(), recv_.data());
    const int64_t t1 = now_ns();
    record(OpKind::kPack, layer, t0, t1);
    moe_combine_exchange(comm_, lo, C, recv_.data(), send_.data());
    const int64_t t2 = now_ns();
    record(OpKind::kCombineBwd, layer, t1, t2);
    moe_dispatch_pack_backward(lo, C, send_.data(), dh);
    record(OpKind::kUnpack, layer, t2, now_ns());
    st.stats.combine_bwd_ms = ms_since(t0);
}

// Agg: inline, or split: beside BNEC(l) now, the rest beside BEC(l-1) (layer 0: all beside BNEC(0)), or
// (FasterMoE) wait for it here: what follows block l's backward waits for both the all-to-all and Agg(l)
void ExpertParallelExecutor::backward_agg(int layer, int64_t fastermoe_agg) {
    MoeLayerStats& stats = layers_[layer].stats;
    const int64_t t0 = now_ns();
    if (schedule_.mode == EpScheduleMode::kFasterMoE) {
        wait_transfer(false, layer, fastermoe_agg);
        agg_ticket_[layer] = 0;  // waited: finish_backward has nothing left to wait for here
    } else if (schedule_.mode == EpScheduleMode::kBlockwise) {
        TransferParts parts = split_layer(layer, ahead_placement_[layer], schedule_.bnec_s);  // BNEC(l) window
        agg_pending_[layer] = std::move(parts.beside_expert);
        submit_transfer(false, layer, 1, std::move(parts.beside_nec), &ahead_placement_[layer]);
    } else {
        float* const* grads = storage_.grads.data() + static_cast<size_t>(layer) * E_;  // [E]
        const std::vector<uint8_t> members = staged_experts(stats.placement, rank(), StageSet::kAggMembers);
        compute_->grads_to_host(layer, members);
        moe_agg(comm_, stats.placement, grads, 2 * static_cast<size_t>(C_) * F_, kTagAgg);
        compute_->grads_from_host(layer, members);
        stats.agg_ms = ms_since(t0);
        stats.agg_exposed_ms = stats.agg_ms;
        if (timeline_ != nullptr) timeline_->add(OpKind::kAgg, OpLane::kCompute, layer, 0, t0, now_ns());
    }
}

}  // namespace prophet
