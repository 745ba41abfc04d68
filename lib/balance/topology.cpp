#include "balance/topology.h"

#include <algorithm>

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

}  // namespace

double topology_time(const ClusterSpec& cl, const std::vector<double>& bytes, double bandwidth_scale) {
    const int D = cl.num_devices;
    PROPHET_ASSERT(bytes.size() == static_cast<size_t>(D) * D);
    thread_local Queues q;
    const int nics = D / cl.devices_per_node * cl.nics_per_node;
    q.reset(D, nics);
    using LC = ClusterSpec::LinkClass;
    bool used[3] = {false, false, false};
    double worst = 0.0;  // seconds, before scaling
    for (int s = 0; s < D; ++s)
        for (int d = 0; d < D; ++d) {
            const double b = bytes[static_cast<size_t>(s) * D + d];
            if (s == d || b <= 0) continue;
            const LC c = cl.link_class(s, d);
            used[static_cast<int>(c)] = true;
            worst = std::max(worst, drain(b, cl.link_bytes_per_s(s, d)));
            q.all_out[s] += b;
            q.all_in[d] += b;
            if (c == LC::kNvlink) {
                q.nv_out[s] += b;
                q.nv_in[d] += b;
                continue;
            }
            q.host_out[s] += b;
            q.host_in[d] += b;
            if (c == LC::kInterNode) {
                q.nic_out[cl.nic_of(s)] += b;
                q.nic_in[cl.nic_of(d)] += b;
            }
        }
    for (int i = 0; i < D; ++i)
        worst = std::max({worst, drain(std::max(q.nv_out[i], q.nv_in[i]), cl.nvlink_bytes_per_s),
                          drain(std::max(q.host_out[i], q.host_in[i]), cl.pcie_bytes_per_s),
                          drain(q.all_out[i], cl.gpu_injection_bytes_per_s),
                          drain(q.all_in[i], cl.gpu_ejection_bytes_per_s)});
    for (int n = 0; n < nics; ++n)
        worst = std::max(worst, drain(std::max(q.nic_out[n], q.nic_in[n]), cl.node_nic_bytes_per_s));
    double latency = 0.0;
    for (LC c : {LC::kNvlink, LC::kIntraNode, LC::kInterNode})
        if (used[static_cast<int>(c)]) latency = std::max(latency, cl.link_latency_s(c));
    return worst / bandwidth_scale + latency;
}

}  // namespace prophet
