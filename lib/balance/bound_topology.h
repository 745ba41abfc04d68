// bound_topology.h: what a cluster's links let any traffic do at best, for the layer lower bound (bounds.h): per
// device the most bytes/s it can receive or send, per node the inter-node bytes/s, the fastest single path and the
// cheapest latency (docs/bounds.md "All-to-all", "Transfer"). Internal to lib/balance's bound files.
#pragma once

#include <limits>

#include "balance/cluster.h"

namespace prophet::bound_detail {

inline constexpr double kUnlimited = std::numeric_limits<double>::infinity();

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

TopologyLimits topology_limits(const ClusterSpec& cl);

// bytes / rate with an unlimited rate taking no time
inline double drain_bound(double bytes, double rate) { return rate < kUnlimited && rate > 0 ? bytes / rate : 0.0; }

}  // namespace prophet::bound_detail
