// flow_hotset.cpp: the hot-set family of flow's candidates (flow_hotset.h).
#include "balance/flow_hotset.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "core/error.h"

namespace prophet {

HotSetBuilder::HotSetBuilder(const int64_t* counts, const std::vector<double>& load, const Placement& current,
                             const ClusterSpec& cluster)
    : counts_(counts), load_(load), current_(current), cluster_(cluster), D_(current.num_devices),
      E_(current.num_experts), by_load_(current.num_experts) {
    PROPHET_ASSERT(static_cast<int>(load.size()) == E_);
    std::iota(by_load_.begin(), by_load_.end(), 0);
    std::stable_sort(by_load_.begin(), by_load_.end(), [&](int a, int b) { return load_[a] > load_[b]; });
    for (double w : load_) with_load_ += w > 0 ? 1 : 0;
}

// tokens the devices [first_device, first_device + group_size) send expert e
int64_t HotSetBuilder::group_tokens(int e, int first_device, int group_size) const {
    int64_t n = 0;
    for (int s = first_device; s < first_device + group_size; ++s) n += counts_[static_cast<size_t>(s) * E_ + e];
    return n;
}

// The device a hot expert owned by `from` (over the limit) moves to: below the limit and owning a cold expert; the
// same node first, then the fewest hot owners on its NIC, then on the device, then device order. -1: none.
int HotSetBuilder::swap_target(int from, const std::vector<int>& owner, int limit) const {
    std::vector<int> nic_hot(static_cast<size_t>(cluster_.nic_of(D_ - 1)) + 1, 0), owns_cold(D_, 0);
    for (int d = 0; d < D_; ++d) nic_hot[cluster_.nic_of(d)] += owned_hot_[d];
    for (int e = 0; e < E_; ++e) owns_cold[owner[e]] += is_hot_[e] ? 0 : 1;
    int best = -1;
    auto key = [&](int d) {
        return std::make_tuple(cluster_.node_of(d) != cluster_.node_of(from), nic_hot[cluster_.nic_of(d)],
                               owned_hot_[d], d);
    };
    for (int d = 0; d < D_; ++d) {
        if (d == from || owned_hot_[d] >= limit || owns_cold[d] == 0) continue;
        if (best < 0 || key(d) < key(best)) best = d;
    }
    return best;
}

// Spreads the hot owners (flow_hotset.h "owners"), the coldest hot expert of an overfull device moving first;
// returns the swaps made.
int HotSetBuilder::spread(std::vector<int>& owner, int hot) {
    const int limit = (hot + D_ - 1) / D_;
    owned_hot_.assign(D_, 0);
    for (int i = 0; i < hot; ++i) ++owned_hot_[owner[by_load_[i]]];
    int swaps = 0;
    for (int i = hot - 1; i >= 0; --i) {
        const int e = by_load_[i], from = owner[e];
        if (owned_hot_[from] <= limit) continue;
        const int to = swap_target(from, owner, limit);
        if (to < 0) break;  // every device is at the limit or owns hot experts only
        int cold = -1;      // the lightest cold expert `to` owns (ties: lower index)
        for (int c = 0; c < E_; ++c)
            if (owner[c] == to && !is_hot_[c] && (cold < 0 || load_[c] < load_[cold])) cold = c;
        owner[cold] = from, owner[e] = to;
        --owned_hot_[from], ++owned_hot_[to], ++swaps;
    }
    return swaps;
}

// tokens of cold expert e that reach `device` from other nodes when it owns e
double HotSetBuilder::cross_ingress(int e, int device) const {
    const int dpn = cluster_.devices_per_node;
    return load_[e] - static_cast<double>(group_tokens(e, cluster_.node_of(device) * dpn, dpn));
}

// Evens each node's NICs' cross-node ingress by swapping cold owners inside the node (flow_hotset.h "nics");
// returns the swaps made.
int HotSetBuilder::even_nics(std::vector<int>& owner) {
    const int per_node = cluster_.nics_per_node, nodes = D_ / cluster_.devices_per_node;
    if (per_node < 2) return 0;
    std::vector<double> ingress(static_cast<size_t>(nodes) * per_node, 0.0);  // [NICs]
    std::vector<std::vector<int>> cold(nodes);                                // [nodes] cold experts, ascending
    cross_.assign(E_, 0.0);  // the same for every device of the owner's node, so fixed by swaps inside it
    for (int e = 0; e < E_; ++e)
        if (!is_hot_[e]) {
            cross_[e] = cross_ingress(e, owner[e]);
            ingress[cluster_.nic_of(owner[e])] += cross_[e];
            cold[cluster_.node_of(owner[e])].push_back(e);
        }
    int swaps = 0;
    for (int n = 0; n < nodes; ++n)
        while (swaps < E_ && swap_once(owner, ingress, n * per_node, (n + 1) * per_node, cold[n])) ++swaps;
    return swaps;
}

// One swap between the busiest and the least busy NIC of [first, last) (one node's; `cold`: its cold experts) that
// lowers the larger of the two; false: none does.
bool HotSetBuilder::swap_once(std::vector<int>& owner, std::vector<double>& ingress, int first, int last,
                              const std::vector<int>& cold) {
    const auto [lo, hi] = std::minmax_element(ingress.begin() + first, ingress.begin() + last);
    const int busy = static_cast<int>(hi - ingress.begin()), idle = static_cast<int>(lo - ingress.begin());
    double best = *hi;  // the larger of the two NICs' ingress after the swap; must fall
    int best_e = -1, best_c = -1;
    for (int e : cold) {
        if (cluster_.nic_of(owner[e]) != busy) continue;
        for (int c : cold) {
            if (cluster_.nic_of(owner[c]) != idle) continue;
            const double after_busy = *hi - cross_[e] + cross_[c], after_idle = *lo - cross_[c] + cross_[e];
            if (std::max(after_busy, after_idle) < best - 1e-9)
                best = std::max(after_busy, after_idle), best_e = e, best_c = c;
        }
    }
    if (best_e < 0) return false;
    ingress[busy] += cross_[best_c] - cross_[best_e];
    ingress[idle] += cross_[best_e] - cross_[best_c];
    std::swap(owner[best_e], owner[best_c]);
    return true;
}

// The group's device of least estimated load with a group replica below `room`, room under the cap, and, when
// chain_room >= 0, a chain load below chain_room (ties: lower device); -1: none.
int HotSetBuilder::lightest_with_room(int first_device, int group_size, int room, int cap, int chain_room) const {
    int best = -1;
    for (int d = first_device; d < first_device + group_size; ++d)
        if (replicas_[d] < room && (cap <= 0 || all_replicas_[d] < cap) &&
            (chain_room < 0 || chain_load_[d] < chain_room) && (best < 0 || est_[d] < est_[best]))
            best = d;
    return best;
}

// One group's replicas of the group-tier hot experts it has no holder of, largest tokens first to its lightest
// device.
void HotSetBuilder::place_group(Placement& p, int first_device, int group_size, int cap, bool chain) {
    items_.clear();
    int load = 0;  // chain: copies the group's devices forward already (owned hot experts, device-tier replicas)
    for (int d = first_device; d < first_device + group_size; ++d) load += chain_load_[d];
    for (int e = 0; e < E_; ++e) {
        const bool here = p.owner[e] >= first_device && p.owner[e] < first_device + group_size;
        if (is_hot_[e] != kGroupTier || here) continue;
        const int64_t tokens = group_tokens(e, first_device, group_size);
        if (tokens > 0) items_.push_back({-tokens, e});  // ascending sort: most tokens, then lower expert, first
    }
    std::sort(items_.begin(), items_.end());
    // at most an even share of the group's replicas per device: each copy is Trans into its holder's one NIC
    // (a chain: of what each device forwards; the group's devices have room for all n together)
    const int n = static_cast<int>(items_.size());
    const int chain_room = chain ? (load + n + group_size - 1) / group_size : -1;
    const int room = chain ? n : (n + group_size - 1) / group_size;
    for (const auto& [minus_tokens, e] : items_) {
        const int best = lightest_with_room(first_device, group_size, room, cap, chain_room);
        if (best < 0) return;  // the group is full
        p.add_replica(e, best);
        est_[best] -= static_cast<double>(minus_tokens);
        ++replicas_[best], ++all_replicas_[best], ++chain_load_[best];
    }
}

// The device tier: each of its experts on every device that sends it tokens (within the cap), each device
// computing its own tokens of it.
void HotSetBuilder::place_everywhere(Placement& p, int cap) {
    for (int e = 0; e < E_; ++e) {
        if (is_hot_[e] != kDeviceTier) continue;
        for (int d = 0; d < D_; ++d) {
            const int64_t tokens = counts_[static_cast<size_t>(d) * E_ + e];
            if (d == p.owner[e] || tokens == 0 || (cap > 0 && all_replicas_[d] >= cap)) continue;
            p.add_replica(e, d);
            est_[d] += static_cast<double>(tokens);
            est_[p.owner[e]] -= static_cast<double>(tokens);
            ++all_replicas_[d], ++chain_load_[d];
        }
    }
}

Placement HotSetBuilder::build(const HotSetShape& shape, int cap, int* owner_swaps) {
    const int g = shape.group_size;
    PROPHET_ASSERT(g > 1 && g < D_ && D_ % g == 0);
    const int hot = std::clamp(shape.hot, 0, with_load_), everywhere = std::clamp(shape.everywhere, 0, hot);
    is_hot_.assign(E_, 0);
    for (int i = 0; i < hot; ++i) is_hot_[by_load_[i]] = i < everywhere ? kDeviceTier : kGroupTier;
    std::vector<int> owner = current_.owner;
    int swaps = shape.spread_owners ? spread(owner, hot) : 0;
    if (shape.even_nics) swaps += even_nics(owner);
    Placement p = Placement::make_owners(D_, owner);
    est_.assign(D_, 0.0);
    replicas_.assign(D_, 0);
    all_replicas_.assign(D_, 0);
    chain_load_.assign(D_, 0);  // a chain's head forwards its expert's first copy
    for (int e = 0; e < E_; ++e) {
        const int first = owner[e] / g * g;
        est_[owner[e]] += is_hot_[e] == kGroupTier ? static_cast<double>(group_tokens(e, first, g)) : load_[e];
        chain_load_[owner[e]] += is_hot_[e] ? 1 : 0;
    }
    place_everywhere(p, cap);
    for (int first = 0; first < D_; first += g) place_group(p, first, g, cap, shape.chain);
    if (owner_swaps) *owner_swaps = swaps;
    return p;
}

std::vector<int> replication_group_sizes(const ClusterSpec& cluster, int D) {
    std::vector<int> sizes;
    for (int g : {cluster.nvlink_domain, cluster.devices_per_node})
        if (g > 1 && g < D && D % g == 0 && std::find(sizes.begin(), sizes.end(), g) == sizes.end()) sizes.push_back(g);
    std::sort(sizes.begin(), sizes.end());
    return sizes;
}

void walk_hot_sets(HotSetBuilder& builder, const std::vector<int>& group_sizes, bool spread_owners, bool chain, int cap,
                   const std::function<double(const Placement&, const HotSetShape&)>& consider) {
    if (builder.experts_with_load() == 0) return;
    const int experts = builder.num_experts();
    const int most = std::max(1, std::min(builder.experts_with_load(), experts / 2)), least = std::max(1, experts / 32);
    for (int g : group_sizes) {
        std::map<int, double> tried;  // h -> predicted seconds
        auto score = [&](int h) {
            const HotSetShape shape{h, g, spread_owners, false, chain};
            return tried[h] = consider(builder.build(shape, cap), shape);
        };
        double previous = std::numeric_limits<double>::infinity();
        for (int h = std::min(least, most), rises = 0; h <= most && rises < 2; h *= 2) {
            const double s = score(h);
            rises = s >= previous ? rises + 1 : 0;
            previous = s;
        }
        if (tried.empty()) continue;
        auto best_h = [&tried] {  // the h of least predicted time so far (ties: the smaller h)
            return std::min_element(tried.begin(), tried.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; })
                ->first;
        };
        const int best = best_h();
        for (int h : {best * 3 / 4, best * 3 / 2})
            if (h >= 1 && h <= most && !tried.count(h)) score(h);
        if (chain) {  // the device tier: t hottest on every device, around the best h (each (t, h) once)
            const int b = best_h();
            for (int t = 1; t <= 2; ++t) {
                const std::set<int> hs{t + b / 2, t + b * 3 / 4, b, b + t};
                for (int h : hs)
                    if (h > t && h <= most) {
                        HotSetShape shape{h, g, spread_owners, false, chain};
                        shape.everywhere = t;
                        consider(builder.build(shape, cap), shape);
                    }
            }
        }
        if (builder.nics_per_node() > 1) {  // the best h again, each node's cold owners evening its NICs out
            const HotSetShape shape{best_h(), g, spread_owners, true, chain};
            consider(builder.build(shape, cap), shape);
        }
    }
}

void walk_hot_sets(const int64_t* counts, const std::vector<double>& load, const Placement& current,
                   const CostModel& cost, int cap, const std::function<double(const Placement&, int)>& consider) {
    HotSetBuilder builder(counts, load, current, cost.cluster);
    const bool star = cost.trans_broadcast == TransBroadcast::kStar;
    walk_hot_sets(builder, replication_group_sizes(cost.cluster, current.num_devices), star, !star, cap,
                  [&](const Placement& p, const HotSetShape& shape) { return consider(p, shape.hot); });
}

}  // namespace prophet
