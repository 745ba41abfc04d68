// ep_executor.cpp: ExpertParallelExecutor, the stages of layout.h, dispatch.h, experts.h and trans_agg.h in order,
// blocking, with per-layer timings (see ep_executor.h).
#include "moe/ep_executor.h"

#include <algorithm>
#include <string>

#include "comm/comm.h"
#include "core/error.h"
#include "core/timer.h"
#include "model/moe_gpt.h"
#include "moe/dispatch.h"
#include "moe/experts.h"
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
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](const void* data, size_t bytes) {
        const unsigned char* b = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < bytes; i++) {
            h ^= b[i];
            h *= 1099511628211ull;
        }
    };
    mix(&p.num_devices, sizeof(int));
    mix(&p.num_experts, sizeof(int));
    mix(p.owner.data(), sizeof(int) * p.owner.size());
    mix(p.replica.data(), p.replica.size());
    return h;
}

}  // namespace

ExpertStorage expert_storage_from_model(Model<float>& model) {
    const int L = model.config.L, E = model.config.E;
    ExpertStorage storage;
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            storage.params.push_back(model_expert_params(model, l, e).data);
            storage.grads.push_back(model_expert_grads(model, l, e).data);
        }
    return storage;
}

ExpertParallelExecutor::ExpertParallelExecutor(Communicator* comm, int L, int E, int K, int C, int F, RouteRule rule,
                                               ExpertStorage storage)
    : comm_(comm), L_(L), E_(E), K_(K), C_(C), F_(F), D_(comm->size()), rule_(rule), storage_(std::move(storage)),
      layers_(L) {
    PROPHET_ASSERT(L > 0 && E > 0 && K > 0 && K <= E && C > 0 && F > 0);
    PROPHET_ASSERT_MSG(E % D_ == 0, "expert parallelism needs E (" + std::to_string(E) +
                                        ") divisible by the number of ranks (" + std::to_string(D_) + ")");
    PROPHET_ASSERT((int)storage_.params.size() == L * E && (int)storage_.grads.size() == L * E);
}

ExpertParallelExecutor::ExpertParallelExecutor(Communicator* comm, Model<float>& model, RouteRule rule)
    : ExpertParallelExecutor(comm, model.config.L, model.config.E, model.config.K, model.config.C,
                             model.config.hidden_size(), rule, expert_storage_from_model(model)) {}

int ExpertParallelExecutor::rank() const { return comm_->rank(); }

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
    }
    return sum;
}

