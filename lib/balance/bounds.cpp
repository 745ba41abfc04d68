#include "balance/bounds.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>

#include "balance/count_sort.h"
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
    double ingress_max = 0;                  // the largest one device's ingress capacity, bytes/s
    double remote_sum = kUnlimited;  // sum over nodes of the inter-node bytes/s they can take in (one node: none)
    double best_path = 0;            // fastest single-pair path, bytes/s (kUnlimited: no limit)
    double remote_path = 0;          // fastest single inter-node path, bytes/s (0: one node)
    double min_latency = 0;          // cheapest latency of a link class some pair uses
    // the most inter-node bytes/s one device can send or take in (its rail NIC, host port, inter-node pairs,
    // injection / ejection; the larger of the two directions): what one owner's star broadcast of copies to
    // other nodes, and its reduce, pass through (0: one node)
    double owner_remote = 0;
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
        const double ingress = device_capacity(cl, peers[0], peers[1], peers[2], cl.gpu_ejection_bytes_per_s);
        t.ingress_sum += ingress;
        t.ingress_max = std::max(t.ingress_max, ingress);
        t.egress_sum += device_capacity(cl, peers[0], peers[1], peers[2], cl.gpu_injection_bytes_per_s);
        if (peers[2] > 0)
            t.owner_remote =
                std::max({t.owner_remote, device_capacity(cl, 0, 0, peers[2], cl.gpu_injection_bytes_per_s),
                          device_capacity(cl, 0, 0, peers[2], cl.gpu_ejection_bytes_per_s)});
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
        if (c == LC::kInterNode) t.remote_path = std::min(ends, path[k]);
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
// either direction); `busiest` tokens reach one device (receive_curve).
double a2a_bound(const CostModel& m, const TopologyLimits& topo, int64_t sent, int64_t across, double busiest) {
    if (sent <= 0) return 0.0;
    const int D = m.cluster.num_devices;
    const double tb = m.token_bytes(), bytes = static_cast<double>(sent) * tb;
    double t;
    if (m.topology_aware) {
        const double remote = drain_bound(static_cast<double>(across) * tb, topo.remote_sum);
        const double one = drain_bound(busiest * tb, topo.ingress_max);
        t = std::max({drain_bound(bytes, topo.ingress_sum), remote, one}) / m.bandwidth_scale + topo.min_latency;
    } else {
        const int64_t mean = (sent + D - 1) / D;  // tokens: some device receives at least the mean
        const double message = std::max(static_cast<double>(mean), busiest) * tb;
        t = flat_a2a_bound(m.cluster, message, m.bandwidth_scale);
    }
    return t + m.cluster.a2a_latency_s;
}

