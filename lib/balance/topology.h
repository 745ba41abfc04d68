// topology.h: time of one collective on the cluster's topology (docs/cluster.md "Topology").
//
// The collective moves bytes[src * D + dst] (bytes, diagonal ignored) at once. Every resource on a byte's path
// queues its share; the busiest resource decides (no resource is faster than its slowest queue):
//   pair link       bytes(s, d) / class bandwidth            (NVLink, PCIe peer or inter-node pair)
//   NVLink port     a device's NVLink egress / ingress       / nvlink_gbit_s
//   host port       a device's PCIe-peer + inter-node egress / ingress / pcie_gbit_s
//   GPU injection   a device's total egress                  / gpu_injection_gbit_s
//   GPU ejection    a device's total ingress                 / gpu_ejection_gbit_s
//   NIC (rail)      inter-node egress / ingress of the devices on the NIC's rail / node_nic_gbit_s
// plus the largest latency of the link classes that carry bytes. A limit of 0 is no limit.
// So an all-to-all is hierarchical (intra-node over the node's fabric, inter-node through the NICs), a broadcast
// (Trans: owner -> its receivers) is limited by each owner's egress queue while owners proceed in parallel, and
// a reduce (Agg, the transpose) by each owner's ingress.
#pragma once

#include <utility>
#include <vector>

#include "balance/cluster.h"

namespace prophet {

// seconds; bytes has D * D entries; bandwidth_scale scales every bandwidth (the planner's belief, 1 = true).
// O(D^2) per call, no allocation after the first call on a thread.
double topology_time(const ClusterSpec& cluster, const std::vector<double>& bytes, double bandwidth_scale = 1.0);

// The same on a count matrix without copying it (the planners' inner loop): bytes(s, d) = unit_bytes *
// units[s * D + d], or units[d * D + s] when transposed (Agg: Trans reversed). Count is int64_t or double.
template <class Count>
double topology_time(const ClusterSpec& cluster, const Count* units, double unit_bytes, bool transposed,
                     double bandwidth_scale);

// The same for a few distinct (src, dst) pairs carrying unit_bytes each (one expert's copies: Trans's broadcast, or
// Agg's reduce when transposed), equal to the dense call on their matrix; O(pairs) instead of O(D^2) (the queues
// are kept per thread and only the devices and NICs a call touches are read and cleared).
double topology_time_of_copies(const ClusterSpec& cluster, const std::vector<std::pair<int, int>>& copies,
                               double unit_bytes, bool transposed, double bandwidth_scale);

}  // namespace prophet
