#include "balance/bounds.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>

#include "balance/placement.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/timer.h"

namespace prophet {
namespace {

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// a cluster rate in bytes/s, 0 meaning "no limit"
double rate_or_unlimited(double bytes_per_s) { return bytes_per_s > 0 ? bytes_per_s : kUnlimited; }

// `peers` links of `rate` each; no peers carry nothing even when the rate is unlimited
double sum_of_links(int peers, double rate) { return peers > 0 ? peers * rate : 0.0; }

// What the topology lets any traffic do at best (docs/bounds.md "All-to-all"): per device, the most bytes/s it can
// receive (send) over every resource on its paths, and the fastest single path and cheapest latency of any pair.
struct TopologyLimits {
    double ingress_sum = 0, egress_sum = 0;  // sum over devices of their ingress (egress) capacity, bytes/s
    double remote_sum = kUnlimited;  // sum over nodes of the inter-node bytes/s they can take in (one node: none)
    double best_path = 0;            // fastest single-pair path, bytes/s (kUnlimited: no limit)
    double min_latency = 0;          // cheapest latency of a link class some pair uses
};

// One device's capacity on one side: NVLink peers through its NVLink port, PCIe peers and inter-node peers (the
// latter also through its NIC) through its host port, all through its injection (ejection) limit.
double device_capacity(const ClusterSpec& cl, int nv_peers, int pcie_peers, int remote_peers, double gpu_limit) {
    const double nv = std::min(rate_or_unlimited(cl.nvlink_bytes_per_s),
                               sum_of_links(nv_peers, rate_or_unlimited(cl.nvlink_bytes_per_s)));
    const double remote = remote_peers > 0
                              ? std::min(sum_of_links(remote_peers, rate_or_unlimited(cl.inter_node_bytes_per_s)),
                                         rate_or_unlimited(cl.node_nic_bytes_per_s))
                              : 0.0;
    const double host_links = sum_of_links(pcie_peers, rate_or_unlimited(cl.intra_node_bytes_per_s)) + remote;
    const double host =
        pcie_peers + remote_peers > 0 ? std::min(rate_or_unlimited(cl.pcie_bytes_per_s), host_links) : 0.0;
    return std::min(rate_or_unlimited(gpu_limit), nv + host);
}

TopologyLimits topology_limits(const ClusterSpec& cl) {
    using LC = ClusterSpec::LinkClass;
    const int D = cl.num_devices;
    TopologyLimits t;
    bool used[3] = {false, false, false};
    for (int i = 0; i < D; ++i) {
        int peers[3] = {0, 0, 0};
        for (int s = 0; s < D; ++s)
            if (s != i) ++peers[static_cast<int>(cl.link_class(s, i))];
        for (int c = 0; c < 3; ++c) used[c] = used[c] || peers[c] > 0;
        t.ingress_sum += device_capacity(cl, peers[0], peers[1], peers[2], cl.gpu_ejection_bytes_per_s);
        t.egress_sum += device_capacity(cl, peers[0], peers[1], peers[2], cl.gpu_injection_bytes_per_s);
    }
    // a single pair's path: the pair link, the port of its class at both ends, injection, ejection, NICs
    const double ends =
        std::min(rate_or_unlimited(cl.gpu_injection_bytes_per_s), rate_or_unlimited(cl.gpu_ejection_bytes_per_s));
    const double host = rate_or_unlimited(cl.pcie_bytes_per_s);
    const double path[3] = {
        rate_or_unlimited(cl.nvlink_bytes_per_s), std::min(rate_or_unlimited(cl.intra_node_bytes_per_s), host),
        std::min({rate_or_unlimited(cl.inter_node_bytes_per_s), host, rate_or_unlimited(cl.node_nic_bytes_per_s)})};
    t.min_latency = kUnlimited;
    for (LC c : {LC::kNvlink, LC::kIntraNode, LC::kInterNode}) {
        const int k = static_cast<int>(c);
        if (!used[k]) continue;
        t.best_path = std::max(t.best_path, std::min(ends, path[k]));
        t.min_latency = std::min(t.min_latency, cl.link_latency_s(c));
    }
    if (!(t.min_latency < kUnlimited)) t.min_latency = 0;  // one device: nothing moves
    // inter-node: a node's devices take remote bytes through their host ports and inter-node pairs, all through the
    // node's NICs together
    const int nodes = D / cl.devices_per_node;
    if (nodes > 1) {
        const int remote_peers = D - cl.devices_per_node;
        const double per_device = std::min(rate_or_unlimited(cl.pcie_bytes_per_s),
                                           sum_of_links(remote_peers, rate_or_unlimited(cl.inter_node_bytes_per_s)));
        const double per_node =
            std::min(cl.devices_per_node * per_device, cl.nics_per_node * rate_or_unlimited(cl.node_nic_bytes_per_s));
        t.remote_sum = nodes * per_node;
    }
    return t;
}

// bytes / rate with an unlimited rate taking no time
double drain_bound(double bytes, double rate) { return rate < kUnlimited && rate > 0 ? bytes / rate : 0.0; }

// Eq 1's flat time of a busiest receiver of at least `message` bytes: m / B(m) grows inside each bandwidth step,
// so the least over m >= message is at `message` or at the lower edge of a later step.
double flat_a2a_bound(const ClusterSpec& cl, double message, double bandwidth_scale) {
    double best = kUnlimited, lower_edge = 0;
    for (const BandwidthStep& step : cl.a2a_bandwidth) {
        if (step.max_message_bytes >= message)
            best = std::min(best, std::max(message, lower_edge) / (step.bytes_per_s * bandwidth_scale));
        lower_edge = step.max_message_bytes;
    }
    if (!(best < kUnlimited)) best = message / (cl.a2a_bandwidth.back().bytes_per_s * bandwidth_scale);
    return best;
}

// One all-to-all moving at least `sent` tokens off their devices, `across` of them off their nodes (home path,
// either direction).
double a2a_bound(const CostModel& m, const TopologyLimits& topo, int64_t sent, int64_t across) {
    if (sent <= 0) return 0.0;
    const int D = m.cluster.num_devices;
    const double bytes = static_cast<double>(sent) * m.token_bytes();
    double t;
    if (m.topology_aware) {
        const double remote = drain_bound(static_cast<double>(across) * m.token_bytes(), topo.remote_sum);
        t = std::max(drain_bound(bytes, topo.ingress_sum), remote) / m.bandwidth_scale + topo.min_latency;
    } else {
        const int64_t busiest = (sent + D - 1) / D;  // tokens: some device receives at least the mean
        t = flat_a2a_bound(m.cluster, static_cast<double>(busiest) * m.token_bytes(), m.bandwidth_scale);
    }
    return t + m.cluster.a2a_latency_s;
}

// Trans (agg = false) or Agg with n >= 1 receivers in all.
double transfer_bound(const CostModel& m, const TopologyLimits& topo, int64_t n, bool agg) {
    const int D = m.cluster.num_devices;
    const double eb = m.expert_bytes();
    const double collective = agg ? m.cluster.agg_bytes_per_s : m.cluster.trans_bytes_per_s;
    if (!m.topology_aware) {
        // Eqs 4-5: sum over replicated experts of (receivers + sender), each expert has at most D - 1 receivers
        const int64_t sender = m.trans_receivers == TransReceivers::kPaper ? (n + D - 2) / (D - 1) : 0;
        return static_cast<double>(n + sender) * eb / (D * collective * m.bandwidth_scale);
    }
    const double bulk = drain_bound(static_cast<double>(n) * eb, agg ? topo.egress_sum : topo.ingress_sum);
    double t = std::max(drain_bound(eb, topo.best_path), bulk) / m.bandwidth_scale + topo.min_latency;
    if (m.trans_broadcast == TransBroadcast::kChain) {
        // the chain's own rate: some device receives (forwards) at least ceil(n / D) copies
        const int64_t per_device = (n + D - 1) / D;  // ceil(n / D), whole copies
        const double copies = static_cast<double>(per_device) * eb;
        t = std::max(t, copies / (collective * m.bandwidth_scale));
    }
    return t;
}

// [x] bound on max_i H_i (tokens) with x extra holders in all, x = 0 .. the first x where it stops falling:
// max(ceil(total / D), max_e ceil(w_e / h_e)) under the greedy that gives each holder to the largest w_e / h_e.
std::vector<int64_t> compute_curve(const std::vector<int64_t>& w, int D, int64_t total, int64_t max_extra) {
    const int64_t floor_tokens = (total + D - 1) / D;
    using Item = std::pair<int64_t, int64_t>;  // (w_e, h_e), ordered by w / h
    auto lighter = [](const Item& a, const Item& b) { return a.first * b.second < b.first * a.second; };
    std::priority_queue<Item, std::vector<Item>, decltype(lighter)> heap(lighter);
    for (int64_t v : w) heap.push({v, 1});
    auto current = [&] {
        const Item& top = heap.top();
        return std::max(floor_tokens, (top.first + top.second - 1) / top.second);
    };
    std::vector<int64_t> curve{current()};
    for (int64_t x = 1; x <= max_extra; ++x) {
        Item top = heap.top();
        if (top.second >= D || curve.back() == floor_tokens) break;  // the hottest has every device, or at the mean
        heap.pop();
        heap.push({top.first, top.second + 1});
        curve.push_back(current());
    }
    return curve;
}

// [k] tokens kept local by the k largest counts outside their home row, k = 0 .. their number: counts [rows][E]
// (tokens of a device or a node per expert), home_row [E] the row that holds each expert already; *home_local gets
// the tokens already in their home row
std::vector<int64_t> gain_beyond_home(const int64_t* counts, int rows, int E, const std::vector<int>& home_row,
                                      int64_t* home_local) {
    std::vector<int64_t> other;
    other.reserve(static_cast<size_t>(E) * std::max(0, rows - 1));
    *home_local = 0;
    for (int r = 0; r < rows; ++r)
        for (int e = 0; e < E; ++e) {
            const int64_t c = counts[static_cast<size_t>(r) * E + e];
            if (home_row[e] == r)
                *home_local += c;
            else if (c > 0)
                other.push_back(c);
        }
    std::sort(other.begin(), other.end(), std::greater<int64_t>());
    std::vector<int64_t> prefix(other.size() + 1, 0);
    for (size_t k = 0; k < other.size(); ++k) prefix[k + 1] = prefix[k] + other[k];
    return prefix;
}

// Per device: a device keeps e's tokens only if it holds e (a receiver per (device, expert) pair beyond home).
std::vector<int64_t> local_gain(const int64_t* counts, const Placement& home, int D, int E, int64_t* home_local) {
    return gain_beyond_home(counts, D, E, home.owner, home_local);
}

// Per node: a node keeps e's tokens inside only if one of its devices holds e (a receiver each).
std::vector<int64_t> node_gain(const int64_t* counts, const Placement& home, const ClusterSpec& cl, int E,
                               int64_t* node_local) {
    const int D = cl.num_devices, nodes = std::max(1, D / cl.devices_per_node);
    auto node = [&](int d) { return std::min(cl.node_of(d), nodes - 1); };
    std::vector<int64_t> per_node(static_cast<size_t>(nodes) * E, 0);  // [nodes][E]
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e)
            per_node[static_cast<size_t>(node(d)) * E + e] += counts[static_cast<size_t>(d) * E + e];
    std::vector<int> home_node(E);
    for (int e = 0; e < E; ++e) home_node[e] = node(home.owner[e]);
    return gain_beyond_home(per_node.data(), nodes, E, home_node, node_local);
}

}  // namespace

