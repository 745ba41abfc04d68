// flow_split.cpp: the parametric max-flow split of flow_split.h and its token fill.
#include "balance/flow_split.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace prophet {
namespace {

// the devices whose flag is set in one expert's row of replica flags [D], ascending; eight flags per test
// (replicas are few, so most words are zero)
void flagged_devices(const uint8_t* flags, int D, std::vector<int>& out) {
    if (D % 8 == 0) {  // most rows are all zero: the row's words OR-ed first, one test
        uint64_t any = 0;
        for (int g = 0; g < D; g += 8) {
            uint64_t word = 0;
            std::memcpy(&word, flags + g, sizeof(word));
            any |= word;
        }
        if (any == 0) return;
    }
    int g = 0;
    for (; g + 8 <= D; g += 8) {
        uint64_t word = 0;
        std::memcpy(&word, flags + g, sizeof(word));
        if (word == 0) continue;
        for (int j = 0; j < 8; ++j)
            if (flags[g + j]) out.push_back(g + j);
    }
    for (; g < D; ++g)
        if (flags[g]) out.push_back(g);
}

// round_shares into out[0..n), with the caller's scratch; the order by remainder is stable (insertion sort for
// the few holders of one expert, else std::stable_sort), so the result is round_shares'.
void round_shares_into(const double* x, int n, int64_t total, int64_t* out, std::vector<double>& rest,
                       std::vector<int>& order) {
    rest.resize(n);
    int64_t used = 0;
    for (int i = 0; i < n; ++i) {
        const double v = std::max(0.0, x[i]);
        out[i] = std::min<int64_t>(static_cast<int64_t>(std::floor(v + 1e-9)), total);
        rest[i] = v - static_cast<double>(out[i]);
        used += out[i];
    }
    order.resize(n);
    std::iota(order.begin(), order.end(), 0);
    auto larger_rest = [&](int a, int b) { return rest[a] > rest[b]; };
    if (n <= 16) {
        for (int i = 1; i < n; ++i)
            for (int j = i; j > 0 && larger_rest(order[j], order[j - 1]); --j) std::swap(order[j], order[j - 1]);
    } else {
        std::stable_sort(order.begin(), order.end(), larger_rest);
    }
    for (int i = 0; used < total; i = (i + 1) % n, ++used) ++out[order[i]];
    for (int i = n - 1; used > total; i = (i + n - 1) % n) {  // floor's epsilon overshot: take back from the end
        if (out[order[i]] > 0) --out[order[i]], --used;
    }
}

// n tokens more (or fewer, n < 0) from s computed on g, in the route and its per-device totals
void add_route(LayerFlow& flow, int s, int g, int64_t n) {
    flow.route[static_cast<size_t>(s) * flow.num_devices + g] += n;
    flow.computed[g] += n;
    if (s != g) flow.sent[s] += n, flow.received[g] += n;
}

}  // namespace

// A source's distance row [D] as device ranges: distance 0 is [domain_lo, domain_hi), inside the node
// [node_lo, node_hi) of distances 0 and 1; every other device is at distance 2 (link_class numbers devices node by
// node and NVLink domain by domain, so both are contiguous; checked here).
FastSplitter::NearRanges FastSplitter::near_ranges(const uint8_t* row, int D) {
    NearRanges r{D, 0, D, 0};
    for (int g = 0; g < D; ++g) {
        if (row[g] <= 1) r.node_lo = std::min(r.node_lo, g), r.node_hi = g + 1;
        if (row[g] == 0) r.domain_lo = std::min(r.domain_lo, g), r.domain_hi = g + 1;
    }
    if (r.domain_lo >= r.domain_hi) r.domain_lo = r.domain_hi = r.node_lo;  // no NVLink domain: an empty range
    for (int g = 0; g < D; ++g) {
        const int expected = g >= r.domain_lo && g < r.domain_hi ? 0 : g >= r.node_lo && g < r.node_hi ? 1 : 2;
        PROPHET_ASSERT_MSG(row[g] == expected, "fast split: a node or NVLink domain is not a range of devices");
    }
    return r;
}