// [x] bound on the tokens the busiest device receives with x extra holders in all, x = 0 .. where it stops
// falling (or kReceiveSteps): e's tokens off the rows of its h_e holders, at least w_e minus e's h_e largest rows, all
// reach those holders, so one takes in >= (w_e - top_{h_e}(e)) / h_e, which falls with h_e; the greedy that gives each
// holder to the expert of the largest share minimises the maximum (as compute_curve). counts [D][E].
constexpr int64_t kReceiveSteps = 2048;
void receive_curve(const int64_t* counts, int D, int E, int64_t max_extra, std::vector<double>& curve) {
    // [E][D+1]: e's column of counts, replaced by w_e minus its h largest rows (h = 0 .. D) the first time e takes a
    // second holder (most experts never do: only those are sorted); first[e] = w_e minus its largest row
    thread_local std::vector<int64_t> rows, first;
    thread_local std::vector<uint8_t> ready;
    rows.resize(static_cast<size_t>(E) * (D + 1));
    first.assign(E, 0);
    ready.assign(E, 0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e)
            rows[static_cast<size_t>(e) * (D + 1) + d + 1] = counts[static_cast<size_t>(d) * E + e];
    for (int e = 0; e < E; ++e) {
        const int64_t* r = &rows[static_cast<size_t>(e) * (D + 1)];
        int64_t sum = 0, largest = 0;
        for (int d = 1; d <= D; ++d) sum += r[d], largest = std::max(largest, r[d]);
        first[e] = sum - largest;
    }
    auto rest_after = [&](int e, int64_t h) {  // w_e - top_h(e), h >= 2
        int64_t* r = &rows[static_cast<size_t>(e) * (D + 1)];
        if (!ready[e]) {
            std::sort(r + 1, r + D + 1, std::greater<int64_t>());
            int64_t rest = 0;
            for (int d = 1; d <= D; ++d) rest += r[d];
            for (int k = 0; k <= D; ++k) rest -= k > 0 ? r[k] : 0, r[k] = rest;
            ready[e] = 1;
        }
        return r[h];
    };
    struct Item {
        int64_t rest, h;  // w_e - top_h(e) over h: ordered by the ratio
        int e;
    };
    auto lighter = [](const Item& a, const Item& b) { return a.rest * b.h < b.rest * a.h; };
    std::priority_queue<Item, std::vector<Item>, decltype(lighter)> heap(lighter);
    for (int e = 0; e < E; ++e) heap.push({first[e], 1, e});
    auto share = [&] { return static_cast<double>(heap.top().rest) / static_cast<double>(heap.top().h); };
    curve.assign(1, share());
    // beyond kReceiveSteps holders the curve is cut (the caller then uses 0): the term binds with few replicas
    for (int64_t x = 1; x <= std::min(max_extra, kReceiveSteps); ++x) {
        const Item top = heap.top();
        if (top.h >= D || top.rest <= 0) break;  // the hottest has every device, or nothing moves
        heap.pop();
        heap.push({rest_after(top.e, top.h + 1), top.h + 1, top.e});
        curve.push_back(share());
    }
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
void compute_curve(const std::vector<int64_t>& w, int D, int64_t total, int64_t max_extra,
                   std::vector<int64_t>& curve) {
    const int64_t floor_tokens = (total + D - 1) / D;
    using Item = std::pair<int64_t, int64_t>;  // (w_e, h_e), ordered by w / h
    auto lighter = [](const Item& a, const Item& b) { return a.first * b.second < b.first * a.second; };
    std::priority_queue<Item, std::vector<Item>, decltype(lighter)> heap(lighter);
    for (int64_t v : w) heap.push({v, 1});
    auto current = [&] {
        const Item& top = heap.top();
        return std::max(floor_tokens, (top.first + top.second - 1) / top.second);
    };
    curve.assign(1, current());
    for (int64_t x = 1; x <= max_extra; ++x) {
        Item top = heap.top();
        if (top.second >= D || curve.back() == floor_tokens) break;  // the hottest has every device, or at the mean
        heap.pop();
        heap.push({top.first, top.second + 1});
        curve.push_back(current());
    }
}

// [k] tokens kept local by the k largest counts outside each expert's best row, k = 0 .. their number: counts
// [rows][E] (tokens of a device or a node per expert). An expert is held by its owner (anywhere: a moved owner pays
// no per-iteration transfer) plus one row per receiver, so its owner keeps at most its largest row and each
// receiver one more row; *best_local gets the sum over experts of the largest row. With per_expert < rows - 1 only
// each expert's per_expert largest other rows count (an expert with at most that many receivers there).
// (prefix [k] into `prefix`, its memory kept between calls: these arrays are E x D long)
void gain_beyond_best(const int64_t* counts, int rows, int E, int64_t* best_local, std::vector<int64_t>& prefix,
                      int per_expert = std::numeric_limits<int>::max()) {
    thread_local std::vector<int64_t> other, scratch;
    other.clear();
    *best_local = 0;
    for (int e = 0; e < E; ++e) {
        int best = 0;
        for (int r = 1; r < rows; ++r)
            if (counts[static_cast<size_t>(r) * E + e] > counts[static_cast<size_t>(best) * E + e]) best = r;
        *best_local += counts[static_cast<size_t>(best) * E + e];
        const size_t first = other.size();
        for (int r = 0; r < rows; ++r) {
            const int64_t c = counts[static_cast<size_t>(r) * E + e];
            if (r != best && c > 0) other.push_back(c);
        }
        if (other.size() - first > static_cast<size_t>(per_expert)) {  // keep e's per_expert largest
            std::nth_element(other.begin() + first, other.begin() + first + per_expert, other.end(),
                             std::greater<int64_t>());
            other.resize(first + per_expert);
        }
    }
    sort_counts_descending(other, scratch);
    prefix.resize(other.size() + 1);
    prefix[0] = 0;
    for (size_t k = 0; k < other.size(); ++k) prefix[k + 1] = prefix[k] + other[k];
}

// Per node: a node keeps e's tokens inside only if one of its devices holds e; [nodes][E] counts.
std::vector<int64_t> node_counts(const int64_t* counts, const ClusterSpec& cl, int E, int* nodes_out) {
    const int D = cl.num_devices, nodes = std::max(1, D / cl.devices_per_node);
    std::vector<int64_t> per_node(static_cast<size_t>(nodes) * E, 0);  // [nodes][E]
    for (int d = 0; d < D; ++d) {
        const int node = std::min(cl.node_of(d), nodes - 1);
        for (int e = 0; e < E; ++e)
            per_node[static_cast<size_t>(node) * E + e] += counts[static_cast<size_t>(d) * E + e];
    }
    *nodes_out = nodes;
    return per_node;
}

}  // namespace