namespace {

// The four models at given term bounds (seconds): each model's time is nondecreasing in every term.
struct Terms {
    double a2a = 0, a2a_l2l = 0, fec = 0, trans = 0, agg = 0;
};

void take_min(LayerBound& b, const CostModel& m, const Terms& t, int64_t n) {
    const double core = 3.0 * t.fec;
    auto eq8_exposed = [&](double trans, double agg) {
        // the chunked credit max(0, T - FEC - FNEC) is at most what whole experts leave (cost_model.h); layer 0: none
        if (m.first_block) return trans + agg;
        return std::max(0.0, trans - t.fec - m.fnec_s()) + std::max(0.0, agg - 2.0 * t.fec - m.bnec_s());
    };
    auto fastermoe = [&](double a2a) {
        return 4.0 * a2a + core + std::max(0.0, t.trans - a2a) + std::max(0.0, t.agg - a2a);
    };
    const double eq6 = 4.0 * t.a2a + core + t.trans + t.agg;
    if (eq6 < b.eq6_s) b.eq6_s = eq6, b.eq6_receivers = n;
    b.eq8_s = std::min(b.eq8_s, 4.0 * t.a2a + core + eq8_exposed(t.trans, t.agg));
    b.fastermoe_s = std::min(b.fastermoe_s, fastermoe(t.a2a));
    b.sim_s = std::min(b.sim_s, 4.0 * t.a2a + core);
    b.eq6_l2l_s = std::min(b.eq6_l2l_s, 4.0 * t.a2a_l2l + core + t.trans + t.agg);
    b.eq8_l2l_s = std::min(b.eq8_l2l_s, 4.0 * t.a2a_l2l + core + eq8_exposed(t.trans, t.agg));
    b.fastermoe_l2l_s = std::min(b.fastermoe_l2l_s, fastermoe(t.a2a_l2l));
}

// the share of a home-path all-to-all the layer_to_layer path keeps: (in + out) / 2, in from home only into layer
// 0, out home only from layer L-1 (one layer: the home path)
double l2l_share(int layer, int num_layers) {
    if (num_layers <= 1) return 1.0;
    return 0.5 * ((layer == 0 ? 1.0 : 0.0) + (layer == num_layers - 1 ? 1.0 : 0.0));
}

}  // namespace