std::vector<int64_t> round_shares(const double* x, int n, int64_t total) {
    std::vector<int64_t> out(n);
    std::vector<double> rest;
    std::vector<int> order;
    round_shares_into(x, n, total, out.data(), rest, order);
    return out;
}

// The replicated experts with load, their holders (device order) and the fixed loads of everything else.
void FastSplitter::fill_instance(const Placement& p) {
    const int D = D_, E = E_;
    Instance& in = in_;
    in.experts.clear(), in.holders.clear(), in.load.clear();
    in.holder_start.assign(1, 0);
    in.fixed.assign(D, 0.0);
    in.replica_flags.assign(E, 0);
    in.total = 0;
    for (int e = 0; e < E; ++e) {
        const size_t first = in.holders.size();
        flagged_devices(p.replica.data() + static_cast<size_t>(e) * D, D, in.holders);
        in.replica_flags[e] = static_cast<int>(in.holders.size() - first);
        if (in.replica_flags[e] == 0) {  // the owner alone (most experts)
            in.fixed[p.owner[e]] += static_cast<double>(load_[e]);
            continue;
        }
        // e's holders in device order: the owner joins the flagged devices where it belongs (once)
        const auto begin = in.holders.begin() + static_cast<std::ptrdiff_t>(first);
        const auto at = std::lower_bound(begin, in.holders.end(), p.owner[e]);
        if (at == in.holders.end() || *at != p.owner[e]) in.holders.insert(at, p.owner[e]);
        if (load_[e] == 0 || in.holders.size() - first <= 1) {
            in.holders.resize(first);
            in.fixed[p.owner[e]] += static_cast<double>(load_[e]);
            continue;
        }
        in.experts.push_back(e);
        in.load.push_back(load_[e]);
        in.total += static_cast<double>(load_[e]);
        in.holder_start.push_back(static_cast<int>(in.holders.size()));
    }
}

// The network of the parametric search at level t (source 0, sink 1, experts 2 .. K+1, then the devices), its
// flow started near-first (flow_split.h "tokens"): each holder takes its own device's tokens, then, on a cluster
// of several nodes, each source's tokens go to its holders inside its node (nearest first), all within each
// holder's room t - h0; the max-flow places the rest. device_arc [D]: the arc device -> sink (-1: holds nothing
// replicated).
void FastSplitter::start_network(double t, const std::vector<char>& holds_any, std::vector<int>& device_arc) {
    const Instance& in = in_;
    const int K = static_cast<int>(in.experts.size()), D = D_, first_device = 2 + K;
    MaxFlow& mf = max_flow_;
    mf.reset(first_device + D);
    device_arc.assign(D, -1);
    room_.assign(D, 0.0);
    own_left_.assign(D, -1.0);
    for (int g = 0; g < D; ++g)
        if (holds_any[g])
            device_arc[g] = mf.add_arc(first_device + g, sink_node, t - in.fixed[g]), room_[g] = t - in.fixed[g];
    in_.holder_arc.resize(in.holders.size());
    started_.resize(in.holders.size());
    for (int k = 0; k < K; ++k) {
        const int source_arc = mf.add_arc(source_node, 2 + k, static_cast<double>(in.load[k]));
        for (int h = in.holder_start[k]; h < in.holder_start[k + 1]; ++h)
            in_.holder_arc[h] =
                mf.add_arc(2 + k, first_device + in.holders[h], std::numeric_limits<double>::infinity());
        double started = 0;
        start_near(k, started);
        for (int h = in.holder_start[k]; h < in.holder_start[k + 1]; ++h) mf.set_flow(in_.holder_arc[h], started_[h]);
        mf.set_flow(source_arc, std::min(started, static_cast<double>(in.load[k])));  // a sum's rounding: an ulp
    }
    for (int g = 0; g < D; ++g)
        if (holds_any[g]) mf.set_flow(device_arc[g], std::clamp(t - in.fixed[g] - room_[g], 0.0, t - in.fixed[g]));
}

