#include "balance/topology.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace prophet {
namespace {

// per-device and per-NIC queues (bytes) of one collective
struct Queues {
    std::vector<double> nv_out, nv_in, host_out, host_in, all_out, all_in, nic_out, nic_in;
    void reset(int devices, int nics) {
        for (std::vector<double>* v : {&nv_out, &nv_in, &host_out, &host_in, &all_out, &all_in})
            v->assign(static_cast<size_t>(devices), 0.0);
        nic_out.assign(static_cast<size_t>(nics), 0.0);
        nic_in.assign(static_cast<size_t>(nics), 0.0);
    }
};

// queue / rate, with rate 0 meaning "no limit"
inline double drain(double queued, double rate) { return rate > 0 && queued > 0 ? queued / rate : 0.0; }

// Per device: node, NVLink domain (-1: none) and NIC, so the pair loop only compares.
struct Layout {
    std::vector<int> node, domain, nic;
    void build(const ClusterSpec& cl) {
        const int D = cl.num_devices;
        node.resize(static_cast<size_t>(D));
        domain.resize(static_cast<size_t>(D));
        nic.resize(static_cast<size_t>(D));
        for (int i = 0; i < D; ++i) {
            node[i] = cl.node_of(i);
            domain[i] = cl.nvlink_domain > 1 ? i / cl.nvlink_domain : -1;
            nic[i] = cl.nic_of(i);
        }
    }
};

}  // namespace

template <class Count>
double topology_time(const ClusterSpec& cl, const Count* units, double unit_bytes, bool transposed,
                     double bandwidth_scale) {
    const int D = cl.num_devices;
    thread_local Queues q;
    thread_local Layout at;
    const int nics = D / cl.devices_per_node * cl.nics_per_node;
    q.reset(D, nics);
    at.build(cl);
    const double rate[3] = {cl.nvlink_bytes_per_s, cl.intra_node_bytes_per_s, cl.inter_node_bytes_per_s};
    bool used[3] = {false, false, false};
    double worst_pair = 0.0;  // the busiest pair as bytes / its class rate, seconds before scaling
    for (int s = 0; s < D; ++s)
        for (int d = 0; d < D; ++d) {
            const double u = static_cast<double>(transposed ? units[static_cast<size_t>(d) * D + s]
                                                            : units[static_cast<size_t>(s) * D + d]);
            if (s == d || u <= 0) continue;
            const double b = u * unit_bytes;
            const int c = at.node[s] != at.node[d] ? 2 : (at.domain[s] >= 0 && at.domain[s] == at.domain[d] ? 0 : 1);
            used[c] = true;
            worst_pair = std::max(worst_pair, drain(b, rate[c]));
            q.all_out[s] += b;
            q.all_in[d] += b;
            if (c == 0) {
                q.nv_out[s] += b;
                q.nv_in[d] += b;
                continue;
            }
            q.host_out[s] += b;
            q.host_in[d] += b;
            if (c == 2) {
                q.nic_out[at.nic[s]] += b;
                q.nic_in[at.nic[d]] += b;
            }
        }
    double worst = worst_pair;
    for (int i = 0; i < D; ++i)
        worst = std::max({worst, drain(std::max(q.nv_out[i], q.nv_in[i]), cl.nvlink_bytes_per_s),
                          drain(std::max(q.host_out[i], q.host_in[i]), cl.pcie_bytes_per_s),
                          drain(q.all_out[i], cl.gpu_injection_bytes_per_s),
                          drain(q.all_in[i], cl.gpu_ejection_bytes_per_s)});
    for (int n = 0; n < nics; ++n)
        worst = std::max(worst, drain(std::max(q.nic_out[n], q.nic_in[n]), cl.node_nic_bytes_per_s));
    using LC = ClusterSpec::LinkClass;
    double latency = 0.0;
    for (LC c : {LC::kNvlink, LC::kIntraNode, LC::kInterNode})
        if (used[static_cast<int>(c)]) latency = std::max(latency, cl.link_latency_s(c));
    return worst / bandwidth_scale + latency;
}

template double topology_time<int64_t>(const ClusterSpec&, const int64_t*, double, bool, double);
template double topology_time<double>(const ClusterSpec&, const double*, double, bool, double);

double topology_time(const ClusterSpec& cl, const std::vector<double>& bytes, double bandwidth_scale) {
    PROPHET_ASSERT(bytes.size() == static_cast<size_t>(cl.num_devices) * cl.num_devices);
    return topology_time(cl, bytes.data(), 1.0, false, bandwidth_scale);
}

}  // namespace prophet
