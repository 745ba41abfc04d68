// op_model.cpp: predicted durations of a recorded step's ops from their features (see op_model.h).
#include "sim/op_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "balance/placement.h"
#include "core/enum_table.h"
#include "core/error.h"
#include "core/stats.h"
#include "sim/dense_ops.h"

namespace prophet::sim {

namespace {

constexpr double kFloat = 4.0;  // bytes of one fp32 value

double stream_s(const OpTables& t, double bytes) { return t.stream_latency_s + bytes / t.stream_bytes_per_s; }

// One axis of the GEMM grid at coordinate x: the lower grid index i and the weight w of index i + 1, linear in log x
// between axis[i] and axis[i + 1]; x beyond the axis is clamped to its end (w = 0 or 1).
struct AxisCell {
    size_t i = 0;
    double w = 0;
};
AxisCell axis_cell(const std::vector<double>& axis, double x) {
    if (axis.size() == 1 || x <= axis.front()) return {0, 0.0};
    if (x >= axis.back()) return {axis.size() - 2, 1.0};
    size_t i = 0;
    while (axis[i + 1] < x) ++i;
    return {i, std::log(x / axis[i]) / std::log(axis[i + 1] / axis[i])};
}

// rows of expert e each rank computes at one layer: [D][E], from the counts, the placement the layer used and the
// layer's flow under the run's rule (compute_flow: its destination, or under kFlow / kMaxFlow its rows per expert and
// device)
std::vector<double> expert_rows(const OpModelConfig& c, const int64_t* counts, const Placement& p,
                                const LayerFlow& flow) {
    const int D = c.D, E = c.E;
    std::vector<double> rows(static_cast<size_t>(D) * E, 0.0);
    const RouteRule rule = parse_route_rule(c.route_rule);
    if (rule == RouteRule::kEvenSplit) {  // every holder computes an equal share of every device's tokens
        for (int e = 0; e < E; ++e) {
            int holders = 0;
            for (int d = 0; d < D; ++d) holders += p.holds(e, d) ? 1 : 0;
            double total = 0;
            for (int d = 0; d < D; ++d) total += static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
            for (int d = 0; d < D; ++d)
                if (p.holds(e, d)) rows[static_cast<size_t>(d) * E + e] = total / std::max(1, holders);
        }
        return rows;
    }
    if (solves_split_per_batch(rule)) {  // the split's rows per (device, expert), unit prices (no cost model here)
        for (int e = 0; e < E; ++e)
            for (int d = 0; d < D; ++d)
                rows[static_cast<size_t>(d) * E + e] =
                    static_cast<double>(flow.expert_device[static_cast<size_t>(e) * D + d]);
        return rows;
    }
    for (int src = 0; src < D; ++src)
        for (int e = 0; e < E; ++e) {
            const int dst = flow.destination[static_cast<size_t>(src) * E + e];  // routing_destination's
            if (dst >= 0 && dst < D)
                rows[static_cast<size_t>(dst) * E + e] += static_cast<double>(counts[static_cast<size_t>(src) * E + e]);
        }
    return rows;
}

// Features of one layer of one step: rows per expert per rank, all-to-all rows out/in per rank, Trans bytes.
struct LayerFeatures {
    std::vector<double> rows;       // [D][E] expert rows computed
    std::vector<double> sent, recv;  // [D] token rows sent to / received from other ranks in the dispatch
    // [D] the peers a rank sends a non-empty part to: in the dispatch (and combine_bwd), and in the combine (and
    // dispatch_bwd: the mirror image). The emulated link sends no message for an empty part (comm/comm_paced.cpp).
    std::vector<int> dispatch_out_messages, combine_out_messages;
    std::vector<double> moved;      // [D] expert parameter bytes a rank sends or receives in Trans (and Agg)
    std::vector<int> messages;      // [D] Trans messages of a rank (sent and received)
    // [D] what a rank sends (its egress): in Trans the home sends an expert to each other holder; in Agg each
    // other holder sends its gradient back to the home. Bytes and messages.
    std::vector<double> trans_out, agg_out;
    std::vector<int> trans_out_messages, agg_out_messages;
};

LayerFeatures layer_features(const OpModelConfig& c, const RecordedStep& step, int layer) {
    const int D = c.D, E = c.E;
    LayerFeatures f;
    f.rows.assign(static_cast<size_t>(D) * E, 0.0);
    f.sent.assign(D, 0.0);
    f.recv.assign(D, 0.0);
    f.moved.assign(D, 0.0);
    f.messages.assign(D, 0);
    f.dispatch_out_messages.assign(D, 0);
    f.combine_out_messages.assign(D, 0);
    f.trans_out.assign(D, 0.0);
    f.agg_out.assign(D, 0.0);
    f.trans_out_messages.assign(D, 0);
    f.agg_out_messages.assign(D, 0);
    const Placement& p = step.placements.at(layer);
    if (step.counts.empty()) return f;
    const int64_t* counts = step.counts.data() + static_cast<size_t>(layer) * D * E;
    // the rule's exact route (as the trainer routes; a holder of a replica keeps its own tokens under the owner
    // rule, so a share by rows would miscount them): the rows each rank computes, sends and receives in the dispatch
    const LayerFlow flow = compute_flow(counts, D, E, p, parse_route_rule(c.route_rule));
    f.rows = expert_rows(c, counts, p, flow);
    for (int d = 0; d < D; ++d) {
        f.sent[d] = static_cast<double>(flow.sent[d]);
        f.recv[d] = static_cast<double>(flow.received[d]);
        for (int peer = 0; peer < D; ++peer) {
            if (peer == d) continue;
            f.dispatch_out_messages[d] += flow.route[static_cast<size_t>(d) * D + peer] > 0 ? 1 : 0;
            f.combine_out_messages[d] += flow.route[static_cast<size_t>(peer) * D + d] > 0 ? 1 : 0;
        }
    }
    // Trans: the expert's home (static layout) sends 2CF floats to every other holder (moe_trans)
    const double expert_bytes = 2.0 * c.C * c.F * kFloat;
    const int per_rank = E / D;
    for (int e = 0; e < E; ++e) {
        const int home = e / per_rank;
        for (int d = 0; d < D; ++d)
            if (d != home && p.holds(e, d)) {
                f.moved[home] += expert_bytes;
                f.moved[d] += expert_bytes;
                ++f.messages[home];
                ++f.messages[d];
                f.trans_out[home] += expert_bytes;
                ++f.trans_out_messages[home];
                f.agg_out[d] += expert_bytes;
                ++f.agg_out_messages[d];
            }
    }
    return f;
}

double dense_params(const OpModelConfig& c) {
    const double C = c.C;
    return c.V * C + c.T * C + c.L * (4 * C + 3 * C * C + 3 * C + C * C + C + C * c.E) + 2 * C;
}

// backward of a linear layer out[M, n] = x[M, k] W[k, n]: dx = dy W^T (an [M, k] output over n) and dW = x^T dy
double linear_bwd_s(const OpTables& t, double m, int n, int k) {
    return gemm_seconds(t, m, k, n, GemmOp::kNT) + gemm_seconds(t, m, n, k, GemmOp::kTN);
}

// per-rank compute of the non-expert ops (seconds), by kind and occurrence within the block
double dense_op_s(const OpTables& t, const OpModelConfig& c, prophet::OpKind kind, int occurrence) {
    const double N = static_cast<double>(c.B) / c.D * c.T;  // tokens of this rank
    const double C = c.C, act = N * C * kFloat;            // one activation [N, C] in bytes
    const double hd = C / std::max(1, c.NH);
    const double attn_core = static_cast<double>(c.B) / c.D * c.NH * c.T * c.T * hd * 4.0;  // QK^T + PV, FLOP
    const double attn_rate = attn_flops_per_s(t, c.C, c.NH);
    using K = prophet::OpKind;
    switch (kind) {
        case K::kData:  // zero_grad over the whole model (every rank keeps every expert's storage) + the batch
            return stream_s(t, (dense_params(c) + static_cast<double>(c.L) * c.E * 2.0 * c.C * c.F) * kFloat + N * 8.0);
        case K::kEmbed: return stream_s(t, 3 * act);
        case K::kEmbedBwd: return stream_s(t, 3 * act);
        case K::kAttn:
            if (occurrence > 0) return stream_s(t, 3 * act);  // the MoE residual add
            return stream_s(t, 2 * act) + gemm_seconds(t, N, 3 * c.C, c.C) + attn_core / attn_rate +
                   gemm_seconds(t, N, c.C, c.C) + stream_s(t, 3 * act);
        case K::kAttnBwd:  // qkv and proj: dx = dy W^T and dW = x^T dy each
            return linear_bwd_s(t, N, 3 * c.C, c.C) + linear_bwd_s(t, N, c.C, c.C) + 2 * attn_core / attn_rate +
                   2 * stream_s(t, 3 * act);
        case K::kGate: return stream_s(t, 2 * act) + gemm_seconds(t, N, c.E, c.C) + stream_s(t, N * c.E * kFloat * 4);
        case K::kGateBwd: return linear_bwd_s(t, N, c.E, c.C) + stream_s(t, 3 * act);
        case K::kHead:  // logits = x wte^T (wte [V, C])
            return stream_s(t, 2 * act) + gemm_seconds(t, N, c.V, c.C, GemmOp::kNT) +
                   stream_s(t, 3 * N * c.V * kFloat);
        case K::kHeadBwd:  // dx = dlogits wte, dwte = dlogits^T x
            return gemm_seconds(t, N, c.C, c.V) + gemm_seconds(t, N, c.C, c.V, GemmOp::kTN) +
                   stream_s(t, 3 * N * c.V * kFloat + 2 * act);
        default: return 0.0;
    }
}

// An expert's weights come from memory, not cache, in the step: no op touched them since the other pass, while the
// GEMM grid times each shape on hot buffers (calibrate_ops.cpp). Forward reads W1 and W2 (2 C F floats); backward
// reads them again for dx and reads and writes their gradients for dW. The cost is per expert and not per row, so
// an expert with few rows (small K, many experts) pays relatively more: in the wide campaign of 2026-12-03 the
// expert backward of the K = 1 points was 8-21% above the model without it, of the K = 2 points -3 .. +11%.
double cold_weight_bytes(const OpModelConfig& c, bool backward) {
    const double weights = 2.0 * c.C * c.F * kFloat;
    return backward ? 3 * weights : weights;
}

double expert_s(const OpTables& t, const OpModelConfig& c, const LayerFeatures& f, int rank, bool backward) {
    double s = 0;
    for (int e = 0; e < c.E; ++e) {
        const double m = f.rows[static_cast<size_t>(rank) * c.E + e];
        if (m <= 0) continue;
        // x W1 [C, F], h W2 [F, C]; backward: each layer's dx = dy W^T and dW = x^T dy (moe/experts.cpp)
        const double gemms = backward ? linear_bwd_s(t, m, c.F, c.C) + linear_bwd_s(t, m, c.C, c.F)
                                      : gemm_seconds(t, m, c.F, c.C) + gemm_seconds(t, m, c.C, c.F);
        s += gemms + stream_s(t, (backward ? 3 : 2) * m * c.F * kFloat);  // gelu (')
        s += stream_s(t, cold_weight_bytes(c, backward));
    }
    return s;
}

// bytes over the table's bandwidth; with an emulated link also the link's egress (out: the bytes the rank sends) and
// per message the link's latency and the emulation's own cost (link_message_s). The two add: the emulation holds
// a message until its paced release and only then hands it to the inner communicator, whose copy takes its own
// time (comm/comm_paced.h), which is also how calibrate_ops.cpp's link_message_seconds leaves link_message_s over.
double wire_s(const OpTables& t, const OpModelConfig& c, double bytes, double out, double table_bytes_per_s,
              int messages) {
    double s = bytes / table_bytes_per_s;
    if (c.link_bytes_per_s > 0) s += out / c.link_bytes_per_s + messages * (c.link_latency_s + t.link_message_s);
    return s;
}

// whether op i of g gets its kind's in_step_s (OpTables::in_step_s): an in-step kind, a layout only as the counts
// all-gather (a collective unit), and the kinds priced over the emulated link only when the run has none
bool in_step_applies(const OpModelConfig& c, const ReplayGraph& g, size_t i) {
    using K = prophet::OpKind;
    const K kind = g.ops[i].kind;
    if (!is_in_step_kind(kind)) return false;
    if (kind == K::kLayout) return g.collective[g.unit[i]] != 0;
    const bool over_link = kind == K::kDispatch || kind == K::kCombine || kind == K::kDispatchBwd ||
                           kind == K::kCombineBwd || kind == K::kTrans || kind == K::kAgg;
    return !(over_link && c.link_bytes_per_s > 0);
}

// One rank's part of an all-to-all. Over the emulated link its egress is paced: what it sends in the dispatch
// direction (dispatch, combine_bwd), or what it returns in the mirror direction (combine, dispatch_bwd).
double a2a_s(const OpTables& t, const OpModelConfig& c, const LayerFeatures& f, int rank, bool mirror) {
    const double bytes = std::max(f.sent[rank], f.recv[rank]) * c.C * kFloat;
    const double out = (mirror ? f.recv[rank] : f.sent[rank]) * c.C * kFloat;
    const int messages = mirror ? f.combine_out_messages[rank] : f.dispatch_out_messages[rank];
    return t.a2a_latency_s * (c.D - 1) + wire_s(t, c, bytes, out, t.a2a_bytes_per_s, messages);
}

constexpr EnumName<GemmOp> kGemmOpNames[] = {{GemmOp::kNN, "nn"}, {GemmOp::kNT, "nt"}, {GemmOp::kTN, "tn"}};

}  // namespace

const char* gemm_op_name(GemmOp op) { return enum_name(kGemmOpNames, op); }

double gemm_flops_per_s(const GemmGrid& g, double m, double n, double k, GemmOp op) {
    const std::vector<double>& rate = g.flops_per_s[static_cast<size_t>(op)];
    PROPHET_ASSERT_MSG(!g.empty() && rate.size() == g.m.size() * g.n.size() * g.k.size(),
                       "the [ops] GEMM grid has no rates for this op");
    const AxisCell cm = axis_cell(g.m, m), cn = axis_cell(g.n, n), ck = axis_cell(g.k, k);
    double r = 0;
    for (int corner = 0; corner < 8; ++corner) {  // the 8 grid points around (m, n, k), bit 2: M, 1: N, 0: K
        const int dm = (corner >> 2) & 1, dn = (corner >> 1) & 1, dk = corner & 1;
        const double w = (dm ? cm.w : 1 - cm.w) * (dn ? cn.w : 1 - cn.w) * (dk ? ck.w : 1 - ck.w);
        if (w == 0) continue;  // also keeps a one-point axis from reading past its end
        r += w * rate[((cm.i + dm) * g.n.size() + cn.i + dn) * g.k.size() + ck.i + dk];
    }
    return r;
}

double gemm_seconds(const OpTables& t, double m, int n, int k, GemmOp op) {
    if (m <= 0) return 0.0;
    return 2.0 * m * n * k / gemm_flops_per_s(t.gemm, m, n, k, op);
}

double ring_allreduce_seconds(const OpTables& t, double bytes, int D) {
    const std::vector<double>& x = t.allreduce_sizes_bytes;
    const std::vector<double>& y = t.allreduce_sizes_s;
    if (D <= 1 || x.empty() || D != t.allreduce_ranks || x.size() != y.size())
        return ring_all_reduce_s(bytes, D, t.allreduce_bytes_per_s, t.allreduce_latency_s);
    if (x.size() == 1 || bytes <= x.front()) return y.front();
    // the segment [x[i], x[i+1]] holding bytes, or the last one beyond the grid
    const size_t i = std::min<size_t>(std::upper_bound(x.begin(), x.end(), bytes) - x.begin(), x.size() - 1) - 1;
    const double slope = (y[i + 1] - y[i]) / (x[i + 1] - x[i]);
    return std::max(0.0, y[i] + slope * (bytes - x[i]));
}

double attn_flops_per_s(const OpTables& t, int C, int NH) {
    const auto it = t.attn_flops_per_s_at.find({C, NH});
    return it == t.attn_flops_per_s_at.end() ? t.attn_flops_per_s : it->second;
}

namespace {

// binding: each rank's CPU list, ";"-separated ("0;1"): true when every rank's list is one CPU
bool one_cpu_each(const std::string& binding) {
    if (binding.empty()) return false;
    size_t start = 0;
    while (start <= binding.size()) {
        const size_t end = std::min(binding.find(';', start), binding.size());
        if (end == start) return false;
        for (size_t i = start; i < end; ++i)
            if (binding[i] < '0' || binding[i] > '9') return false;  // a range "0-1" or a list "0,2"
        start = end + 1;
    }
    return true;
}

}  // namespace

OpModelConfig op_model_config(const RecordedRun& run) {
    OpModelConfig c;
    auto get = [&](const char* key) {
        const std::string v = run.param(key);
        if (v.empty()) throw_input_error("run " + run.run_id, std::string("has no param ") + key,
                                         "validate runs recorded by prophet train");
        return std::stoi(v);
    };
    c.V = get("model.V");
    c.T = get("model.T");
    c.C = get("model.C");
    c.NH = get("model.NH");
    c.L = get("model.L");
    c.E = get("model.E");
    c.K = get("model.K");
    c.F = get("model.F");
    if (c.F <= 0) c.F = 2 * c.C;  // model.F = 0 means 2C (model_config.h hidden_size)
    c.B = get("model.B");
    c.D = run.num_ranks;
    const std::string route = run.param("balance.route_to", "auto");
    c.route_rule = route == "auto" ? route_rule_name(paper_route_rule(run.param("balance.policy", "static"))) : route;
    c.link_bytes_per_s = std::stod(run.param("comm.link_gbps", "0")) * 1e9 / 8;
    c.link_latency_s = std::stod(run.param("comm.link_latency_us", "0")) * 1e-6;
    c.one_core_per_rank = run.param("testbed.pinned") == "true" && one_cpu_each(run.param("testbed.binding"));
    return c;
}

namespace {

// What predict_durations knows of one step while it models its ops: the layers' features (made on first use), the
// Trans/Agg parts recorded per (kind, block, rank) (a split transfer shares the block's bytes), and the bytes of
// the dense parameters and of one rank's home experts.
struct StepOpContext {
    const OpTables& t;
    const OpModelConfig& c;
    const RecordedStep& step;
    const ReplayGraph& g;
    std::map<int, LayerFeatures> layers;
    std::map<std::tuple<int, int, int>, int> parts;
    double dense_bytes = 0, home_expert_bytes = 0;