// Replicated expert k's start (start_network): started_[h] per holder, their sum added to `started`, room_ taken.
void FastSplitter::start_near(int k, double& started) {
    const int D = D_, e = in_.experts[k], first = in_.holder_start[k], n = in_.holder_start[k + 1] - first;
    const int64_t* column = by_expert_.data() + static_cast<size_t>(e) * D;
    for (int j = 0; j < n; ++j) {
        const int g = in_.holders[first + j];
        started_[first + j] = std::min(static_cast<double>(column[g]), std::max(0.0, room_[g]));
        room_[g] -= started_[first + j], started += started_[first + j];
        own_left_[g] = static_cast<double>(column[g]) - started_[first + j];
    }
    if (!several_nodes_ || !near_start_) return;
    for (int s = 0; s < D; ++s) {
        double left = own_left_[s] >= 0 ? own_left_[s] : static_cast<double>(column[s]);
        const Segments& order = class_segments(k, source_class_[s]);
        for (int i = 0; i < kNodeSegments; ++i)  // the rest are on other nodes
            for (int j = order.lo[i]; j < order.hi[i] && left > 0; ++j) {
                const int g = in_.holders[first + j];
                if (g == s) continue;  // its own tokens, taken above
                const double give = std::min(left, std::max(0.0, room_[g]));
                started_[first + j] += give, room_[g] -= give, started += give, left -= give;
            }
    }
    for (int j = 0; j < n; ++j) own_left_[in_.holders[first + j]] = -1;
}

// The parametric search of flow_split.h; in_.share[h]: the fractional tokens on holder h (in_.holders' order).
// When T had to rise, the network is started again at the final T and solved once more, so that the near-first
// start (start_network) holds at T* rather than at the first, lower level.
double FastSplitter::least_max_computed(int* solves) {
    const Instance& in = in_;
    const int D = D_;
    std::vector<char>& holds_any = holds_any_;
    holds_any.assign(D, 0);
    for (int g : in.holders) holds_any[g] = 1;
    double spread = in.total, busiest = 0;
    int holding = 0;
    for (int g = 0; g < D; ++g) {
        busiest = std::max(busiest, in.fixed[g]);
        if (holds_any[g]) spread += in.fixed[g], ++holding;
    }
    double t = std::max(busiest, spread / holding);
    std::vector<int>& device_arc = device_arc_;
    *solves = 0;
    if (slack_ > 0 && first_level_known_ && first_level_near_ == near_start_) {
        t = first_level_;  // this placement's search from the same start, done at an earlier level
    } else {
        start_network(t, holds_any, device_arc);
        t = raise_until_feasible(t, holds_any, device_arc, solves);
        first_level_ = t, first_level_near_ = near_start_, first_level_known_ = true;
        if (*solves > 1 && several_nodes_ && near_start_ && slack_ <= 0) {
            start_network(t, holds_any, device_arc);
            t = raise_until_feasible(t, holds_any, device_arc, solves);
        }
    }
    if (slack_ > 0) {  // feasible at any level above T*: one solve places what the near start leaves
        start_network(t * (1 + slack_), holds_any, device_arc);
        raise_until_feasible(t * (1 + slack_), holds_any, device_arc, solves);
    }
    in_.share.resize(in.holders.size());
    for (size_t h = 0; h < in.holders.size(); ++h) in_.share[h] = max_flow_.flow_on(in_.holder_arc[h]);
    return t;
}