namespace {

// The four models at given term bounds (seconds): each model's time is nondecreasing in every term.
struct Terms {
    double a2a = 0, a2a_l2l = 0, fec = 0, trans = 0, agg = 0;
};

// What the Sim column's blockwise pieces of layer l read of its neighbours (docs/bounds.md "The Sim column").
constexpr int kLevels = LayerBound::kSimLevels;
struct SimWindow {
    bool first = true, last = true;  // layer 0 (Trans and Agg whole, nothing beside them); layer L-1 (no charge)
    double prev_hide_s[kLevels] = {kUnlimited, kUnlimited, kUnlimited, kUnlimited, kUnlimited};  // layer l-1's
    double own_hide_s[kLevels] = {kUnlimited, kUnlimited, kUnlimited, kUnlimited, kUnlimited};
    double fnec_s = 0, bnec_s = 0;
    bool transfers_may_hide = false;  // BoundBudget::sim_transfers_may_hide: no exposed transfer is charged
};

// Blockwise pieces: 4 A2A + the compute charged to this layer (3 min(FEC, own level)) + the transfers exposed
// beyond what layer l-1's FEC at its level, FNEC and BNEC can hide (layer 0: Trans and Agg whole).
void take_sim_min(LayerBound& b, const SimWindow& w, const Terms& t, double other_models) {
    double core[kLevels], exposed[kLevels];
    for (int k = 0; k < kLevels; ++k) {
        core[k] = 3.0 * (w.last ? t.fec : std::min(t.fec, w.own_hide_s[k]));
        const double hide = w.prev_hide_s[k];
        exposed[k] = w.transfers_may_hide ? 0.0
                     : w.first
                         ? t.trans + t.agg
                         : std::max(0.0, t.trans - w.fnec_s - hide) + std::max(0.0, t.agg - w.bnec_s - 2.0 * hide);
    }
    for (int j = 0; j < kLevels; ++j)
        for (int k = 0; k < kLevels; ++k) {
            const double v = std::min(other_models, 4.0 * t.a2a + core[k] + exposed[j]);
            b.sim_parts_s[j][k] = std::min(b.sim_parts_s[j][k], v);
        }
}

void take_min(LayerBound& b, const CostModel& m, const SimWindow& w, const Terms& t, int64_t n) {
    const double core = 3.0 * t.fec;
    auto eq8_exposed = [&](double trans, double agg) {
        // the chunked credit max(0, T - FEC - FNEC) is at most what whole experts leave (cost_model.h); layer 0: none
        if (m.first_block) return trans + agg;
        return std::max(0.0, trans - t.fec - m.fnec_s()) + std::max(0.0, agg - 2.0 * t.fec - m.bnec_s());
    };
    auto fastermoe = [&](double a2a) {
        return 4.0 * a2a + core + std::max(0.0, t.trans - a2a) + std::max(0.0, t.agg - a2a);
    };
    const double eq6 = 4.0 * t.a2a + core + t.trans + t.agg, fm = fastermoe(t.a2a);
    if (eq6 < b.eq6_s) b.eq6_s = eq6, b.eq6_receivers = n;
    b.eq8_s = std::min(b.eq8_s, 4.0 * t.a2a + core + eq8_exposed(t.trans, t.agg));
    b.fastermoe_s = std::min(b.fastermoe_s, fm);
    take_sim_min(b, w, t, std::min(eq6, fm));  // the Sim column: schedule none is Eq 6, fastermoe fastermoe_s
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

// The tokens that must leave their device (their node) when n receivers hold experts beyond each expert's best
// device (r receivers beyond its best node, at most rho of them per expert).
struct Unavoidable {
    int64_t total = 0, best_local = 0, node_best_local = 0;
    const std::vector<int64_t>* gain = nullptr;  // prefix sums (gain_beyond_best per device)
    // per node, [rho]: each expert's rho largest rows beyond its best node (rho = nodes - 1: all of them)
    const std::vector<std::vector<int64_t>>* node_gain = nullptr;
    int max_rho = 0;  // nodes - 1
    int64_t sent(int64_t n) const { return total - best_local - (*gain)[std::min<size_t>(n, gain->size() - 1)]; }
    int64_t across(int64_t r, int rho) const {
        const std::vector<int64_t>& g = (*node_gain)[static_cast<size_t>(rho)];
        return total - node_best_local - g[std::min<size_t>(r, g.size() - 1)];
    }
    int64_t num_experts = 0;
    int64_t node_pairs_beyond_best(int nodes) const { return num_experts * (nodes - 1); }
};

// Everything the term bounds of one layer read.
struct LayerInputs {
    const CostModel& m;
    TopologyLimits topo;
    Unavoidable u;
    const std::vector<int64_t>& curve;   // compute_curve
    const std::vector<double>& receive;  // receive_curve
    bool receive_complete = true;        // it stopped falling before kReceiveSteps
    double per_token_s = 0, share = 1;
    int64_t max_receivers = 0, max_extra = 0;
    SimWindow window;

    // receivers n spend on devices (compute, device-level all-to-all, device-level transfers), r of them on nodes
    // without another holder of their expert (node-level all-to-all), at most rho per expert
    Terms terms(int64_t compute_n, int64_t device_n, int64_t node_r, int rho, double trans, double agg) const {
        Terms t;
        const int64_t x = std::min<int64_t>({compute_n, max_extra, static_cast<int64_t>(curve.size()) - 1});
        t.fec = static_cast<double>(curve[static_cast<size_t>(x)]) * per_token_s;
        // a token that leaves its node leaves its device: the device bound is the larger (across is capped by rho)
        const int64_t across = u.across(std::min(node_r, max_extra), rho);
        t.a2a = a2a_bound(m, topo, std::max(u.sent(std::min(device_n, max_extra)), across), across,
                          busiest(std::min(device_n, max_extra)));
        t.a2a_l2l = share * t.a2a;
        t.trans = trans;
        t.agg = agg;
        return t;
    }
    // receive_curve at x extra holders: its last value where it stopped falling, 0 past where it was cut
    double busiest(int64_t x) const {
        const int64_t last = static_cast<int64_t>(receive.size()) - 1;
        return x <= last ? receive[static_cast<size_t>(x)] : receive_complete ? receive.back() : 0.0;
    }
    // Trans (Agg) of n >= 0 receivers over the devices' resources
    double device_transfer(int64_t n, bool agg) const { return n > 0 ? transfer_bound(m, topo, n, agg) : 0.0; }
    // Trans = Agg of r receivers on nodes without another holder: each copy crosses into its node (docs/bounds.md)
    double node_transfer(int64_t r) const {
        if (r <= 0 || !m.topology_aware || !(topo.remote_sum < kUnlimited)) return 0.0;
        const double eb = m.expert_bytes();
        const double t =
            std::max(drain_bound(eb, topo.remote_path), drain_bound(static_cast<double>(r) * eb, topo.remote_sum));
        return t / m.bandwidth_scale + topo.min_latency;
    }
    // the most node receivers r whose transfer a device-level transfer of n receivers already pays for
    // (node_transfer(r) < that transfer); a little above it when rounding could tell
    int64_t node_receivers_within(int64_t n) const {
        if (!m.topology_aware || !(topo.remote_sum < kUnlimited)) return n;
        const double t =
            (std::max(device_transfer(n, false), device_transfer(n, true)) - topo.min_latency) * m.bandwidth_scale;
        const double eb = m.expert_bytes();
        if (t <= drain_bound(eb, topo.remote_path) * (1 - 1e-9)) return 0;  // not even one copy across nodes
        const double r = t * topo.remote_sum / eb;
        return std::min<int64_t>(n, static_cast<int64_t>(std::floor(r * (1 + 1e-9))));
    }
    // Star broadcast: an expert's rho node receivers each take a copy from its owner across nodes, all through the
    // owner's inter-node egress (Agg: ingress), so Trans and Agg >= rho x expert_bytes / owner_remote (docs/bounds.md
    // "Per-owner egress"); 0 where the term does not apply (one node, chain broadcast, flat model).
    bool owner_term() const {
        return m.topology_aware && m.trans_broadcast == TransBroadcast::kStar && topo.remote_sum < kUnlimited &&
               topo.owner_remote > 0 && topo.owner_remote < kUnlimited;
    }
    double owner_transfer(int rho) const {
        if (rho <= 0 || !owner_term()) return 0.0;
        return static_cast<double>(rho) * m.expert_bytes() / topo.owner_remote / m.bandwidth_scale + topo.min_latency;
    }
    // the most node receivers per expert whose owner transfer stays within t (a little above it when rounding
    // could tell: more is always safe)
    int rho_within(double t) const {
        if (!owner_term()) return u.max_rho;
        const double copies = (t - topo.min_latency) * m.bandwidth_scale * topo.owner_remote / m.expert_bytes();
        if (!(copies > 0)) return 0;
        return static_cast<int>(std::min<double>(u.max_rho, std::floor(copies * (1 + 1e-9))));
    }
};

LayerInputs layer_inputs(const CostModel& m, const int64_t* counts, int D, int E, const BoundBudget& budget) {
    // the long arrays keep their memory between calls (one thread's layers are bounded one at a time)
    thread_local std::vector<int64_t> gain, curve;
    thread_local std::vector<std::vector<int64_t>> node_gain;  // [rho]
    thread_local std::vector<double> receive;
    LayerInputs in{
        m, m.topology_aware ? topology_limits(m.cluster) : TopologyLimits{}, {}, curve, receive, true, 0.0, 1.0, 0, 0,
        {}};
    std::vector<int64_t> w(E, 0);  // [E] expert loads
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) w[e] += counts[static_cast<size_t>(d) * E + e];
    for (int64_t v : w) in.u.total += v;
    in.u.num_experts = E;
    gain_beyond_best(counts, D, E, &in.u.best_local, gain);
    in.u.gain = &gain;
    int nodes = 1;
    const std::vector<int64_t> per_node = node_counts(counts, m.cluster, E, &nodes);
    in.u.max_rho = nodes - 1;
    node_gain.resize(static_cast<size_t>(nodes));
    // each cap rho < nodes - 1 only where the per-owner egress term can bind (it reads them through rho_within)
    for (int rho = in.owner_term() ? 0 : nodes - 1; rho < nodes; ++rho)
        gain_beyond_best(per_node.data(), nodes, E, &in.u.node_best_local, node_gain[static_cast<size_t>(rho)],
                         rho < nodes - 1 ? rho : std::numeric_limits<int>::max());
    in.u.node_gain = &node_gain;
    in.per_token_s = m.expert_flops_per_token() / (m.cluster.compute_flops * m.compute_scale);
    // n = receivers a transfer reaches: replicas only (an owner away from its home pays no per-iteration
    // Trans/Agg: cost_model.h), at most D * cap
    const int cap = budget.max_replicas_per_device;
    in.max_receivers = static_cast<int64_t>(E) * (D - 1);
    in.max_extra = cap > 0 ? std::min<int64_t>(in.max_receivers, static_cast<int64_t>(D) * cap) : in.max_receivers;
    compute_curve(w, D, in.u.total, in.max_extra, curve);
    receive_curve(counts, D, E, in.max_extra, receive);
    in.receive_complete = static_cast<int64_t>(in.receive.size()) - 1 < std::min(in.max_extra, kReceiveSteps);
    return in;
}

// n in blocks [n, last]: one past kExactReceivers, blocks of n / kBlocksPerDoubling receivers; a block takes the
// terms that fall with n at its last n and those that grow at its first, so it bounds every n in it
constexpr int64_t kExactReceivers = 1024, kBlocksPerDoubling = 128;
int64_t block_end(int64_t n, int64_t limit) {
    return std::min(limit, n < kExactReceivers ? n : n + n / kBlocksPerDoubling - 1);
}

// Placements whose node receivers r cost no more transfer than their device-level receivers n already do
// (r <= node_receivers_within(n)): the node-level all-to-all at that r.
void scan_receivers(const LayerInputs& in, LayerBound& b) {
    const int64_t last_pair = static_cast<int64_t>(in.u.gain->size()) - 1;
    const int64_t last_node_pair = static_cast<int64_t>(in.u.node_gain->back().size()) - 1;
    for (int64_t n = 1, last = 1; n <= in.max_receivers; n = last + 1) {
        last = block_end(n, in.max_receivers);
        const int64_t r = in.node_receivers_within(last);
        // per expert at most the node receivers whose owner transfer that device-level transfer already exceeds
        const int rho =
            in.rho_within(std::max(in.device_transfer(last, false), in.device_transfer(last, true)) * (1 + 1e-9));
        const Terms t = in.terms(last, last, r, rho, in.device_transfer(n, false), in.device_transfer(n, true));
        take_min(b, in.m, in.window, t, n);
        // past here compute and all-to-all cannot fall further and every transfer only grows
        const int64_t x = std::min(last, in.max_extra);
        const bool compute_done =
            x >= static_cast<int64_t>(in.curve.size()) - 1 && x >= static_cast<int64_t>(in.receive.size()) - 1;
        if (compute_done && last >= last_pair && r >= last_node_pair && rho == in.u.max_rho) break;
    }
}

// the most receivers n whose device-level Trans and Agg stay within `trans` and `agg` (n >= lo qualifies)
int64_t receivers_within(const LayerInputs& in, double trans, double agg, int64_t lo) {
    int64_t hi = in.max_receivers;
    auto fits = [&](int64_t n) { return in.device_transfer(n, false) <= trans && in.device_transfer(n, true) <= agg; };
    if (fits(hi)) return hi;
    while (hi - lo > 1) {  // fits(lo), !fits(hi)
        const int64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
    }
    return lo;
}

// Placements whose node receivers r cost more transfer than their device-level receivers: Trans and Agg at the
// node-level bound, and every n up to the most that transfer already pays for (the best of them is the largest).
void scan_node_receivers(const LayerInputs& in, LayerBound& b) {
    if (!in.m.topology_aware || !(in.topo.remote_sum < kUnlimited)) return;
    // r node receivers: at most one per (node, expert) pair beyond the expert's best node, and at most n
    const int nodes = std::max(1, in.m.cluster.num_devices / in.m.cluster.devices_per_node);
    const int64_t limit = std::min(in.max_extra, in.u.node_pairs_beyond_best(nodes));
    int64_t n_free = 0;
    for (int64_t r = 1, last = 1; r <= limit; r = last + 1) {
        last = block_end(r, limit);
        // every r' in [r, last] has n <= receivers_within(node_transfer(r')) <= n_free and transfers >= t
        const double t = in.node_transfer(r), t_last = in.node_transfer(last);
        n_free = receivers_within(in, t_last, t_last, n_free);
        if (n_free < r) continue;  // no placement has r node receivers and so few device-level ones
        take_min(b, in.m, in.window, in.terms(n_free, n_free, last, in.rho_within(t_last * (1 + 1e-9)), t, t), n_free);
    }
}

// the most node receivers whose node-level transfer stays within t (at most limit)
int64_t node_receivers_below(const LayerInputs& in, double t, int64_t limit) {
    int64_t lo = 0, hi = limit;
    if (in.node_transfer(hi) <= t) return hi;
    while (hi - lo > 1) {  // node_transfer(lo) <= t < node_transfer(hi)
        const int64_t mid = lo + (hi - lo) / 2;
        (in.node_transfer(mid) <= t ? lo : hi) = mid;
    }
    return lo;
}

// Placements whose per-owner transfer (rho node receivers of one expert) exceeds both their device-level and their
// node-level transfers: Trans and Agg at that bound, n and r at most what it already pays for, r <= rho E.
void scan_owner_receivers(const LayerInputs& in, LayerBound& b) {
    if (!in.owner_term()) return;
    const int E = static_cast<int>(in.u.num_experts);
    const int64_t limit = std::min(in.max_extra, in.u.node_pairs_beyond_best(in.u.max_rho + 1));
    for (int rho = 1; rho <= in.u.max_rho; ++rho) {
        const double t = in.owner_transfer(rho);
        const int64_t n = receivers_within(in, t, t, 0);
        const int64_t r = std::min({n, static_cast<int64_t>(rho) * E, node_receivers_below(in, t, limit)});
        if (n < 1) continue;  // not even one receiver's device-level transfer fits: (a) covers it
        take_min(b, in.m, in.window, in.terms(n, n, r, rho, t, t), n);
    }
}

// The levels at which this layer's FEC is split between its own charge and layer l+1's credit: geometric from
// its floor (the least FEC of any placement) to its least FEC without a replica, and "no split" last. Any
// constants are valid; these bracket the FEC a good placement has.
void set_hide_levels(const LayerInputs& in, double* levels) {
    const double floor_s = static_cast<double>(in.curve.back()) * in.per_token_s;
    const double top_s = std::max(floor_s, static_cast<double>(in.curve.front()) * in.per_token_s);
    const double step = floor_s > 0 ? std::pow(top_s / floor_s, 1.0 / (kLevels - 2)) : 1.0;
    for (int k = 0; k < kLevels - 1; ++k) levels[k] = floor_s * std::pow(step, k);
    levels[kLevels - 1] = kUnlimited;
}

}  // namespace