    const LayerFeatures& features(int layer) {
        auto it = layers.find(layer);
        if (it == layers.end()) it = layers.emplace(layer, layer_features(c, step, layer)).first;
        return it->second;
    }
};

// Pack / Unpack: streaming the rank's rows (its experts' rows, or what it sends or receives, whichever is most).
double pack_op_s(StepOpContext& x, const ReplayOp& op) {
    const OpModelConfig& c = x.c;
    const LayerFeatures& f = x.features(op.block);
    double rows = 0;
    for (int e = 0; e < c.E; ++e) rows += f.rows[static_cast<size_t>(op.rank) * c.E + e];
    rows = std::max({rows, f.sent[op.rank], f.recv[op.rank]});
    return stream_s(x.t, 2 * rows * c.C * kFloat);
}

// Trans / Agg: a unit over the ranks, the busiest one's transfer, shared by the block's recorded parts. Over an
// emulated link only what a rank SENDS is paced (its egress queue, comm/comm_paced.h): Trans's sender is the home,
// Agg's are the other holders, so two ranks that each send one expert take one expert's time at the link, not two.
double transfer_op_s(StepOpContext& x, const ReplayOp& op) {
    const OpTables& t = x.t;
    const OpModelConfig& c = x.c;
    const LayerFeatures& f = x.features(op.block);
    const int share = x.parts[{static_cast<int>(op.kind), op.block, op.rank}];
    const bool trans = op.kind == prophet::OpKind::kTrans;
    const std::vector<double>& out = trans ? f.trans_out : f.agg_out;
    const std::vector<int>& out_messages = trans ? f.trans_out_messages : f.agg_out_messages;
    double s = 0;
    for (int r = 0; r < c.D; ++r)
        s = std::max(
            s, t.p2p_latency_s * f.messages[r] + wire_s(t, c, f.moved[r], out[r], t.p2p_bytes_per_s, out_messages[r]));
    return s / std::max(1, share);
}

// The CPU seconds of one rank's part of a Trans/Agg: shared-memory MPI copies on the rank's own core, its latency
// per message and its bytes moved at the unpaced point-to-point rate. The emulated link's pacing is a sleep of its
// wire thread (comm/comm_paced.h), not CPU time.
double transfer_cpu_s(StepOpContext& x, const ReplayOp& op) {
    const LayerFeatures& f = x.features(op.block);
    const int share = x.parts[{static_cast<int>(op.kind), op.block, op.rank}];
    const double s = x.t.p2p_latency_s * f.messages[op.rank] + f.moved[op.rank] / x.t.p2p_bytes_per_s;
    return s / std::max(1, share);
}

// One core per rank: a Trans/Agg on the communication lane (the block-wise schedule) copies on the core the
// compute runs on, so the compute lane loses that CPU time. It is charged as lead of the compute-lane op that
// follows the transfer's submitter (a wait there absorbs it when the compute has nothing else to do). Measured:
// top2 block-wise without a link recorded 2.5-3 ms of lead per step, unmodelled before (docs/simulator.md).
void charge_shared_core(StepOpContext& x, ReplayDurations& d) {
    const ReplayGraph& g = x.g;
    const size_t n = g.ops.size();
    const auto on_compute = [&](int i) { return g.ops[i].lane == prophet::OpLane::kCompute; };
    std::vector<int> next(n, -1);  // the compute-lane op after compute-lane op i on its rank
    for (size_t j = 0; j < n; ++j)
        if (on_compute(static_cast<int>(j)))
            for (int dep : g.deps[j])
                if (on_compute(dep) && g.ops[dep].rank == g.ops[j].rank) next[dep] = static_cast<int>(j);
    for (size_t i = 0; i < n; ++i) {
        const ReplayOp& op = g.ops[i];
        if (op.lane != prophet::OpLane::kComm ||
            !(op.kind == prophet::OpKind::kTrans || op.kind == prophet::OpKind::kAgg))
            continue;
        for (int submitter : g.deps[i])
            if (on_compute(submitter) && next[submitter] >= 0)
                d.lead_us[next[submitter]] += transfer_cpu_s(x, op) * 1e6;
    }
}

// The modelled seconds of op i (the occurrence-th of its (rank, lane, kind, block)), before the fitted
// corrections.
double modelled_op_s(StepOpContext& x, size_t i, int occurrence) {
    using K = prophet::OpKind;
    const OpTables& t = x.t;
    const OpModelConfig& c = x.c;
    const ReplayGraph& g = x.g;
    const ReplayOp& op = g.ops[i];
    switch (op.kind) {
        case K::kFec:
            return expert_s(t, c, x.features(op.block), op.rank, false);
        case K::kBec:
            return expert_s(t, c, x.features(op.block), op.rank, true);
        case K::kDispatch:
        case K::kCombine:
        case K::kDispatchBwd:
        case K::kCombineBwd: {  // a collective: the slowest rank's exchange
            const LayerFeatures& f = x.features(op.block);
            const bool mirror = op.kind == K::kCombine || op.kind == K::kDispatchBwd;
            double s = 0;
            for (int r = 0; r < c.D; ++r) s = std::max(s, a2a_s(t, c, f, r, mirror));
            return s;
        }
        case K::kPack:
        case K::kUnpack:
            return pack_op_s(x, op);
        case K::kTrans:
        case K::kAgg:
            return transfer_op_s(x, op);
        case K::kLayout:  // the counts all-gather, or (a local unit) the blockwise dispatch-layout build
            return (g.collective[g.unit[i]] ? t.a2a_latency_s * (c.D - 1) : 0.0) + stream_s(t, c.D * c.E * 8.0);
        case K::kAllReduce:
            return ring_allreduce_seconds(t, x.dense_bytes, c.D);
        case K::kOptimizer:
            return ring_allreduce_seconds(t, 8, c.D) + stream_s(t, 7 * (x.dense_bytes + x.home_expert_bytes));
        case K::kStats:
            return 2 * ring_allreduce_seconds(t, 8 * 9, c.D) + stream_s(t, c.L * c.D * c.E * 8.0);
        case K::kPlan:
            return (op.end_us - op.start_us) * 1e-6;  // recorded (the policy's CPU time)
        case K::kTransWait:
        case K::kAggWait:
        case K::kPlanWait:
            return 0;
        default:
            return dense_op_s(t, c, op.kind, occurrence);
    }
}

}  // namespace

ReplayDurations predict_durations(const OpTables& t, const OpModelConfig& c, const RecordedStep& step,
                                  const ReplayGraph& g) {
    using K = prophet::OpKind;
    const size_t n = g.ops.size();
    ReplayDurations d;
    d.own_us.assign(n, 0.0);
    d.lead_us.assign(n, 0.0);
    StepOpContext x{t,
                    c,
                    step,
                    g,
                    {},
                    {},
                    dense_params(c) * kFloat,
                    static_cast<double>(c.L) * c.E / c.D * 2.0 * c.C * c.F * kFloat};
    std::map<std::tuple<int, int, int, int>, int> occurrences;  // (rank, lane, kind, block) -> seen so far
    for (const ReplayOp& op : g.ops)
        if (op.kind == K::kTrans || op.kind == K::kAgg) ++x.parts[{static_cast<int>(op.kind), op.block, op.rank}];
    for (size_t i = 0; i < n; ++i) {
        const ReplayOp& op = g.ops[i];
        const int occurrence = occurrences[{op.rank, static_cast<int>(op.lane), static_cast<int>(op.kind), op.block}]++;
        const double s = modelled_op_s(x, i, occurrence);
        const auto scale = t.scale.find(prophet::op_kind_name(op.kind));
        d.own_us[i] = s * 1e6 * (scale == t.scale.end() ? 1.0 : scale->second);
        const auto in_step = t.in_step_s.find(prophet::op_kind_name(op.kind));
        if (in_step != t.in_step_s.end() && in_step_applies(c, g, i)) d.own_us[i] += in_step->second * 1e6;
    }
    if (c.one_core_per_rank) charge_shared_core(x, d);
    return d;
}

namespace {

// f(graph, recorded, modelled) for every step of `run` a fit uses (steps 1.. with counts: step 0 is the warm-up),
// modelled with `tables`
template <class F>
void for_each_fit_step(const OpTables& tables, const RecordedRun& run, F f) {
    const OpModelConfig config = op_model_config(run);
    for (const RecordedStep& s : run.steps) {
        if (s.step == run.steps.front().step || s.counts.empty()) continue;  // the warm-up step
        const ReplayGraph g = build_replay_graph(s.ops, run.num_ranks, run.blockwise,
                                                 "run " + run.run_id + " step " + std::to_string(s.step));
        const ReplayDurations recorded = recorded_durations(g);
        const ReplayDurations modelled = predict_durations(tables, config, s, g);
        f(g, recorded, modelled);
    }
}

// Per kind fit_op_scales fits, in one step: its recorded own time summed over the step's ops and ranks over the
// modelled one (kinds with no time either way are left out).
std::map<std::string, double> step_scale_ratios(const ReplayGraph& g, const ReplayDurations& recorded,
                                                const ReplayDurations& modelled) {
    std::map<std::string, std::pair<double, double>> sums;  // kind -> (recorded, modelled) us
    for (size_t i = 0; i < g.ops.size(); ++i) {
        const prophet::OpKind kind = g.ops[i].kind;
        // NOTE: compute only: a communication kind's factor would carry the calibration's link to runs over
        // another (an emulated slow link; those kinds get an additive in_step_s instead, fit_in_step_overheads),
        // and the optimizer is AdamW's streams behind a one-number all-reduce
        if (is_wait_kind(kind) || kind == prophet::OpKind::kPlan ||
            (is_collective_kind(kind) && kind != prophet::OpKind::kOptimizer))
            continue;
        auto& [rec, mod] = sums[prophet::op_kind_name(kind)];
        rec += recorded.own_us[i];
        mod += modelled.own_us[i];
    }
    std::map<std::string, double> ratios;
    for (const auto& [kind, sum] : sums)
        if (sum.second > 0 && sum.first > 0) ratios[kind] = sum.first / sum.second;
    return ratios;
}

// Per kind of is_in_step_kind, per step 1.. of `run`: the mean over that kind's calls of recorded - modelled own
// time (us), appended to per_step[kind] (fit_in_step_overheads).
void add_in_step_differences(const OpTables& tables, const RecordedRun& run,
                             std::map<std::string, std::vector<double>>& per_step) {
    const OpModelConfig config = op_model_config(run);
    for_each_fit_step(tables, run,
                      [&](const ReplayGraph& g, const ReplayDurations& recorded, const ReplayDurations& modelled) {
                          std::map<std::string, std::pair<double, int>> sums;  // kind -> (sum of differences us, calls)
                          for (size_t i = 0; i < g.ops.size(); ++i) {
                              if (!in_step_applies(config, g, i)) continue;
                              auto& [diff, calls] = sums[prophet::op_kind_name(g.ops[i].kind)];
                              diff += recorded.own_us[i] - modelled.own_us[i];
                              ++calls;
                          }
                          for (const auto& [kind, sum] : sums) per_step[kind].push_back(sum.first / sum.second);
                      });
}

}  // namespace

OpTables fit_op_scales(OpTables tables, const RecordedRun& run) { return fit_op_scales(std::move(tables), {&run}); }

OpTables fit_op_scales(OpTables tables, const std::vector<const RecordedRun*>& runs) {
    tables.scale.clear();
    std::map<std::string, std::vector<double>> ratios;  // kind -> per step of every run: recorded / modelled own time
    for (const RecordedRun* run : runs)
        for_each_fit_step(tables, *run,
                          [&](const ReplayGraph& g, const ReplayDurations& recorded, const ReplayDurations& modelled) {
                              for (const auto& [kind, ratio] : step_scale_ratios(g, recorded, modelled))
                                  ratios[kind].push_back(ratio);
                          });
    // NOTE: the median over steps, not the ratio of sums: a calibration run's early steps are slow in a way no
    // steady step is (fec at 4-6x its typical ratio in steps 1 and 3 of both stored main-2rank calibrations,
    // docs/validation-heldout.md), a sum carries that warm-up into every prediction, and the validation compares
    // typical (median) steps
    for (const auto& [kind, r] : ratios) tables.scale[kind] = median(r);
    return tables;
}

bool is_in_step_kind(prophet::OpKind kind) {
    using K = prophet::OpKind;
    return kind == K::kLayout || (is_collective_kind(kind) && kind != K::kOptimizer);
}

OpTables fit_in_step_overheads(OpTables tables, const RecordedRun& run) {
    return fit_in_step_overheads(std::move(tables), {&run});
}

OpTables fit_in_step_overheads(OpTables tables, const std::vector<const RecordedRun*>& runs) {
    tables.in_step_s.clear();
    std::map<std::string, std::vector<double>> per_step;  // kind -> per step: mean (recorded - modelled) per call, us
    for (const RecordedRun* run : runs) add_in_step_differences(tables, *run, per_step);
    for (auto& [kind, diffs] : per_step) {
        tables.in_step_s[kind] = std::max(0.0, median(diffs)) * 1e-6;
    }
    return tables;
}

OpTables fit_to_recordings(OpTables tables, const std::vector<const RecordedRun*>& runs) {
    return fit_in_step_overheads(fit_op_scales(std::move(tables), runs), runs);
}

}  // namespace prophet::sim
