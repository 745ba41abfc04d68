#include "balance/cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "balance/topology.h"
#include "core/error.h"

namespace prophet {

double CostModel::fnec_s() const {
    if (cluster.fnec_s >= 0) return cluster.fnec_s;
    // attention block forward on one device: QKV (6 N C^2) + projection (2 N C^2) + scores and weighted sum
    // (2 * 2 N T C), N = tokens per device; LayerNorms and softmax are memory-bound and ignored.
    const double n = static_cast<double>(model.tokens_per_device);
    const double c = model.d_model;
    const double flops = 8.0 * n * c * c + 4.0 * n * model.seq_len * c;
    return flops / (cluster.compute_flops * compute_scale);
}

double CostModel::bnec_s() const {
    if (cluster.bnec_s >= 0) return cluster.bnec_s;
    return 2.0 * fnec_s();
}

namespace {

// The most whole units of `per` seconds that fit a window of `window` seconds (at most `limit`): k * per <= window.
int64_t units_within(double window, double per, int64_t limit) {
    if (!(window >= 0)) return 0;
    int64_t n = per > 0 ? static_cast<int64_t>(std::min(std::floor(window / per), static_cast<double>(limit))) : limit;
    while (n > 0 && static_cast<double>(n) * per > window) --n;  // floor's rounding, either way
    while (n < limit && static_cast<double>(n + 1) * per <= window) ++n;
    return n;
}

// Eq 1: one all-to-all (seconds) and its bytes (one direction, off-diagonal). The device receiving the most
// decides, bandwidth by that message size (the authors' table); topology-aware, the busiest link of the route.
inline void a2a_term(const CostModel& m, const LayerFlow& flow, double token_bytes, CostBreakdown& c) {
    const int64_t max_received = *std::max_element(flow.received.begin(), flow.received.end());
    int64_t total_sent = 0;
    for (int64_t s : flow.sent) total_sent += s;
    c.a2a_bytes = static_cast<double>(total_sent) * token_bytes;
    if (m.topology_aware) {
        c.a2a_s = topology_time(m.cluster, flow.route.data(), token_bytes, false, m.bandwidth_scale);
    } else {
        const double message = static_cast<double>(max_received) * token_bytes;
        c.a2a_s = message / (m.cluster.a2a_bytes_per_s(message) * m.bandwidth_scale);
    }
    if (total_sent > 0) c.a2a_s += m.cluster.a2a_latency_s;
}

// Eqs 2-3: expert compute of the device computing the most tokens (seconds), backward twice the forward
inline void compute_terms(const CostModel& m, const LayerFlow& flow, CostBreakdown& c) {
    const int64_t max_computed = *std::max_element(flow.computed.begin(), flow.computed.end());
    const double flops = m.cluster.compute_flops * m.compute_scale;
    c.fec_s = static_cast<double>(max_computed) * m.expert_flops_per_token() / flops;
    c.bec_s = 2.0 * c.fec_s;
}

// Trans/Agg's counted receivers. e's transfer group is its owner (the sender of Trans, the receiver of Agg) and
// its replica holders: replicas are re-sent and their gradients reduced every step, while an owner is where e
// lives, so a placement that only moves owners costs no Trans or Agg per iteration (the move itself is a one-off,
// moves.h). kPaper counts the whole group (the paper's D - n includes the sender), kReplicaHolders only the
// receivers.
struct TransferGroups {
    int sender_counted = 0;  // 1 when each group counts its sender (kPaper), else 0
    int64_t receivers = 0;   // replica holders summed over experts
    int64_t counted = 0;     // receivers + sender_counted * (experts with a replica)
};

inline TransferGroups transfer_groups(const CostModel& m, const LayerFlow& flow) {
    TransferGroups t;
    t.sender_counted = m.trans_receivers == TransReceivers::kPaper ? 1 : 0;
    int64_t replicated = 0;
    for (int e = 0; e < flow.num_experts; ++e) {
        t.receivers += flow.replica_holders[e];
        replicated += flow.replica_holders[e] > 0;
    }
    t.counted = t.receivers + t.sender_counted * replicated;
    return t;
}

// The copies of the experts with receivers (and include[e], when given): experts[sender * D + receiver] [D*D], and
// for a chain the copies each device forwards and receives, chain_sent / chain_received [D].
inline void lay_broadcasts(const CostModel& m, const LayerFlow& flow, const Placement& placement,
                           const uint8_t* include, std::vector<int64_t>& experts, std::vector<int64_t>& chain_sent,
                           std::vector<int64_t>& chain_received) {
    const int D = flow.num_devices;
    const bool chain = m.trans_broadcast == TransBroadcast::kChain;
    thread_local std::vector<std::pair<int, int>> copies;
    for (int e = 0; e < flow.num_experts; ++e) {
        if (flow.replica_holders[e] == 0 || (include && !include[e])) continue;  // nothing to send
        expert_copies(m, placement, e, copies);
        for (const auto& [s, d] : copies) {
            ++experts[static_cast<size_t>(s) * D + d];
            if (chain) ++chain_sent[s], ++chain_received[d];
        }
    }
}

// The ring collective's own rate under a chain: a device forwards (receives) one copy per expert whose chain
// passes it, at most at trans (agg) bytes/s: the rate the papers' planners price NCCL's broadcast at (Eq 4's
// S (D - n) / D / B per expert), so a chain is never faster than Eq 4 nor than its links. busiest: the most
// copies one device forwards or receives.
inline void chain_rate_floor(const CostModel& m, int64_t busiest, double expert_bytes, double& trans_s, double& agg_s) {
    const double copies = static_cast<double>(busiest) * expert_bytes;
    trans_s = std::max(trans_s, copies / (m.cluster.trans_bytes_per_s * m.bandwidth_scale));
    agg_s = std::max(agg_s, copies / (m.cluster.agg_bytes_per_s * m.bandwidth_scale));
}

// Which of Trans and Agg topology_transfer_terms times (the other is left at 0: Eq 8's parts need one each)
enum class Directions { kBoth, kTrans, kAgg };

// Eqs 4-5, topology-aware: Trans over the busiest link of the broadcasts, Agg the same traffic reversed; of the
// experts with include[e] only, when include is given (Eq 8's whole-expert split times its parts so)
inline void topology_transfer_terms(const CostModel& m, const LayerFlow& flow, const Placement& placement,
                                    double expert_bytes, const uint8_t* include, Directions directions, double& trans_s,
                                    double& agg_s) {
    const int D = flow.num_devices;
    thread_local std::vector<int64_t> experts;  // [D*D]
    experts.assign(static_cast<size_t>(D) * D, 0);
    thread_local std::vector<int64_t> chain_sent, chain_received;  // [D], chain only
    const bool chain = m.trans_broadcast == TransBroadcast::kChain;
    if (chain) {
        chain_sent.assign(static_cast<size_t>(D), 0);
        chain_received.assign(static_cast<size_t>(D), 0);
    }
    lay_broadcasts(m, flow, placement, include, experts, chain_sent, chain_received);
    trans_s = directions == Directions::kAgg
                  ? 0.0
                  : topology_time(m.cluster, experts.data(), expert_bytes, false, m.bandwidth_scale);
    agg_s = directions == Directions::kTrans
                ? 0.0
                : topology_time(m.cluster, experts.data(), expert_bytes, true, m.bandwidth_scale);
    if (!chain) return;
    const int64_t busiest = std::max(*std::max_element(chain_sent.begin(), chain_sent.end()),
                                     *std::max_element(chain_received.begin(), chain_received.end()));
    chain_rate_floor(m, busiest, expert_bytes, trans_s, agg_s);
}

// Eqs 4-5: D - n_e devices per chosen expert, averaged over D devices sending in parallel (seconds); the bytes
// reported are the receivers'
inline void transfer_terms(const CostModel& m, const LayerFlow& flow, const Placement& placement,
                           const TransferGroups& groups, CostBreakdown& c) {
    const double expert_bytes = m.expert_bytes();
    const int D = flow.num_devices;
    c.trans_bytes = static_cast<double>(groups.receivers) * expert_bytes;
    c.agg_bytes = c.trans_bytes;
    if (m.topology_aware && groups.receivers > 0) {
        topology_transfer_terms(m, flow, placement, expert_bytes, nullptr, Directions::kBoth, c.trans_s, c.agg_s);
        return;
    }
    const double counted_bytes = static_cast<double>(groups.counted) * expert_bytes;
    c.trans_s = counted_bytes / (D * m.cluster.trans_bytes_per_s * m.bandwidth_scale);
    c.agg_s = counted_bytes / (D * m.cluster.agg_bytes_per_s * m.bandwidth_scale);
}

// The scheduler's first fit of whole transfer groups into the first windows (FNEC for Trans, BNEC for Agg), in
// units of T / counted: g_e = r_e + sender per expert, in expert order; ends as soon as neither window can take
// the smallest group (every later expert then goes beside the expert compute). trans_cap / agg_cap: the units
// each window holds; returns the units placed in each ({trans, agg}).
struct FirstFit {
    int64_t trans = 0, agg = 0;
};

inline FirstFit first_fit_groups(const LayerFlow& flow, int sender_counted, int64_t trans_cap, int64_t agg_cap) {
    const int E = flow.num_experts;
    FirstFit f;
    const int64_t smallest = 1 + sender_counted;  // the smallest transfer group
    auto room = [&] { return trans_cap - f.trans >= smallest || agg_cap - f.agg >= smallest; };
    auto fit = [&](int r) {  // expert with r receivers (> 0), next in expert order
        const int64_t g = r + sender_counted;
        if (f.trans + g <= trans_cap) f.trans += g;
        if (f.agg + g <= agg_cap) f.agg += g;
    };
    if (!room()) return f;
    // receivers = replica holders. Only an expert with 0 < r <= most (the larger room left, in receivers) can change
    // anything, so runs of 8 without one are skipped with one vectorisable test (the greedy calls this once per
    // step: it is its inner loop)
    const int* holders = flow.replica_holders.data();
    auto most = [&] { return static_cast<unsigned>(std::max(trans_cap - f.trans, agg_cap - f.agg) - sender_counted); };
    int e = 0;
    for (unsigned limit = most(); e + 8 <= E && room(); e += 8) {
        int any = 0;  // r - 1 < limit (unsigned): 0 < r <= limit
        for (int j = 0; j < 8; ++j) any |= static_cast<unsigned>(holders[e + j] - 1) < limit;
        if (any == 0) continue;
        for (int j = 0; j < 8; ++j)
            if (holders[e + j] != 0) fit(holders[e + j]);
        limit = most();
    }
    for (; e < E && room(); ++e)
        if (holders[e] != 0) fit(holders[e]);
    return f;
}

// Eq 8's whole-expert credit on the topology, the scheduler's `time` split (schedule/split.h, and the simulator's
// split_transfer): each expert with receivers is timed alone (its copies on the topology, a chain also at the
// collective's rate) and first fit in expert order into the non-expert window; the experts that did not fit are
// timed together beside the expert compute. A star's copies of one expert all leave its owner, so one hot expert
// copied to every node can outlast both windows, which Trans x g_e / counted (the flat model's exact share)
// spread over all copies would hide. Trans: FNEC then FEC; Agg: BNEC then BEC.
inline void topology_whole_expert_exposure(const CostModel& m, const LayerFlow& flow, const Placement& placement,
                                           CostBreakdown& c) {
    const double expert_bytes = m.expert_bytes();
    const bool trans_may_show = c.trans_s > c.fec_s, agg_may_show = c.agg_s > c.bec_s;  // the rest is at most all
    c.exposed_trans_s = c.exposed_agg_s = 0;
    if (!trans_may_show && !agg_may_show) return;
    thread_local std::vector<std::pair<int, int>> copies;
    thread_local std::vector<uint8_t> trans_rest, agg_rest;  // [E] 1: beside the expert compute
    trans_rest.assign(static_cast<size_t>(flow.num_experts), 0);
    agg_rest.assign(static_cast<size_t>(flow.num_experts), 0);
    double trans_filled = 0, agg_filled = 0;
    for (int e = 0; e < flow.num_experts; ++e) {
        if (flow.replica_holders[e] == 0) continue;
        expert_copies(m, placement, e, copies);
        // only the directions that may show (the other's parts are never timed)
        double t =
            trans_may_show ? topology_time_of_copies(m.cluster, copies, expert_bytes, false, m.bandwidth_scale) : 0.0;
        double a =
            agg_may_show ? topology_time_of_copies(m.cluster, copies, expert_bytes, true, m.bandwidth_scale) : 0.0;
        if (m.trans_broadcast == TransBroadcast::kChain) chain_rate_floor(m, 1, expert_bytes, t, a);
        if (trans_filled + t <= c.fnec_s)
            trans_filled += t;
        else
            trans_rest[e] = 1;
        if (agg_filled + a <= c.bnec_s)
            agg_filled += a;
        else
            agg_rest[e] = 1;
    }
    double trans_rest_s = 0, agg_rest_s = 0, unused = 0;
    if (trans_may_show)
        topology_transfer_terms(m, flow, placement, expert_bytes, trans_rest.data(), Directions::kTrans, trans_rest_s,
                                unused);
    if (agg_may_show)
        topology_transfer_terms(m, flow, placement, expert_bytes, agg_rest.data(), Directions::kAgg, unused,
                                agg_rest_s);
    c.exposed_trans_s = std::max(0.0, trans_rest_s - c.fec_s);
    c.exposed_agg_s = std::max(0.0, agg_rest_s - c.bec_s);
}

// Eq 8's exposed Trans and Agg (seconds) under the model's transfer_credit; the chunked variants always
inline void exposed_transfers(const CostModel& m, const LayerFlow& flow, const Placement& placement,
                              const TransferGroups& groups, CostBreakdown& c) {
    c.exposed_trans_chunked_s = std::max(0.0, c.trans_s - c.fec_s - c.fnec_s);
    c.exposed_agg_chunked_s = std::max(0.0, c.agg_s - c.bec_s - c.bnec_s);
    if (m.first_block) {
        // the iteration's first block: the block-wise schedule sends its Trans whole before anything computes
        // and its Agg whole after the last backward op (sim/schedule.cpp), so no split hides any of either
        c.exposed_trans_s = c.exposed_trans_chunked_s = c.trans_s;
        c.exposed_agg_s = c.exposed_agg_chunked_s = c.agg_s;
    } else if (m.transfer_credit == TransferCredit::kChunks || groups.counted == 0) {
        c.exposed_trans_s = c.exposed_trans_chunked_s;
        c.exposed_agg_s = c.exposed_agg_chunked_s;
    } else if (m.topology_aware) {
        topology_whole_expert_exposure(m, flow, placement, c);
    } else if (c.trans_s <= std::max(c.fnec_s, c.fec_s) && c.agg_s <= std::max(c.bnec_s, c.bec_s)) {
        // nothing exposed: all of it fits the first window, or what goes beside the second is at most all of it
        c.exposed_trans_s = c.exposed_agg_s = 0;
    } else {
        // Each expert's share of the transfer is T * g_e / counted: first fit is integer arithmetic in those units.
        // With one expert's share longer than the window (the common case) it costs nothing past the sums above.
        const int64_t counted = groups.counted;
        const double trans_per = c.trans_s / static_cast<double>(counted);
        const double agg_per = c.agg_s / static_cast<double>(counted);
        const FirstFit first = first_fit_groups(flow, groups.sender_counted, units_within(c.fnec_s, trans_per, counted),
                                                units_within(c.bnec_s, agg_per, counted));
        c.exposed_trans_s = std::max(0.0, static_cast<double>(counted - first.trans) * trans_per - c.fec_s);
        c.exposed_agg_s = std::max(0.0, static_cast<double>(counted - first.agg) * agg_per - c.bec_s);
    }
}

}  // namespace

void expert_copies(const CostModel& m, const Placement& placement, int e, std::vector<std::pair<int, int>>& out) {
    out.clear();
    const int D = placement.num_devices;
    const int source = placement.owner[e];
    if (m.trans_broadcast == TransBroadcast::kStar) {
        for (int d = 0; d < D; ++d)
            if (d != source && placement.holds(e, d)) out.emplace_back(source, d);
        return;
    }
    const int per_node = m.cluster.devices_per_node, first = m.cluster.node_of(source) * per_node;
    int prev = source;
    for (int i = 0; i < D; ++i) {
        const int d = (first + i) % D;
        if (d == source || !placement.holds(e, d)) continue;
        out.emplace_back(prev, d);
        prev = d;
    }
}

ChainLoads chain_loads(const CostModel& model, const Placement& placement) {
    const int D = placement.num_devices;
    ChainLoads loads{std::vector<int>(static_cast<size_t>(D), 0), std::vector<int>(static_cast<size_t>(D), 0)};
    std::vector<std::pair<int, int>> copies;
    for (int e = 0; e < placement.num_experts; ++e) {
        if (placement.num_replicas_of(e) == 0) continue;
        expert_copies(model, placement, e, copies);
        for (const auto& [s, d] : copies) ++loads.sent[s], ++loads.received[d];
    }
    return loads;
}

int ChainLoads::busiest() const {
    int most = 0;
    for (size_t d = 0; d < sent.size(); ++d) most = std::max({most, sent[d], received[d]});
    return most;
}

double exposed_whole_pieces(const std::vector<double>& pieces, double first_window, double second_window) {
    double first = 0, rest = 0;
    for (double t : pieces) {
        if (first + t <= first_window)
            first += t;
        else
            rest += t;
    }
    return std::max(0.0, rest - second_window);
}

TransferSeconds transfer_seconds(const CostModel& m, const LayerFlow& flow, const Placement& placement) {
    PROPHET_ASSERT(placement.num_devices == flow.num_devices && placement.num_experts == flow.num_experts);
    CostBreakdown c;
    transfer_terms(m, flow, placement, transfer_groups(m, flow), c);
    return {c.trans_s, c.agg_s};
}

CostBreakdown predict_layer(const CostModel& m, const LayerFlow& flow, const Placement& placement) {
    const int D = flow.num_devices;
    PROPHET_ASSERT(placement.num_devices == D && placement.num_experts == flow.num_experts);
    PROPHET_ASSERT_MSG(m.cluster.num_devices == D, "cluster has " + std::to_string(m.cluster.num_devices) +
                                                       " devices but the flow " + std::to_string(D));
    CostBreakdown c;
    a2a_term(m, flow, m.token_bytes(), c);
    compute_terms(m, flow, c);
    const TransferGroups groups = transfer_groups(m, flow);
    transfer_terms(m, flow, placement, groups, c);
    c.fnec_s = m.fnec_s();
    c.bnec_s = m.bnec_s();
    exposed_transfers(m, flow, placement, groups, c);
    c.eq6_s = 4.0 * c.a2a_s + 3.0 * c.fec_s + c.trans_s + c.agg_s;
    c.eq8_s = 4.0 * c.a2a_s + 3.0 * c.fec_s + c.exposed_trans_s + c.exposed_agg_s;
    c.fastermoe_s = 4.0 * c.a2a_s + 3.0 * c.fec_s + std::max(0.0, c.trans_s - c.a2a_s) +
                    std::max(0.0, c.agg_s - c.a2a_s);
    return c;
}

double a2a_time_s(const CostModel& m, const std::vector<double>& bytes) {
    const int D = m.cluster.num_devices;
    PROPHET_ASSERT(bytes.size() == static_cast<size_t>(D) * D);
    double moved = 0, max_received = 0;
    for (int dst = 0; dst < D; ++dst) {
        double received = 0;
        for (int src = 0; src < D; ++src)
            if (src != dst) received += bytes[static_cast<size_t>(src) * D + dst];
        moved += received;
        max_received = std::max(max_received, received);
    }
    if (moved <= 0) return 0.0;
    const double t = m.topology_aware
                         ? topology_time(m.cluster, bytes, m.bandwidth_scale)
                         : max_received / (m.cluster.a2a_bytes_per_s(max_received) * m.bandwidth_scale);
    return t + m.cluster.a2a_latency_s;
}

}  // namespace prophet