// Newton's steps from level t on the started network (flow_split.h "compute"); returns T*, counting the solves.
double FastSplitter::raise_until_feasible(double t, const std::vector<char>& holds_any,
                                          const std::vector<int>& device_arc, int* solves) {
    const Instance& in = in_;
    const int K = static_cast<int>(in.experts.size()), D = D_, first_device = 2 + K;
    MaxFlow& mf = max_flow_;
    const double eps = 1e-13 * std::max(1.0, in.total);
    for (++*solves;; ++*solves) {
        if (in.total - mf.solve(source_node, sink_node, eps) <= 1e-12 * in.total) break;
        const std::vector<char> side = mf.source_side(source_node, eps);
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
    return t;
}

// class_segments_ for every replicated expert, once per placement (the network starts and the fill read them):
// devices are numbered node by node and NVLink domain by domain, so within k's holders (ascending) a class's
// domain and node are index ranges. The classes are in the order of their first source, so each bound grows
// with the class: four cursors sweep the holders once per expert.
void FastSplitter::build_class_segments() {
    const int K = static_cast<int>(in_.experts.size()), classes = static_cast<int>(class_near_.size());
    class_segments_.resize(static_cast<size_t>(K) * classes);
    for (int k = 0; k < K; ++k) {
        const int first = in_.holder_start[k], n = in_.holder_start[k + 1] - first;
        const int* holders = in_.holders.data() + first;
        int a = 0, da = 0, db = 0, b = 0;  // the first holder at or past each bound of the class
        auto past = [&](int& i, int device) {
            while (i < n && holders[i] < device) ++i;
            return i;
        };
        for (int c = 0; c < classes; ++c) {
            const NearRanges& r = class_near_[c];
            past(a, r.node_lo), past(da, r.domain_lo), past(db, r.domain_hi), past(b, r.node_hi);
            // distance 0, then 1 (the node around the domain), then 2 (before and after the node)
            class_segments_[static_cast<size_t>(k) * classes + c] = {{da, a, db, 0, b}, {db, da, b, a, n}};
        }
    }
}

// expert k's holder segments for the sources of class c (build_class_segments)
const FastSplitter::Segments& FastSplitter::class_segments(int k, int c) const {
    return class_segments_[static_cast<size_t>(k) * class_near_.size() + c];
}

// Replicated expert k's integer quotas on its holders filled from its groups: own tokens first, then the nearest
// sources (distance 0, 1, 2, then device order; one order per class of sources with the same distance row).
void FastSplitter::fill_groups(int k, std::vector<SplitPart>& parts) {
    const int D = D_, e = in_.experts[k], first = in_.holder_start[k];
    const int n = in_.holder_start[k + 1] - first;
    const int* holders = in_.holders.data() + first;
    quota_.resize(n);
    round_shares_into(in_.share.data() + first, n, in_.load[k], quota_.data(), rest_, order_);
    const int64_t* column = by_expert_.data() + static_cast<size_t>(e) * D;
    left_.assign(column, column + D);
    auto give = [&](int s, int j) {
        const int64_t tokens = std::min(left_[s], quota_[j]);
        if (tokens > 0) parts.push_back({s, e, holders[j], tokens}), left_[s] -= tokens, quota_[j] -= tokens;
    };
    for (int j = 0; j < n; ++j) give(holders[j], j);
    // Quotas only fall, so the holders a class's order has passed with quota 0 stay at 0: each class keeps a
    // cursor past them, and a source starts there (the same parts as starting every source at the order's head:
    // a holder of quota 0 takes nothing). O(D + classes * n) per expert instead of O(D * n).
    const int classes = static_cast<int>(class_near_.size());
    cursor_.resize(classes);
    for (int c = 0; c < classes; ++c) cursor_[c] = {0, class_segments(k, c).lo[0]};
    for (int s = 0; s < D; ++s) {
        const Segments& order = class_segments(k, source_class_[s]);
        for (Cursor& at = cursor_[source_class_[s]]; at.segment < kSegments && left_[s] > 0;) {
            if (at.j >= order.hi[at.segment]) {
                if (++at.segment < kSegments) at.j = order.lo[at.segment];
            } else if (quota_[at.j] == 0) {
                ++at.j;
            } else {
                give(s, at.j);
            }
        }
    }
    // a group with tokens but no part would fall to the owner rule: every token must be in a part
    for (int s = 0; s < D; ++s) PROPHET_ASSERT_MSG(left_[s] == 0, "fast split: quotas do not cover the groups");
}

FastSplitter::FastSplitter(const int64_t* counts, int D, int E, const ClusterSpec* cluster) {
    reset(counts, D, E, cluster);
}

void FastSplitter::reset(const int64_t* counts, int D, int E, const ClusterSpec* cluster) {
    counts_ = counts, D_ = D, E_ = E, several_nodes_ = cluster && cluster->node_of(D - 1) > 0, near_start_ = false;
    base_owner_.clear(), applied_.clear(), removed_.clear();  // base_ is rebuilt from the first placement's owners
    instance_of_ = Placement(), first_level_known_ = false;   // in_ is rebuilt from the first placement
    // each source's distance row (0 same NVLink domain, 1 same node, 2 elsewhere; all 0 without a cluster) as
    // ranges; sources with the same ranges have the same row (near_ranges checks it) and form one class
    std::vector<uint8_t> row(static_cast<size_t>(D), 0);
    source_class_.clear(), class_near_.clear();
    for (int s = 0; s < D; ++s) {
        for (int g = 0; g < D && cluster; ++g) {
            const ClusterSpec::LinkClass c = cluster->link_class(s, g);
            row[g] = c == ClusterSpec::LinkClass::kNvlink ? 0 : c == ClusterSpec::LinkClass::kIntraNode ? 1 : 2;
        }
        const NearRanges r = near_ranges(row.data(), D);
        const auto same = std::find(class_near_.begin(), class_near_.end(), r);
        source_class_.push_back(static_cast<int>(same - class_near_.begin()));
        if (same == class_near_.end()) class_near_.push_back(r);
    }
    for (size_t c = 1; c < class_near_.size(); ++c) {  // build_class_segments' sweep
        const NearRanges &before = class_near_[c - 1], &r = class_near_[c];
        PROPHET_ASSERT(before.node_lo <= r.node_lo && before.domain_lo <= r.domain_lo &&
                       before.domain_hi <= r.domain_hi && before.node_hi <= r.node_hi);
    }
    by_expert_.resize(static_cast<size_t>(E) * D);
    load_.assign(E, 0), total_ = 0;
    for (int s = 0; s < D; ++s)
        for (int e = 0; e < E; ++e) {
            const int64_t n = counts[static_cast<size_t>(s) * E + e];
            load_[e] += n;
            by_expert_[static_cast<size_t>(e) * D + s] = n;
        }
    for (int64_t w : load_) total_ += w;
}

const std::vector<SplitPart>& FastSplitter::parts(const Placement& p, FastSplitReport* report) {
    PROPHET_ASSERT(p.num_devices == D_ && p.num_experts == E_);
    // Only the near start's candidates are split at several levels (set_slack), so only they are kept and compared:
    // the others pay neither the copy nor the comparison of [E*D] flags.
    const bool same_placement = near_start_ && instance_of_.num_devices == D_ && instance_of_.owner == p.owner &&
                                instance_of_.replica == p.replica;
    if (!same_placement) {  // else in_ and the class orders are this placement's already
        fill_instance(p);
        if (!in_.experts.empty()) build_class_segments();
        first_level_known_ = false;
        if (near_start_)
            instance_of_ = p;
        else
            instance_of_.num_devices = 0;
    }
    FastSplitReport rep;
    rep.max_computed = *std::max_element(in_.fixed.begin(), in_.fixed.end());
    parts_.clear();
    if (!in_.experts.empty()) {
        rep.max_computed = least_max_computed(&rep.max_flow_solves);
        for (int k = 0; k < static_cast<int>(in_.experts.size()); ++k) fill_groups(k, parts_);
    }
    if (report) *report = rep;
    return parts_;
}

LayerFlow FastSplitter::split(const Placement& p, FastSplitReport* report) {
    return flow_from_parts(counts_, D_, E_, p, parts(p, report));
}

// The owner rule's routes and their per-device totals for `owner`, rebuilt when the owners change (a rebuild's
// tight O(D * E) pass is cheaper than moving the many experts a repacked candidate moves): each expert's tokens, a
// contiguous row of by_expert_, are added to its owner's row of the transposed route, which is then turned.
void FastSplitter::update_base(const std::vector<int>& owner) {
    const int D = D_, E = E_;
    if (base_owner_ == owner) return;
    base_owner_ = owner;
    base_.num_devices = D, base_.num_experts = E, base_.total_tokens = total_;
    route_by_dst_.resize(static_cast<size_t>(D) * D);  // a row is written by its owner's first expert, added after
    written_.assign(D, 0);
    for (int e = 0; e < E; ++e) {
        int64_t* to = route_by_dst_.data() + static_cast<size_t>(owner[e]) * D;
        const int64_t* from = by_expert_.data() + static_cast<size_t>(e) * D;
        if (!written_[owner[e]]) {
            std::copy(from, from + D, to), written_[owner[e]] = 1;
            continue;
        }
        for (int s = 0; s < D; ++s) to[s] += from[s];
    }
    for (int g = 0; g < D; ++g)
        if (!written_[g]) std::fill_n(route_by_dst_.data() + static_cast<size_t>(g) * D, D, int64_t{0});
    // computed: column sums; sent: row sums less the diagonal (local tokens); received: computed less the diagonal
    base_.route.resize(static_cast<size_t>(D) * D);
    base_.computed.assign(D, 0), base_.received.assign(D, 0), base_.sent.assign(D, 0);
    for (int g = 0; g < D; ++g) {
        const int64_t* to_g = route_by_dst_.data() + static_cast<size_t>(g) * D;
        int64_t column_sum = 0;
        for (int s = 0; s < D; ++s) {
            base_.route[static_cast<size_t>(s) * D + g] = to_g[s];
            column_sum += to_g[s];
            base_.sent[s] += to_g[s];
        }
        base_.computed[g] = column_sum;
    }
    for (int g = 0; g < D; ++g) {
        const int64_t local = base_.route[static_cast<size_t>(g) * D + g];
        base_.sent[g] -= local;
        base_.received[g] = base_.computed[g] - local;
    }
}

// n tokens more from src computed on dst in base_, remembered so that the next totals() can take them back
void FastSplitter::apply(int src, int dst, int64_t tokens) {
    add_route(base_, src, dst, tokens);
    applied_.push_back({src, -1, dst, tokens});
}

// expert e's owner-rule route to g taken off base_ (sign -1) or put back (+1): add_route of sign * its tokens from
// every source, in one pass
void FastSplitter::owner_route(int e, int g, int64_t sign) {
    const int D = D_;
    const int64_t* column = by_expert_.data() + static_cast<size_t>(e) * D;
    int64_t* route = base_.route.data() + g;
    for (int s = 0; s < D; ++s)
        route[static_cast<size_t>(s) * D] += sign * column[s], base_.sent[s] += sign * column[s];
    base_.sent[g] -= sign * column[g];
    base_.computed[g] += sign * load_[e];
    base_.received[g] += sign * (load_[e] - column[g]);
}

const LayerFlow& FastSplitter::totals(const Placement& p, FastSplitReport* report) {
    const std::vector<SplitPart>& split_parts = parts(p, report);
    for (const SplitPart& change : applied_) add_route(base_, change.src, change.dst, -change.tokens);
    for (const auto& [e, g] : removed_) owner_route(e, g, +1);
    applied_.clear(), removed_.clear();
    update_base(p.owner);
    base_.replica_holders = in_.replica_flags;
    for (int e : in_.experts) {  // the split replaces the owner rule's route of a replicated expert with tokens
        owner_route(e, p.owner[e], -1);
        removed_.emplace_back(e, p.owner[e]);
    }
    for (const SplitPart& part : split_parts) apply(part.src, part.dst, part.tokens);
    return base_;
}

LayerFlow FastSplitter::split_totals(const Placement& p, FastSplitReport* report) { return totals(p, report); }

LayerFlow fast_split_layer(const int64_t* counts, int D, int E, const Placement& p, const ClusterSpec* cluster,
                           FastSplitReport* report) {
    return FastSplitter(counts, D, E, cluster).split(p, report);
}

}  // namespace prophet
