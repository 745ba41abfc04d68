// layer_bound (bounds.h): one layer's inputs, then the scans over receivers n, node receivers r and per-owner copies
// rho that evaluate every model at the terms' bounds (docs/bounds.md "Coupling n and r").
#include "balance/bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "balance/bound_curves.h"
#include "balance/bound_models.h"
#include "balance/bound_terms.h"
#include "balance/bound_topology.h"
#include "core/error.h"

namespace prophet {
namespace bound_detail {
namespace {

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
    CostModel m;  // a copy: the Sim pieces of the flat paper count rescan the same inputs under another count
    TopologyLimits topo;
    Unavoidable u;
    const std::vector<int64_t>& curve;   // compute_curve
    const std::vector<double>& receive;  // receive_curve
    bool receive_complete = true;        // it stopped falling before kReceiveSteps
    double per_token_s = 0, share = 1;
    int64_t max_receivers = 0, max_extra = 0;
    SimWindow window;
    BoundColumns columns = BoundColumns::kAll;  // what a scan of these inputs computes (scan_layer)
    // one copy's Trans and Agg (device_transfer(1)) and one copy across nodes (node_transfer(1)): the parts of
    // one_expert that do not depend on the class, set once per layer by layer_inputs
    double one_copy_trans = 0, one_copy_agg = 0, one_node_copy = 0;
    // the most node receivers whole experts can put in the first window of Trans (FNEC) and of Agg (BNEC)
    // (window_node_receivers), set with one_node_copy
    int64_t fnec_node_receivers = 0, bnec_node_receivers = 0;
    // the mixed all-to-all term at kMixedWeights[j] (bound_curves.h): base_s[j] = what every token crossing
    // would cost (a + b) x total; none where the cluster has one node or no device limit
    static constexpr int kMixes = 3;
    static constexpr double kMixedWeights[kMixes] = {0.5, 0.75, 0.9};  // lambda: any value in [0, 1] is valid
    const MixedGain* mixed = nullptr;
    double mixed_base_s[kMixes] = {};

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
        t.a2a = std::max(t.a2a, mixed_a2a(std::min(device_n, max_extra)));
        t.a2a_l2l = share * t.a2a;
        t.trans = trans;
        t.agg = agg;
        return t;
    }
    // lambda x (device-level drain) + (1 - lambda) x (node-level drain) <= the larger of the two, which every
    // all-to-all of a placement with x extra holders takes at least (docs/bounds.md "All-to-all", mixed)
    double mixed_a2a(int64_t x) const {
        if (!mixed) return 0.0;
        double best = 0;  // below a rounding error of the sums (a placement that keeps every token local): none
        for (int j = 0; j < kMixes; ++j) {
            const double left = mixed_base_s[j] - mixed[j].forced - mixed[j].beyond_owners(x);
            if (left > 1e-9 * mixed_base_s[j]) best = std::max(best, left);
        }
        return best > 0 ? best / m.bandwidth_scale + topo.min_latency + m.cluster.a2a_latency_s : 0.0;
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
    // The longest single expert's own Trans and Agg in a class with at least one receiver, node_r >= 1 of them on
    // a node without another holder (its copy crosses nodes) and one expert with rho >= 1 node receivers from its
    // owner (star): each is a lower bound on that expert's copies alone, so on the longest
    void one_expert(Terms& t, int64_t node_r, int rho) const {
        const double node = node_r > 0 ? one_node_copy : 0.0, owner = owner_transfer(rho);
        t.one_trans = std::max({one_copy_trans, node, owner});
        t.one_agg = std::max({one_copy_agg, node, owner});
        t.each_trans = one_copy_trans;  // every expert with a copy moves at least one
        t.each_agg = one_copy_agg;
    }
    // some column moves whole experts (Eq 8's default credit, the Sim column's `time` split)
    bool whole_experts() const {
        return m.transfer_credit == TransferCredit::kWholeExperts ||
               (window.whole_experts && !window.transfers_may_hide);
    }
    // Whole experts fill the first window with experts each timed alone: one with k >= 1 node receivers takes at
    // least one copy across nodes, and under a star O(k), so the window holds at most this many node receivers
    // (a little above it when rounding could tell: more is always safe). max_extra where no copy crosses nodes.
    int64_t window_node_receivers(double window) const {
        if (!(one_node_copy > 0)) return max_extra;
        const double experts = std::floor(window / one_node_copy * (1 + 1e-9));
        double most = experts * u.max_rho;
        if (owner_term()) most = std::min(most, owner_copies_within(window));
        return static_cast<int64_t>(std::min<double>(most, static_cast<double>(max_extra)));
    }
    // a class with at least node_r node receivers: those beyond what the first windows hold cross nodes beside
    // the second (docs/bounds.md "Whole experts")
    void rest_beyond_windows(Terms& t, int64_t node_r) const {
        t.rest_trans = node_transfer(node_r - fnec_node_receivers);
        t.rest_agg = node_transfer(node_r - bnec_node_receivers);
    }
    // Classes whose experts have at most rho node receivers each are scored once per most-of-any k (its all-to-all
    // at k, its longest expert's transfer at least O(k)) from this k on: below it O(k) fits both non-expert windows,
    // so whole experts add nothing and the all-to-all at the larger k is the lower (docs/bounds.md "Whole experts").
    // rho itself where whole experts cannot matter (chain, chunks, transfers that may hide).
    int least_whole_rho(int rho) const {
        if (!owner_term() || !whole_experts()) return rho;
        int k = 0;
        while (k < rho && owner_transfer(k + 1) <= std::min(window.fnec_s, window.bnec_s)) ++k;
        return k;
    }
    // the most node receivers per expert whose owner transfer stays within t (a little above it when rounding
    // could tell: more is always safe)
    int rho_within(double t) const {
        if (!owner_term()) return u.max_rho;
        return static_cast<int>(std::min<double>(u.max_rho, owner_copies_within(t)));
    }
    // the most copies one owner's inter-node egress sends within t: copies x expert_bytes / owner_remote + the
    // smallest latency <= t (a little above it when rounding could tell; 0 when none fits). Under owner_term().
    double owner_copies_within(double t) const {
        const double copies = (t - topo.min_latency) * m.bandwidth_scale * topo.owner_remote / m.expert_bytes();
        return copies > 0 ? std::floor(copies * (1 + 1e-9)) : 0.0;
    }
};

// The mixed all-to-all curves (LayerInputs::mixed) on a topology of several nodes with finite device ingress, where
// the devices' ingress sum is at most kMixedCapacityRatio x the nodes' inter-node sum: beyond, the device-level drain
// adds too little to lift the node-level one, so it is not computed (leaving it out only lowers the bound). The
// H100 and H200 files are at 8.6x, hpnv-16 at 21.8x (there the term moved no bound of issue 22's cases while it cost
// about 1.2 ms per layer at DeepSeek-V3 scale), hpwnv-16 at 3.8x.
constexpr double kMixedCapacityRatio = 8.0;
void set_mixed(LayerInputs& in, const int64_t* counts, int E) {
    thread_local MixedGain curves[LayerInputs::kMixes];
    const TopologyLimits& topo = in.topo;
    if (!in.m.topology_aware || !(topo.remote_sum < kUnlimited) || !(topo.ingress_sum < kUnlimited) ||
        !(topo.ingress_sum > 0) || !(topo.remote_sum > 0) || topo.ingress_sum > kMixedCapacityRatio * topo.remote_sum)
        return;
    const double tb = in.m.token_bytes();
    for (int j = 0; j < LayerInputs::kMixes; ++j) {
        const double lambda = LayerInputs::kMixedWeights[j];
        const double a = lambda * tb / topo.ingress_sum, b = (1 - lambda) * tb / topo.remote_sum;
        mixed_gain_curve(counts, in.m.cluster, E, a, b, curves[j]);
        in.mixed_base_s[j] = (a + b) * static_cast<double>(in.u.total);
    }
    in.mixed = curves;
}

// one copy's Trans and Agg and one copy across nodes under in.m (LayerInputs::one_copy_trans ...)
void set_one_copies(LayerInputs& in) {
    in.one_copy_trans = in.device_transfer(1, false);
    in.one_copy_agg = in.device_transfer(1, true);
    in.one_node_copy = in.node_transfer(1);
    in.fnec_node_receivers = in.window_node_receivers(in.m.fnec_s());
    in.bnec_node_receivers = in.window_node_receivers(in.m.bnec_s());
}

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
    set_mixed(in, counts, E);
    set_one_copies(in);
    return in;
}

// n in blocks [n, last]: one past kExactReceivers, blocks of n / kBlocksPerDoubling receivers; a block takes the
// terms that fall with n at its last n and those that grow at its first, so it bounds every n in it
constexpr int64_t kExactReceivers = 1024, kBlocksPerDoubling = 128;
int64_t block_end(int64_t n, int64_t limit) {
    return std::min(limit, n < kExactReceivers ? n : n + n / kBlocksPerDoubling - 1);
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

// Splits a class's node receivers [0, r_most] into pieces [lo, hi] (each scored with the node-level all-to-all at hi
// and the rest beyond the first windows at lo, so each bounds every r in it): one up to the r whose rest cannot
// exceed the device-level exposure (trans - fnec, agg - bnec), then kRestPieces equal ones.
constexpr int kRestPieces = 8;
template <class Score>
void for_node_receiver_pieces(const LayerInputs& in, int64_t r_most, double trans, double agg, Score score) {
    const bool no_window = in.m.first_block && in.window.first;  // layer 0: both transfers whole in every column
    if (!in.whole_experts() || no_window || !(in.one_node_copy > 0)) return score(0, r_most);
    const double room = std::min(trans - in.window.fnec_s, agg - in.window.bnec_s);
    const int64_t quiet = std::min(in.fnec_node_receivers, in.bnec_node_receivers) +
                          (room > 0 ? node_receivers_below(in, room, r_most) : 0);
    if (quiet >= r_most) return score(0, r_most);
    score(0, quiet);
    const int64_t span = r_most - quiet;
    for (int64_t p = 0, lo = quiet + 1; p < kRestPieces && lo <= r_most; ++p) {
        const int64_t hi = std::min(r_most, quiet + span * (p + 1) / kRestPieces);
        if (hi < lo) continue;
        score(lo, hi);
        lo = hi + 1;
    }
}

// Placements whose node receivers r cost no more transfer than their device-level receivers n already do
// (r <= node_receivers_within(n)): the node-level all-to-all at that r.
void scan_receivers(const LayerInputs& in, LayerBound& b) {
    const int64_t last_pair = static_cast<int64_t>(in.u.gain->size()) - 1;
    const int64_t last_node_pair = static_cast<int64_t>(in.u.node_gain->back().size()) - 1;
    for (int64_t n = 1, last = 1; n <= in.max_receivers; n = last + 1) {
        last = block_end(n, in.max_receivers);
        const int64_t r = in.node_receivers_within(last);
        const double trans = in.device_transfer(n, false), agg = in.device_transfer(n, true);
        // per expert at most the node receivers whose owner transfer that device-level transfer already exceeds
        const int rho =
            in.rho_within(std::max(in.device_transfer(last, false), in.device_transfer(last, true)) * (1 + 1e-9));
        // rho caps each expert's node receivers; the most any expert has, k, makes its own transfer at least O(k)
        for_node_receiver_pieces(in, r, trans, agg, [&](int64_t lo, int64_t hi) {
            for (int k = in.least_whole_rho(rho); k <= rho; ++k) {
                Terms t = in.terms(last, last, hi, k, trans, agg);
                in.one_expert(t, lo, k);
                in.rest_beyond_windows(t, lo);
                take_min(b, in.m, in.window, t, n, in.columns);
            }
        });
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
        const int rho = in.rho_within(t_last * (1 + 1e-9));
        for (int k = in.least_whole_rho(rho); k <= rho; ++k) {  // as in scan_receivers
            Terms terms = in.terms(n_free, n_free, last, k, t, t);
            in.one_expert(terms, 1, k);  // r >= 1: some expert has a copy on a node without another holder
            in.rest_beyond_windows(terms, r);
            take_min(b, in.m, in.window, terms, n_free, in.columns);
        }
    }
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
        Terms terms = in.terms(n, n, r, rho, t, t);
        in.one_expert(terms, 1, rho);  // some expert has rho node receivers, all sent by its owner
        in.rest_beyond_windows(terms, rho);
        take_min(b, in.m, in.window, terms, n, in.columns);
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

// The pairwise pieces' FEC grid: geometric from the floor (every placement's FEC bound is at least it) to the least
// FEC without a replica. Any levels are valid; a finer grid loses less of each FEC to the rounding down.
void set_fec_levels(const LayerInputs& in, double* levels) {
    constexpr int G = LayerBound::kFecLevels;
    const double floor_s = static_cast<double>(in.curve.back()) * in.per_token_s;
    const double top_s = std::max(floor_s, static_cast<double>(in.curve.front()) * in.per_token_s);
    const double step = floor_s > 0 ? std::pow(top_s / floor_s, 1.0 / (G - 1)) : 1.0;
    levels[0] = floor_s;
    for (int k = 1; k < G - 1; ++k) levels[k] = std::min(top_s, floor_s * std::pow(step, k));
    levels[G - 1] = top_s;
}

// Every model's bound of the layer whose inputs (window included) are `in`: n = 0 and the three scans.
LayerBound scan_layer(const LayerInputs& in) {
    constexpr int G = LayerBound::kFecLevels;
    LayerBound b;
    b.eq6_s = b.eq8_s = b.fastermoe_s = kUnlimited;
    b.eq6_l2l_s = b.eq8_l2l_s = b.fastermoe_l2l_s = kUnlimited;
    b.sim_none_s = b.sim_fastermoe_s = kUnlimited;
    for (auto& row : b.sim_parts_s) std::fill(row, row + kLevels, kUnlimited);
    std::copy(in.window.own_hide_s, in.window.own_hide_s + kLevels, b.hide_s);
    for (auto& row : b.sim_pairs_s) std::fill(row, row + G, kUnlimited);
    std::copy(in.window.own_fec_s, in.window.own_fec_s + G, b.fec_level_s);
    // n = 0: no replica, owners anywhere (every token goes to its expert's one holder), no transfer; r = 0, which
    // any cap allows
    take_min(b, in.m, in.window, in.terms(0, 0, 0, in.u.max_rho, 0.0, 0.0), 0, in.columns);
    scan_receivers(in, b);
    scan_node_receivers(in, b);
    scan_owner_receivers(in, b);
    b.sim_s = std::min({b.sim_parts_s[kLevels - 1][kLevels - 1], b.sim_none_s, b.sim_fastermoe_s});  // alone
    return b;
}

}  // namespace
}  // namespace bound_detail

LayerBound layer_bound(const CostModel& m, const int64_t* counts, int D, int E, const BoundBudget& budget, int layer,
                       int num_layers, const double* prev_hide_s, const double* prev_fec_level_s) {
    PROPHET_ASSERT(D > 0 && E > 0 && m.cluster.num_devices == D && layer >= 0 && layer < num_layers);
    using namespace bound_detail;  // NOLINT(google-build-using-namespace): this file's helpers
    LayerInputs in = layer_inputs(m, counts, D, E, budget);
    in.share = l2l_share(layer, num_layers);
    in.window.first = layer == 0;
    in.window.last = layer == num_layers - 1;
    if (!in.window.last) set_hide_levels(in, in.window.own_hide_s);
    if (prev_hide_s) std::copy(prev_hide_s, prev_hide_s + kLevels, in.window.prev_hide_s);
    constexpr int G = LayerBound::kFecLevels;
    set_fec_levels(in, in.window.own_fec_s);
    if (prev_fec_level_s) std::copy(prev_fec_level_s, prev_fec_level_s + G, in.window.prev_fec_s);
    in.window.fnec_s = m.fnec_s();
    in.window.bnec_s = m.bnec_s();
    in.window.transfers_may_hide = budget.sim_transfers_may_hide;
    in.window.whole_experts = budget.sim_whole_experts;
    const bool paper_count = !m.topology_aware && m.trans_receivers == TransReceivers::kPaper;
    if (paper_count) in.columns = BoundColumns::kModels;  // the Sim column is scanned under the simulator's count
    LayerBound b = scan_layer(in);
    b.compute_tokens = static_cast<double>(in.curve.back());
    b.a2a_s = a2a_bound(m, in.topo, in.u.sent(in.max_extra), in.u.across(in.max_extra, in.u.max_rho),
                        in.busiest(in.max_extra));
    b.one_transfer_s = D > 1 ? transfer_bound(m, in.topo, 1, false) : 0.0;
    if (paper_count) {
        // The simulator moves the replica holders' copies only (sim_setup); the paper's count, which the Eq
        // columns keep, adds each replicated expert's sender. So the Sim column (the pieces and the none and
        // fastermoe schedules' bounds) is that of the same bound under the simulator's count. Its curves and levels
        // depend on the counts and compute only, so the same inputs are scanned again.
        LayerInputs moved = in;
        moved.m.trans_receivers = TransReceivers::kReplicaHolders;
        moved.columns = BoundColumns::kSim;
        set_one_copies(moved);
        const LayerBound s = scan_layer(moved);
        std::copy(&s.sim_parts_s[0][0], &s.sim_parts_s[0][0] + kLevels * kLevels, &b.sim_parts_s[0][0]);
        std::copy(&s.sim_pairs_s[0][0], &s.sim_pairs_s[0][0] + G * G, &b.sim_pairs_s[0][0]);
        b.sim_none_s = s.sim_none_s, b.sim_fastermoe_s = s.sim_fastermoe_s;
        b.sim_s = s.sim_s;
    }
    return b;
}

}  // namespace prophet
