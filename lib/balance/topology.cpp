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

// One collective's queues as its pairs are added (in (src, dst) order, as the dense loop visits them), then the
// busiest resource plus the latency of the slowest link class used.
class Collective {
  public:
    explicit Collective(const ClusterSpec& cl) : cl_(cl) {
        thread_local Queues q;
        thread_local Layout at;
        q.reset(cl.num_devices, cl.num_devices / cl.devices_per_node * cl.nics_per_node);
        at.build(cl);
        q_ = &q;
        at_ = &at;
    }
    void add(int s, int d, double b) {
        Queues& q = *q_;
        const Layout& at = *at_;
        const int c = at.node[s] != at.node[d] ? 2 : (at.domain[s] >= 0 && at.domain[s] == at.domain[d] ? 0 : 1);
        used_[c] = true;
        worst_pair_ = std::max(worst_pair_, drain(b, rate_[c]));
        q.all_out[s] += b;
        q.all_in[d] += b;
        if (c == 0) {
            q.nv_out[s] += b;
            q.nv_in[d] += b;
            return;
        }
        q.host_out[s] += b;
        q.host_in[d] += b;
        if (c == 2) {
            q.nic_out[at.nic[s]] += b;
            q.nic_in[at.nic[d]] += b;
        }
    }
    double seconds(double bandwidth_scale) const {
        const Queues& q = *q_;
        double worst = worst_pair_;
        for (size_t i = 0; i < q.all_out.size(); ++i)
            worst = std::max({worst, drain(std::max(q.nv_out[i], q.nv_in[i]), cl_.nvlink_bytes_per_s),
                              drain(std::max(q.host_out[i], q.host_in[i]), cl_.pcie_bytes_per_s),
                              drain(q.all_out[i], cl_.gpu_injection_bytes_per_s),
                              drain(q.all_in[i], cl_.gpu_ejection_bytes_per_s)});
        for (size_t n = 0; n < q.nic_out.size(); ++n)
            worst = std::max(worst, drain(std::max(q.nic_out[n], q.nic_in[n]), cl_.node_nic_bytes_per_s));
        using LC = ClusterSpec::LinkClass;
        double latency = 0.0;
        for (LC c : {LC::kNvlink, LC::kIntraNode, LC::kInterNode})
            if (used_[static_cast<int>(c)]) latency = std::max(latency, cl_.link_latency_s(c));
        return worst / bandwidth_scale + latency;
    }

  private:
    const ClusterSpec& cl_;
    Queues* q_ = nullptr;
    const Layout* at_ = nullptr;
    const double rate_[3] = {cl_.nvlink_bytes_per_s, cl_.intra_node_bytes_per_s, cl_.inter_node_bytes_per_s};
    bool used_[3] = {false, false, false};
    double worst_pair_ = 0.0;  // the busiest pair as bytes / its class rate, seconds before scaling
};

}  // namespace

template <class Count>
double topology_time(const ClusterSpec& cl, const Count* units, double unit_bytes, bool transposed,
                     double bandwidth_scale) {
    const int D = cl.num_devices;
    Collective collective(cl);
    for (int s = 0; s < D; ++s)
        for (int d = 0; d < D; ++d) {
            const double u = static_cast<double>(transposed ? units[static_cast<size_t>(d) * D + s]
                                                            : units[static_cast<size_t>(s) * D + d]);
            if (s == d || u <= 0) continue;
            collective.add(s, d, u * unit_bytes);
        }
    return collective.seconds(bandwidth_scale);
}

double topology_time_of_copies(const ClusterSpec& cl, const std::vector<std::pair<int, int>>& copies, double unit_bytes,
                               bool transposed, double bandwidth_scale) {
    Collective collective(cl);
    for (const auto& [s, d] : copies)
        if (s != d) transposed ? collective.add(d, s, unit_bytes) : collective.add(s, d, unit_bytes);
    return collective.seconds(bandwidth_scale);
}

template double topology_time<int64_t>(const ClusterSpec&, const int64_t*, double, bool, double);
template double topology_time<double>(const ClusterSpec&, const double*, double, bool, double);

double topology_time(const ClusterSpec& cl, const std::vector<double>& bytes, double bandwidth_scale) {
    PROPHET_ASSERT(bytes.size() == static_cast<size_t>(cl.num_devices) * cl.num_devices);
    return topology_time(cl, bytes.data(), 1.0, false, bandwidth_scale);
}

}  // namespace prophet