LayerBound layer_bound(const CostModel& m, const int64_t* counts, int D, int E, const BoundBudget& budget, int layer,
                       int num_layers, const double* prev_hide_s) {
    PROPHET_ASSERT(D > 0 && E > 0 && m.cluster.num_devices == D && layer >= 0 && layer < num_layers);
    LayerInputs in = layer_inputs(m, counts, D, E, budget);
    in.share = l2l_share(layer, num_layers);
    in.window.first = layer == 0;
    in.window.last = layer == num_layers - 1;
    if (!in.window.last) set_hide_levels(in, in.window.own_hide_s);
    if (prev_hide_s) std::copy(prev_hide_s, prev_hide_s + kLevels, in.window.prev_hide_s);
    in.window.fnec_s = m.fnec_s();
    in.window.bnec_s = m.bnec_s();
    in.window.transfers_may_hide = budget.sim_transfers_may_hide;
    LayerBound b;
    b.eq6_s = b.eq8_s = b.fastermoe_s = kUnlimited;
    b.eq6_l2l_s = b.eq8_l2l_s = b.fastermoe_l2l_s = kUnlimited;
    for (auto& row : b.sim_parts_s) std::fill(row, row + kLevels, kUnlimited);
    std::copy(in.window.own_hide_s, in.window.own_hide_s + kLevels, b.hide_s);
    // n = 0: no replica, owners anywhere (every token goes to its expert's one holder), no transfer
    take_min(b, m, in.window, in.terms(0, 0, 0, in.u.max_rho, 0.0, 0.0), 0);  // r = 0: any cap keeps 0
    scan_receivers(in, b);
    scan_node_receivers(in, b);
    scan_owner_receivers(in, b);
    b.sim_s = b.sim_parts_s[kLevels - 1][kLevels - 1];
    b.compute_tokens = static_cast<double>(in.curve.back());
    b.a2a_s = a2a_bound(m, in.topo, in.u.sent(in.max_extra), in.u.across(in.max_extra, in.u.max_rho),
                        in.busiest(in.max_extra));
    b.one_transfer_s = D > 1 ? transfer_bound(m, in.topo, 1, false) : 0.0;
    return b;
}

