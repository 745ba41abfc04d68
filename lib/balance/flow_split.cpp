// flow_split.cpp: the parametric max-flow split of flow_split.h and its token fill.
#include "balance/flow_split.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "balance/max_flow.h"
#include "core/error.h"

namespace prophet {
namespace {

// The replicated experts with load, their holders (device order) and the fixed loads of everything else.
struct SplitInstance {
    std::vector<int> experts;               // [K] replicated experts with tokens
    std::vector<std::vector<int>> holders;  // [K] devices holding each
    std::vector<int64_t> load;              // [K] w_e
    std::vector<double> fixed;              // [D] h0: tokens of one-holder experts on their owner
    double total = 0;                       // W = sum of load
};

SplitInstance split_instance(const std::vector<int64_t>& w, const Placement& p) {
    const int D = p.num_devices, E = p.num_experts;
    SplitInstance in;
    in.fixed.assign(D, 0.0);
    std::vector<int> holders;
    for (int e = 0; e < E; ++e) {
        holders.clear();
        if (w[e] > 0)  // one pass over e's replica flags: its holders in device order
            for (int g = 0; g < D; ++g)
                if (g == p.owner[e] || p.replica[static_cast<size_t>(e) * D + g]) holders.push_back(g);
        if (holders.size() <= 1) {
            in.fixed[p.owner[e]] += static_cast<double>(w[e]);
            continue;
        }
        in.experts.push_back(e);
        in.load.push_back(w[e]);
        in.total += static_cast<double>(w[e]);
        in.holders.push_back(holders);
    }
    return in;
}

// The parametric search of flow_split.h; share[k][j]: expert k's fractional tokens on its j-th holder.
double least_max_computed(const int64_t* counts, int E, const SplitInstance& in,
                          std::vector<std::vector<double>>& share, int* solves) {
    const int K = static_cast<int>(in.experts.size()), D = static_cast<int>(in.fixed.size());
    const int source = 0, sink = 1, first_device = 2 + K;
    std::vector<char> holds_any(D, 0);
    for (const auto& hs : in.holders)
        for (int g : hs) holds_any[g] = 1;
    double spread = in.total, busiest = 0;
    int holding = 0;
    for (int g = 0; g < D; ++g) {
        busiest = std::max(busiest, in.fixed[g]);
        if (holds_any[g]) spread += in.fixed[g], ++holding;
    }
    double t = std::max(busiest, spread / holding);
    MaxFlow mf(first_device + D);
    std::vector<int> device_arc(D, -1);
    std::vector<double> room(D, 0.0);  // what the local start has left under t
    for (int g = 0; g < D; ++g)
        if (holds_any[g])
            device_arc[g] = mf.add_arc(first_device + g, sink, t - in.fixed[g]), room[g] = t - in.fixed[g];
    std::vector<std::vector<int>> arc(K);
    for (int k = 0; k < K; ++k) {
        const int e = in.experts[k];
        const int source_arc = mf.add_arc(source, 2 + k, static_cast<double>(in.load[k]));
        double started = 0;
        for (int g : in.holders[k]) {
            arc[k].push_back(mf.add_arc(2 + k, first_device + g, std::numeric_limits<double>::infinity()));
            const double local = std::min(static_cast<double>(counts[static_cast<size_t>(g) * E + e]), room[g]);
            mf.set_flow(arc[k].back(), local);
            room[g] -= local, started += local;
        }
        mf.set_flow(source_arc, started);
    }
    for (int g = 0; g < D; ++g)
        if (holds_any[g]) mf.set_flow(device_arc[g], t - in.fixed[g] - room[g]);
    const double eps = 1e-13 * std::max(1.0, in.total);
    for (*solves = 1;; ++*solves) {
        if (in.total - mf.solve(source, sink, eps) <= 1e-12 * in.total) break;
        const std::vector<char> side = mf.source_side(source, eps);
        double need = 0;
        int devices = 0;
        for (int k = 0; k < K; ++k) need += side[2 + k] ? static_cast<double>(in.load[k]) : 0.0;
        for (int g = 0; g < D; ++g)
            if (side[first_device + g]) need += in.fixed[g], ++devices;
        PROPHET_ASSERT(devices > 0);
        const double raised = need / devices;
        if (!(raised > t * (1 + 1e-12))) break;  // rounding: the flow is short by noise only
        t = raised;
        for (int g = 0; g < D; ++g)
            if (holds_any[g]) mf.raise_capacity(device_arc[g], t - in.fixed[g]);
    }
    share.assign(K, {});
    for (int k = 0; k < K; ++k)
        for (int a : arc[k]) share[k].push_back(mf.flow_on(a));
    return t;
}

// 0: same NVLink domain, 1: same node, 2: elsewhere (no cluster: all 0)
int distance(const ClusterSpec* cluster, int s, int g) {
    if (!cluster) return 0;
    const ClusterSpec::LinkClass c = cluster->link_class(s, g);
    return c == ClusterSpec::LinkClass::kNvlink ? 0 : c == ClusterSpec::LinkClass::kIntraNode ? 1 : 2;
}

// Expert e's integer quotas on its holders filled from its groups: own tokens first, then the nearest sources.
void fill_groups(const int64_t* counts, int D, int E, int e, const std::vector<int>& holders,
                 std::vector<int64_t> quota, const ClusterSpec* cluster, std::vector<SplitPart>& parts) {
    std::vector<int64_t> left(D);
    for (int s = 0; s < D; ++s) left[s] = counts[static_cast<size_t>(s) * E + e];
    auto give = [&](int s, size_t j) {
        const int64_t n = std::min(left[s], quota[j]);
        if (n > 0) parts.push_back({s, e, holders[j], n}), left[s] -= n, quota[j] -= n;
    };
    for (size_t j = 0; j < holders.size(); ++j) give(holders[j], j);
    for (int s = 0; s < D; ++s)
        for (int d = 0; d < 3 && left[s] > 0; ++d)
            for (size_t j = 0; j < holders.size() && left[s] > 0; ++j)
                if (distance(cluster, s, holders[j]) == d) give(s, j);
    // a group with tokens but no part would fall to the owner rule: every token must be in a part
    for (int s = 0; s < D; ++s) PROPHET_ASSERT_MSG(left[s] == 0, "fast split: quotas do not cover the groups");
}

}  // namespace

std::vector<int64_t> round_shares(const double* x, int n, int64_t total) {
    std::vector<int64_t> out(n);
    std::vector<double> rest(n);
    int64_t used = 0;
    for (int i = 0; i < n; ++i) {
        const double v = std::max(0.0, x[i]);
        out[i] = std::min<int64_t>(static_cast<int64_t>(std::floor(v + 1e-9)), total);
        rest[i] = v - static_cast<double>(out[i]);
        used += out[i];
    }
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rest[a] > rest[b]; });
    for (int i = 0; used < total; i = (i + 1) % n, ++used) ++out[order[i]];
    for (int i = n - 1; used > total; i = (i + n - 1) % n) {  // floor's epsilon overshot: take back from the end
        if (out[order[i]] > 0) --out[order[i]], --used;
    }
    return out;
}