namespace {

// The tokens that must leave their device (their node) when at most k (device, expert) pairs ((node, expert) pairs)
// beyond the static homes hold an expert.
struct Unavoidable {
    int64_t total = 0, home_local = 0, node_local = 0;
    std::vector<int64_t> gain, node_gain;  // prefix sums (local_gain, node_gain)
    int64_t sent(int64_t k) const { return total - home_local - gain[std::min<size_t>(k, gain.size() - 1)]; }
    int64_t across(int64_t k) const {
        return total - node_local - node_gain[std::min<size_t>(k, node_gain.size() - 1)];
    }
};

Placement home_placement(int D, int E) {
    Placement probe;
    probe.num_devices = D;
    probe.num_experts = E;
    std::vector<int> home_of(E);
    for (int e = 0; e < E; ++e) home_of[e] = probe.home(e);
    return Placement::make_owners(D, home_of);
}

}  // namespace

LayerBound layer_bound(const CostModel& m, const int64_t* counts, int D, int E, const BoundBudget& budget, int layer,
                       int num_layers) {
    PROPHET_ASSERT(D > 0 && E > 0 && m.cluster.num_devices == D && layer >= 0 && layer < num_layers);
    const Placement home = home_placement(D, E);
    std::vector<int64_t> w(E, 0);  // [E] expert loads
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) w[e] += counts[static_cast<size_t>(d) * E + e];
    Unavoidable u;
    for (int64_t v : w) u.total += v;
    u.gain = local_gain(counts, home, D, E, &u.home_local);
    u.node_gain = node_gain(counts, home, m.cluster, E, &u.node_local);
    const double per_token_s = m.expert_flops_per_token() / (m.cluster.compute_flops * m.compute_scale);
    const double share = l2l_share(layer, num_layers);
    const TopologyLimits topo = m.topology_aware ? topology_limits(m.cluster) : TopologyLimits{};

    // n = receivers a transfer reaches: replicas only, at most D * cap. An owner away from its home pays no
    // per-iteration Trans/Agg (its weights move once: cost_model.h), so up to E moved owners add held non-home
    // pairs for free: the all-to-all bound takes n + E pairs (at most max_pairs), compute only the replicas.
    const int cap = budget.max_replicas_per_device;
    const int64_t max_receivers = static_cast<int64_t>(E) * (D - 1);
    const int64_t max_extra = cap > 0 ? std::min<int64_t>(max_receivers, static_cast<int64_t>(D) * cap) : max_receivers;
    const int64_t max_pairs =
        cap > 0 ? std::min<int64_t>(max_receivers, static_cast<int64_t>(D) * cap + E) : max_receivers;
    const std::vector<int64_t> curve = compute_curve(w, D, u.total, max_extra);
    LayerBound b;
    b.eq6_s = b.eq8_s = b.fastermoe_s = b.sim_s = kUnlimited;
    b.eq6_l2l_s = b.eq8_l2l_s = b.fastermoe_l2l_s = kUnlimited;
    // n = 0: no replica, owners anywhere (no routing choice: every token goes to its expert's one holder)
    const int64_t owner_pairs = std::min<int64_t>(E, max_pairs);
    Terms zero;
    zero.fec = static_cast<double>(curve[0]) * per_token_s;
    zero.a2a = a2a_bound(m, topo, u.sent(owner_pairs), u.across(owner_pairs));
    zero.a2a_l2l = share * zero.a2a;
    take_min(b, m, zero, 0);

    const int64_t last_pair = std::min(max_pairs, static_cast<int64_t>(u.gain.size()) - 1);
    // n in blocks [n, last]: one past kExactReceivers, blocks of n / kBlocksPerDoubling receivers; a block takes
    // compute and all-to-all at its last n and the transfers at its first (each term's best over the block), so it
    // bounds every n in it, and small instances are evaluated at every n
    constexpr int64_t kExactReceivers = 1024, kBlocksPerDoubling = 128;
    for (int64_t n = 1, last = 1; n <= max_receivers; n = last + 1) {
        last = std::min(max_receivers, n < kExactReceivers ? n : n + n / kBlocksPerDoubling - 1);
        const int64_t x = std::min<int64_t>({last, max_extra, static_cast<int64_t>(curve.size()) - 1});
        const int64_t k = std::min(last + E, max_pairs);
        Terms t;
        t.fec = static_cast<double>(curve[static_cast<size_t>(x)]) * per_token_s;
        t.a2a = a2a_bound(m, topo, u.sent(k), u.across(k));
        t.a2a_l2l = share * t.a2a;
        t.trans = transfer_bound(m, topo, n, false);
        t.agg = transfer_bound(m, topo, n, true);
        take_min(b, m, t, n);
        // past here compute and all-to-all cannot fall further (the node-level pairs run out no later than the
        // device-level ones) and every transfer only grows
        if (x >= static_cast<int64_t>(curve.size()) - 1 && last >= last_pair) break;
    }
    b.compute_tokens = static_cast<double>(curve.back());
    b.a2a_s = a2a_bound(m, topo, u.sent(max_pairs), u.across(max_pairs));
    b.one_transfer_s = D > 1 ? transfer_bound(m, topo, 1, false) : 0.0;
    return b;
}