namespace {

// One iteration's layers [L]: each layer's sim_s becomes one of its sim_parts_s, layer l's level being layer l+1's
// credit level, chosen so that their sum is the largest (any consistent choice bounds the sum: docs/bounds.md).
void choose_sim_parts(LayerBound* layers, int L) {
    using Row = std::array<double, kLevels>;
    std::vector<Row> best(static_cast<size_t>(L));                       // [l][k]: the largest sum up to l
    std::vector<std::array<int, kLevels>> from(static_cast<size_t>(L));  // [l][k]: layer l-1's level there
    for (int k = 0; k < kLevels; ++k) best[0][k] = layers[0].sim_parts_s[kLevels - 1][k];
    for (int l = 1; l < L; ++l)
        for (int k = 0; k < kLevels; ++k) {
            best[l][k] = -kUnlimited;
            for (int j = 0; j < kLevels; ++j) {
                const double v = best[l - 1][j] + layers[l].sim_parts_s[j][k];
                if (v > best[l][k]) best[l][k] = v, from[l][k] = j;
            }
        }
    int k = static_cast<int>(std::max_element(best[L - 1].begin(), best[L - 1].end()) - best[L - 1].begin());
    for (int l = L - 1; l >= 0; --l) {
        const int j = l > 0 ? from[l][k] : kLevels - 1;
        layers[l].sim_s = layers[l].sim_parts_s[j][k];
        k = j;
    }
}

}  // namespace

TraceBounds trace_bounds(const TraceView& trace, const CostModel& cost, const BoundBudget& budget) {
    const int I = trace.num_iterations, L = trace.num_layers, D = trace.num_devices, E = trace.num_experts;
    TraceBounds out;
    std::vector<double> us;
    const CostModel first = model_for_layer(cost, 0), later = model_for_layer(cost, 1);
    for (int it = 0; it < I; ++it) {
        for (int l = 0; l < L; ++l) {
            const int64_t t0 = now_ns();
            const double* prev = l > 0 ? out.layers.back().hide_s : nullptr;
            out.layers.push_back(layer_bound(l == 0 ? first : later, trace.layer(it, l), D, E, budget, l, L, prev));
            us.push_back((now_ns() - t0) * 1e-3);
        }
        choose_sim_parts(&out.layers[static_cast<size_t>(it) * L], L);
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
