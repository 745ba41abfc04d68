#include "balance/bound_topology.h"

#include <algorithm>

namespace prophet::bound_detail {
namespace {

// a cluster rate in bytes/s, 0 meaning "no limit"
double rate_or_unlimited(double bytes_per_s) { return bytes_per_s > 0 ? bytes_per_s : kUnlimited; }

// `peers` links of `rate` each; no peers carry nothing even when the rate is unlimited
double sum_of_links(int peers, double rate) { return peers > 0 ? peers * rate : 0.0; }

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

}  // namespace

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

}  // namespace prophet::bound_detail
