#include "balance/flow_extra_copies.h"

#include <algorithm>

namespace prophet {
namespace {

// [D] estimated load of each device: load / copies of every expert it holds
std::vector<double> estimated_loads(const std::vector<double>& load, const Placement& at,
                                    const std::vector<int>& copies) {
    std::vector<double> est(static_cast<size_t>(at.num_devices), 0.0);
    for (int e = 0; e < at.num_experts; ++e)
        for (int d = 0; d < at.num_devices; ++d)
            if (at.holds(e, d)) est[d] += load[e] / copies[e];
    return est;
}

// For each expert with copies: one more on its heaviest non-holder sender and on the lightest non-holder.
void add_copy_tries(const int64_t* P, const std::vector<double>& est, const Placement& at, int cap,
                    const std::vector<int>& copies, const std::vector<int>& replicas,
                    std::vector<std::pair<int, int>>& tries) {
    const int D = at.num_devices, E = at.num_experts;
    for (int e = 0; e < E; ++e) {
        if (copies[e] < 2) continue;
        int sender = -1, lightest = -1;
        for (int d = 0; d < D; ++d) {
            if (at.holds(e, d) || (cap > 0 && replicas[d] >= cap)) continue;
            if (sender < 0 || P[static_cast<size_t>(d) * E + e] > P[static_cast<size_t>(sender) * E + e]) sender = d;
            if (lightest < 0 || est[d] < est[lightest]) lightest = d;
        }
        if (sender >= 0) tries.emplace_back(e, sender);
        if (lightest >= 0 && lightest != sender) tries.emplace_back(e, lightest);
    }
}

// Each expert's cross-node tokens as its owner's NIC would take them in (from nodes without a holder), and the node
// of those sending it the most (-1: none).
struct CrossNode {
    std::vector<int64_t> into;  // [E] tokens
    std::vector<int> from;      // [E] node
};
CrossNode cross_node_tokens(const int64_t* P, const Placement& at, const ClusterSpec& c, int nodes) {
    const int D = at.num_devices, E = at.num_experts;
    CrossNode x{std::vector<int64_t>(static_cast<size_t>(E), 0), std::vector<int>(static_cast<size_t>(E), -1)};
    std::vector<int64_t> row(static_cast<size_t>(nodes));  // [nodes] one expert's tokens per node
    std::vector<uint8_t> held(static_cast<size_t>(nodes));
    for (int e = 0; e < E; ++e) {
        std::fill(row.begin(), row.end(), 0);
        std::fill(held.begin(), held.end(), 0);
        for (int d = 0; d < D; ++d) {
            row[c.node_of(d)] += P[static_cast<size_t>(d) * E + e];
            if (at.holds(e, d)) held[c.node_of(d)] = 1;
        }
        for (int k = 0; k < nodes; ++k) {
            if (held[k] || row[k] == 0) continue;
            x.into[e] += row[k];
            if (x.from[e] < 0 || row[k] > row[x.from[e]]) x.from[e] = k;
        }
    }
    return x;
}

// NIC relief (extra_copy_tries): copies of the experts filling the busiest NIC, in the node sending each the most.
void add_nic_relief_tries(const int64_t* P, const std::vector<double>& est, const Placement& at, int cap,
                          const std::vector<int>& replicas, const ClusterSpec& c,
                          std::vector<std::pair<int, int>>& tries) {
    const int D = at.num_devices, E = at.num_experts, nodes = D / std::max(1, c.devices_per_node);
    if (nodes < 2 || nodes * c.devices_per_node != D) return;
    const CrossNode x = cross_node_tokens(P, at, c, nodes);
    std::vector<int64_t> ingress(static_cast<size_t>(nodes * c.nics_per_node), 0);  // [NICs] tokens
    for (int e = 0; e < E; ++e) ingress[c.nic_of(at.owner[e])] += x.into[e];
    const int busiest = static_cast<int>(std::max_element(ingress.begin(), ingress.end()) - ingress.begin());
    std::vector<int> filling;  // experts owned behind the busiest NIC with tokens crossing into it
    for (int e = 0; e < E; ++e)
        if (c.nic_of(at.owner[e]) == busiest && x.from[e] >= 0) filling.push_back(e);
    const size_t n = std::min<size_t>(kNicReliefTries, filling.size());
    std::partial_sort(filling.begin(), filling.begin() + static_cast<std::ptrdiff_t>(n), filling.end(),
                      [&](int a, int b) { return x.into[a] > x.into[b] || (x.into[a] == x.into[b] && a < b); });
    for (size_t i = 0; i < n; ++i) {
        const int e = filling[i], first = x.from[e] * c.devices_per_node;
        int best = -1;
        for (int d = first; d < first + c.devices_per_node; ++d) {
            if (at.holds(e, d) || (cap > 0 && replicas[d] >= cap)) continue;
            if (best < 0 || replicas[d] < replicas[best] || (replicas[d] == replicas[best] && est[d] < est[best]))
                best = d;
        }
        const std::pair<int, int> t{e, best};
        if (best >= 0 && std::find(tries.begin(), tries.end(), t) == tries.end()) tries.push_back(t);
    }
}

}  // namespace

std::vector<std::pair<int, int>> extra_copy_tries(const int64_t* P, const std::vector<double>& load,
                                                  const Placement& at, int cap, const ClusterSpec* nics) {
    const int E = at.num_experts;
    const std::vector<int> replicas = at.replicas_per_device();
    std::vector<int> copies(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) copies[e] = 1 + at.num_replicas_of(e);
    const std::vector<double> est = estimated_loads(load, at, copies);
    std::vector<std::pair<int, int>> tries;  // (expert, device)
    add_copy_tries(P, est, at, cap, copies, replicas, tries);
    auto heavier = [&](const std::pair<int, int>& a, const std::pair<int, int>& b) {
        const double wa = load[a.first] / copies[a.first], wb = load[b.first] / copies[b.first];
        return wa > wb || (wa == wb && a < b);
    };
    const size_t n = std::min<size_t>(kExtraCopyTries, tries.size());
    std::partial_sort(tries.begin(), tries.begin() + static_cast<std::ptrdiff_t>(n), tries.end(), heavier);
    tries.resize(n);
    if (nics) add_nic_relief_tries(P, est, at, cap, replicas, *nics, tries);
    return tries;
}

void add_extra_copies(const int64_t* P, const std::vector<double>& load, const Placement& start, int cap, int rounds,
                      const ClusterSpec* nics, const std::function<bool(const Placement&)>& consider) {
    Placement at = start;
    for (int round = 0; round < rounds; ++round) {
        bool kept = false;
        Placement next;
        for (const auto& [e, d] : extra_copy_tries(P, load, at, cap, nics)) {
            Placement p = at;
            p.add_replica(e, d);
            if (consider(p)) next = std::move(p), kept = true;
        }
        if (!kept) return;
        at = std::move(next);
    }
}

}  // namespace prophet