TraceBounds trace_bounds(const TraceView& trace, const CostModel& cost, const BoundBudget& budget) {
    const int I = trace.num_iterations, L = trace.num_layers, D = trace.num_devices, E = trace.num_experts;
    TraceBounds out;
    std::vector<double> us;
    const CostModel first = model_for_layer(cost, 0), later = model_for_layer(cost, 1);
    for (int it = 0; it < I; ++it)
        for (int l = 0; l < L; ++l) {
            const int64_t t0 = now_ns();
            out.layers.push_back(layer_bound(l == 0 ? first : later, trace.layer(it, l), D, E, budget, l, L));
            us.push_back((now_ns() - t0) * 1e-3);
        }
    const double n = static_cast<double>(out.layers.size());
    double receivers = 0;
    LayerBound& m = out.mean;
    for (const LayerBound& b : out.layers) {
        for (auto field : {&LayerBound::eq6_s, &LayerBound::eq8_s, &LayerBound::fastermoe_s, &LayerBound::sim_s,
                           &LayerBound::eq6_l2l_s, &LayerBound::eq8_l2l_s, &LayerBound::fastermoe_l2l_s,
                           &LayerBound::compute_tokens, &LayerBound::a2a_s, &LayerBound::one_transfer_s})
            m.*field += b.*field / n;
        receivers += static_cast<double>(b.eq6_receivers) / n;
    }
    m.eq6_receivers = static_cast<int64_t>(std::llround(receivers));
    out.median_us = median(us);
    return out;
}

}  // namespace prophet