Placement ExpertParallelExecutor::plan(int layer, const int64_t* counts) {
    Placement p = provider_ ? provider_(layer, counts) : Placement::make_static(D_, E_);
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

void ExpertParallelExecutor::forward(int layer, int N, const float* h, const int* expert_idx, const float* gate_w,
                                     float* out) {
    PROPHET_ASSERT(layer >= 0 && layer < L_ && N >= 0);
    const int D = D_, E = E_, K = K_, C = C_, F = F_, r = rank();
    LayerState& st = layers_[layer];
    MoeLayerStats& stats = st.stats;
    stats = MoeLayerStats{};
    float* const* params = storage_.params.data() + (size_t)layer * E;  // [E]

    // ---- layout + notify
    int64_t t0 = now_ns();
    local_counts_.resize(E);
    moe_layout_count(N, K, E, expert_idx, local_counts_.data());
    stats.counts.resize((size_t)D * E);
    moe_notify(comm_, E, local_counts_.data(), stats.counts.data());
    stats.layout_ms = ms_since(t0);

    // ---- plan
    t0 = now_ns();
    stats.placement = plan(layer, stats.counts.data());
    stats.destination = routing_destination(stats.counts.data(), stats.placement, rule_);
    stats.plan_ms = ms_since(t0);

    // NOTE: the consistency check is a collective, so it also absorbs the ranks' skew; it counts as layout
    t0 = now_ns();
    check_same_placement(layer, stats.placement);
    moe_layout_build(r, D, E, N, K, expert_idx, stats.counts.data(), stats.destination.data(), &st.layout);
    const MoeDispatchLayout& lo = st.layout;
    const int64_t M_send = lo.num_send_rows, M_recv = lo.num_recv_rows;
    stats.layout_ms += ms_since(t0);
    stats.rows_sent = M_send - lo.send_rows[r];
    stats.rows_received = M_recv - lo.recv_rows[r];
    stats.rows_computed = M_recv;

    // ---- Trans
    t0 = now_ns();
    moe_trans(comm_, stats.placement, params, 2 * (size_t)C * F, kTagTrans);
    stats.trans_ms = ms_since(t0);

    // ---- dispatch
    t0 = now_ns();
    send_.resize((size_t)M_send * C);
    recv_.resize((size_t)M_recv * C);
    st.x.resize((size_t)M_recv * C);
    moe_dispatch(comm_, lo, C, h, send_.data(), recv_.data(), st.x.data());
    stats.dispatch_fwd_ms = ms_since(t0);

    // ---- experts
    t0 = now_ns();
    sorted_.resize((size_t)M_recv * C);
    if (identity_experts_) {
        std::copy(st.x.begin(), st.x.end(), sorted_.begin());
        st.pre.clear();
        st.act.clear();
    } else {
        st.pre.resize((size_t)M_recv * F);
        st.act.resize((size_t)M_recv * F);
        for (int e = 0; e < E; e++) {
            const int64_t begin = lo.expert_offsets[e];
            const int M_e = (int)(lo.expert_offsets[e + 1] - begin);
            if (M_e == 0) continue;
            PROPHET_ASSERT_MSG(stats.placement.holds(e, r), "rows routed to a rank that does not hold the expert");
            moe_expert_forward(M_e, C, F, st.x.data() + (size_t)begin * C, params[e], params[e] + (size_t)C * F,
                               st.pre.data() + (size_t)begin * F, st.act.data() + (size_t)begin * F,
                               sorted_.data() + (size_t)begin * C);
        }
    }
    stats.expert_fwd_ms = ms_since(t0);

    // ---- combine
    t0 = now_ns();
    st.y_src.resize((size_t)M_send * C);
    moe_combine(comm_, lo, C, sorted_.data(), recv_.data(), st.y_src.data());
    st.gate_w.assign(gate_w, gate_w + (size_t)N * K);
    moe_combine_reduce(lo, C, st.gate_w.data(), st.y_src.data(), out);
    stats.combine_fwd_ms = ms_since(t0);
}

void ExpertParallelExecutor::backward(int layer, int N, const float* dout, float* dh, float* dgate_w) {
    PROPHET_ASSERT(layer >= 0 && layer < L_);
    const int E = E_, C = C_, F = F_;
    LayerState& st = layers_[layer];
    MoeLayerStats& stats = st.stats;
    const MoeDispatchLayout& lo = st.layout;
    PROPHET_ASSERT_MSG(lo.num_tokens == N, "backward called with a different N than forward");
    const int64_t M_send = lo.num_send_rows, M_recv = lo.num_recv_rows;
    float* const* params = storage_.params.data() + (size_t)layer * E;  // [E]
    float* const* grads = storage_.grads.data() + (size_t)layer * E;    // [E]

    // ---- combine backward at the source, then dispatch dy to where each row was computed
    int64_t t0 = now_ns();
    send_.resize((size_t)M_send * C);
    recv_.resize((size_t)M_recv * C);
    sorted_.resize((size_t)M_recv * C);
    moe_combine_reduce_backward(lo, C, st.gate_w.data(), dout, st.y_src.data(), dgate_w, send_.data());
    moe_dispatch_exchange(comm_, lo, C, send_.data(), recv_.data());
    moe_dispatch_sort(lo, C, recv_.data(), sorted_.data());
    stats.dispatch_bwd_ms = ms_since(t0);

    // ---- experts backward
    t0 = now_ns();
    dx_sorted_.resize((size_t)M_recv * C);
    if (identity_experts_) {
        std::copy(sorted_.begin(), sorted_.end(), dx_sorted_.begin());
    } else {
        dpre_.resize((size_t)M_recv * F);
        for (int e = 0; e < E; e++) {
            const int64_t begin = lo.expert_offsets[e];
            const int M_e = (int)(lo.expert_offsets[e + 1] - begin);
            if (M_e == 0) continue;
            moe_expert_backward(M_e, C, F, st.x.data() + (size_t)begin * C, st.pre.data() + (size_t)begin * F,
                                st.act.data() + (size_t)begin * F, sorted_.data() + (size_t)begin * C, params[e],
                                params[e] + (size_t)C * F, grads[e], grads[e] + (size_t)C * F,
                                dpre_.data() + (size_t)begin * F, dx_sorted_.data() + (size_t)begin * C);
        }
    }
    stats.expert_bwd_ms = ms_since(t0);

    // ---- combine dx back to the sources
    t0 = now_ns();
    moe_combine(comm_, lo, C, dx_sorted_.data(), recv_.data(), send_.data());
    moe_dispatch_pack_backward(lo, C, send_.data(), dh);
    stats.combine_bwd_ms = ms_since(t0);

    // ---- Agg
    t0 = now_ns();
    moe_agg(comm_, stats.placement, grads, 2 * (size_t)C * F, kTagAgg);
    stats.agg_ms = ms_since(t0);
}

}  // namespace prophet