FastSplitter::FastSplitter(const int64_t* counts, int D, int E, const ClusterSpec* cluster)
    : counts_(counts), D_(D), E_(E), cluster_(cluster), load_(E, 0) {
    for (int s = 0; s < D; ++s)
        for (int e = 0; e < E; ++e) load_[e] += counts[static_cast<size_t>(s) * E + e];
    for (int64_t w : load_) total_ += w;
}

std::vector<SplitPart> FastSplitter::parts(const Placement& p, FastSplitReport* report) const {
    PROPHET_ASSERT(p.num_devices == D_ && p.num_experts == E_);
    const SplitInstance in = split_instance(load_, p);
    FastSplitReport rep;
    rep.max_computed = *std::max_element(in.fixed.begin(), in.fixed.end());
    std::vector<SplitPart> out;
    if (!in.experts.empty()) {
        std::vector<std::vector<double>> share;
        rep.max_computed = least_max_computed(counts_, E_, in, share, &rep.max_flow_solves);
        for (size_t k = 0; k < in.experts.size(); ++k) {
            const std::vector<int64_t> quota =
                round_shares(share[k].data(), static_cast<int>(share[k].size()), in.load[k]);
            fill_groups(counts_, D_, E_, in.experts[k], in.holders[k], quota, cluster_, out);
        }
    }
    if (report) *report = rep;
    return out;
}

LayerFlow FastSplitter::split(const Placement& p, FastSplitReport* report) {
    return flow_from_parts(counts_, D_, E_, p, parts(p, report));
}

LayerFlow FastSplitter::split_totals(const Placement& p, FastSplitReport* report) {
    const std::vector<SplitPart> split_parts = parts(p, report);
    const int D = D_, E = E_;
    if (base_owner_ != p.owner) {  // the owner rule's routes for these owners, once
        base_owner_ = p.owner;
        base_route_.assign(static_cast<size_t>(D) * D, 0);
        for (int s = 0; s < D; ++s)
            for (int e = 0; e < E; ++e)
                base_route_[static_cast<size_t>(s) * D + p.owner[e]] += counts_[static_cast<size_t>(s) * E + e];
    }
    LayerFlow flow;
    flow.num_devices = D, flow.num_experts = E, flow.total_tokens = total_;
    flow.route = base_route_;
    flow.replica_holders.assign(E, 0);
    for (int e = 0; e < E; ++e) {
        flow.replica_holders[e] = p.num_replicas_of(e);
        if (flow.replica_holders[e] == 0 || load_[e] == 0) continue;
        for (int s = 0; s < D; ++s)  // the split replaces the owner rule's route of a replicated expert
            flow.route[static_cast<size_t>(s) * D + p.owner[e]] -= counts_[static_cast<size_t>(s) * E + e];
    }
    for (const SplitPart& part : split_parts) flow.route[static_cast<size_t>(part.src) * D + part.dst] += part.tokens;
    flow.computed.assign(D, 0), flow.received.assign(D, 0), flow.sent.assign(D, 0);
    for (int s = 0; s < D; ++s)
        for (int g = 0; g < D; ++g) {
            const int64_t n = flow.route[static_cast<size_t>(s) * D + g];
            flow.computed[g] += n;
            if (s != g) flow.sent[s] += n, flow.received[g] += n;
        }
    return flow;
}

LayerFlow fast_split_layer(const int64_t* counts, int D, int E, const Placement& p, const ClusterSpec* cluster,
                           FastSplitReport* report) {
    return FastSplitter(counts, D, E, cluster).split(p, report);
}

}  // namespace prophet
