#include "balance/topology.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace prophet {
namespace {

// per-device and per-NIC queues (bytes) of one collective, kept per thread between collectives: only the devices
// and NICs a collective touched are listed, cleared after it and read by seconds(), so a collective of a few pairs
// (one expert's copies) costs O(pairs), not O(D)
struct Queues {
    std::vector<double> nv_out, nv_in, host_out, host_in, all_out, all_in, nic_out, nic_in;
    std::vector<int> devices, nics;          // touched by the current collective, each once
    std::vector<uint8_t> device_on, nic_on;  // [D], [NICs]: listed in devices / nics
    // sized for `devices` and `nic_count`, every queue zero and nothing listed
    void start(int device_count, int nic_count) {
        if (static_cast<int>(all_out.size()) != device_count || static_cast<int>(nic_out.size()) != nic_count) {
            for (std::vector<double>* v : {&nv_out, &nv_in, &host_out, &host_in, &all_out, &all_in})
                v->assign(static_cast<size_t>(device_count), 0.0);
            nic_out.assign(static_cast<size_t>(nic_count), 0.0);
            nic_in.assign(static_cast<size_t>(nic_count), 0.0);
            device_on.assign(static_cast<size_t>(device_count), 0);
            nic_on.assign(static_cast<size_t>(nic_count), 0);
            devices.clear(), nics.clear();
            return;
        }
        for (int i : devices)
            nv_out[i] = nv_in[i] = host_out[i] = host_in[i] = all_out[i] = all_in[i] = 0, device_on[i] = 0;
        for (int n : nics) nic_out[n] = nic_in[n] = 0, nic_on[n] = 0;
        devices.clear(), nics.clear();
    }
    void touch_device(int i) {
        if (!device_on[i]) device_on[i] = 1, devices.push_back(i);
    }
    void touch_nic(int n) {
        if (!nic_on[n]) nic_on[n] = 1, nics.push_back(n);
    }
};

// queue / rate, with rate 0 meaning "no limit"
inline double drain(double queued, double rate) { return rate > 0 && queued > 0 ? queued / rate : 0.0; }

// Per device: node, NVLink domain (-1: none) and NIC, so the pair loop only compares. Rebuilt only when the
// cluster's shape (the fields node_of and nic_of read) changes.
struct Layout {
    std::vector<int> node, domain, nic;
    int D = -1, per_node = 0, nvlink_domain = 0, nics_per_node = 0;
    void fit(const ClusterSpec& cl) {
        if (cl.num_devices == D && cl.devices_per_node == per_node && cl.nvlink_domain == nvlink_domain &&
            cl.nics_per_node == nics_per_node)
            return;
        D = cl.num_devices, per_node = cl.devices_per_node, nvlink_domain = cl.nvlink_domain;
        nics_per_node = cl.nics_per_node;
        node.resize(static_cast<size_t>(D));
        domain.resize(static_cast<size_t>(D));
        nic.resize(static_cast<size_t>(D));
        for (int i = 0; i < D; ++i) {
            node[i] = cl.node_of(i);
            domain[i] = cl.nvlink_domain > 1 ? i / cl.nvlink_domain : -1;
            nic[i] = cl.nic_of(i);
        }
    }
    // 0: the same NVLink domain, 1: the same node (PCIe peer), 2: another node (ClusterSpec::link_class), from
    // the source's node and domain (a dense row's loop keeps them in registers) and the destination
    int link_class(int source_node, int source_domain, int d) const {
        return node[d] != source_node ? 2 : (source_domain >= 0 && source_domain == domain[d] ? 0 : 1);
    }
};

// One collective's queues as its pairs are added, then the busiest resource plus the latency of the slowest link
// class used. The busiest pair is the largest pair of each class over its rate (division is monotone, so that is
// the largest of every pair's bytes / rate, without a division per pair).
class Collective {
  public:
    explicit Collective(const ClusterSpec& cl) : cl_(cl) {
        thread_local Queues q;
        thread_local Layout at;
        q.start(cl.num_devices, cl.num_devices / cl.devices_per_node * cl.nics_per_node);
        at.fit(cl);
        q_ = &q;
        at_ = &at;
    }
    void add(int s, int d, double b) {
        Queues& q = *q_;
        const Layout& at = *at_;
        const int c = at.link_class(at.node[s], at.domain[s], d);
        q.touch_device(s);
        q.all_out[s] += b;
        if (c == 0) {
            q.nv_out[s] += b;
        } else {
            q.host_out[s] += b;
            if (c == 2) q.touch_nic(at.nic[s]), q.nic_out[at.nic[s]] += b;
        }
        add_ingress(d, c, b);
    }
    // Every pair of a dense matrix, as add() in (src, dst) order would queue them, with the same sums: each queue
    // of source s (its egress) only grows in row s, so row s sums it in a register from 0 in d order, the same
    // additions as add()'s; ingress queues and NICs' egress keep add()'s order in memory. Row s's
    // destinations are walked in d order as runs of one link class (devices are numbered node by node, NVLink
    // domains aligned inside them: ClusterSpec::node_of), so no pair is classified. Every device and NIC is listed
    // first: an idle one drains 0, as an unlisted one does.
    template <class Count>
    void add_dense(const Count* units, double unit_bytes, bool transposed) {
        const int D = cl_.num_devices;
        Queues& q = *q_;
        const Layout& at = *at_;
        for (int i = 0; i < D; ++i) q.touch_device(i);
        for (int n = 0; n < static_cast<int>(q.nic_out.size()); ++n) q.touch_nic(n);
        for (int s = 0; s < D; ++s) {
            RowSums row{0, 0, 0, &q.nic_out[at.nic[s]]};
            const DenseRow<Count> r{units, unit_bytes, transposed, D, s};
            const int node_lo = at.node[s] * cl_.devices_per_node,
                      node_hi = std::min(D, node_lo + cl_.devices_per_node);
            int nv_lo = node_lo, nv_hi = node_lo;  // the NVLink run: s's domain inside its node (empty without NVLink)
            if (at.domain[s] >= 0)
                nv_lo = std::max(node_lo, at.domain[s] * cl_.nvlink_domain),
                nv_hi = std::min(node_hi, at.domain[s] * cl_.nvlink_domain + cl_.nvlink_domain);
            add_run<2>(r, 0, node_lo, row);
            add_run<1>(r, node_lo, nv_lo, row);
            add_run<0>(r, nv_lo, nv_hi, row);
            add_run<1>(r, nv_hi, node_hi, row);
            add_run<2>(r, node_hi, D, row);
            q.all_out[s] = row.all_out, q.nv_out[s] = row.nv_out, q.host_out[s] = row.host_out;
        }
    }
    // the pair's share of everything but its source's egress: its class's busiest pair and latency, and the
    // destination's ingress queues (both paths add these in (src, dst) order)
    void add_ingress(int d, int c, double b) {
        Queues& q = *q_;
        used_[c] = true;
        largest_pair_[c] = std::max(largest_pair_[c], b);
        q.touch_device(d);
        q.all_in[d] += b;
        if (c == 0) {
            q.nv_in[d] += b;
            return;
        }
        q.host_in[d] += b;
        if (c == 2) q.touch_nic(at_->nic[d]), q.nic_in[at_->nic[d]] += b;
    }
    // untouched devices and NICs queue nothing (drain 0), so only the touched ones are read
    double seconds(double bandwidth_scale) const {
        const Queues& q = *q_;
        double worst = 0.0;
        for (int c = 0; c < 3; ++c) worst = std::max(worst, drain(largest_pair_[c], rate_[c]));
        for (int i : q.devices)
            worst = std::max({worst, drain(std::max(q.nv_out[i], q.nv_in[i]), cl_.nvlink_bytes_per_s),
                              drain(std::max(q.host_out[i], q.host_in[i]), cl_.pcie_bytes_per_s),
                              drain(q.all_out[i], cl_.gpu_injection_bytes_per_s),
                              drain(q.all_in[i], cl_.gpu_ejection_bytes_per_s)});
        for (int n : q.nics)
            worst = std::max(worst, drain(std::max(q.nic_out[n], q.nic_in[n]), cl_.node_nic_bytes_per_s));
        using LC = ClusterSpec::LinkClass;
        double latency = 0.0;
        for (LC c : {LC::kNvlink, LC::kIntraNode, LC::kInterNode})
            if (used_[static_cast<int>(c)]) latency = std::max(latency, cl_.link_latency_s(c));
        return worst / bandwidth_scale + latency;
    }

  private:
    // one source row's egress, summed in d order: the device's queues from 0 in registers (row s alone adds to
    // them), its NIC's in memory (the NIC may serve other rows' devices too)
    struct RowSums {
        double all_out, nv_out, host_out;
        double* nic_out;
    };
    // row s of a dense unit matrix: bytes(s, d)
    template <class Count>
    struct DenseRow {
        const Count* units;
        double unit_bytes;
        bool transposed;
        int D, s;
        double units_to(int d) const {
            return static_cast<double>(transposed ? units[static_cast<size_t>(d) * D + s]
                                                  : units[static_cast<size_t>(s) * D + d]);
        }
    };
    // destinations [lo, hi) of row r, all of link class C (0: NVLink, 1: PCIe peer, 2: another node)
    template <int C, class Count>
    void add_run(const DenseRow<Count>& r, int lo, int hi, RowSums& row) {
        // the queues' arrays in locals: the stores below would otherwise make the compiler reload them per pair
        Queues& q = *q_;
        double *all_in = q.all_in.data(), *nv_in = q.nv_in.data(), *host_in = q.host_in.data();
        double* nic_in = q.nic_in.data();
        const int* nic = at_->nic.data();
        double largest = largest_pair_[C];
        bool used = false;
        for (int d = lo; d < hi; ++d) {
            const double u = r.units_to(d);
            if (d == r.s || u <= 0) continue;
            const double b = u * r.unit_bytes;
            used = true;
            largest = std::max(largest, b);
            row.all_out += b;
            all_in[d] += b;
            if constexpr (C == 0) {
                row.nv_out += b;
                nv_in[d] += b;
            } else {
                row.host_out += b;
                host_in[d] += b;
            }
            if constexpr (C == 2) *row.nic_out += b, nic_in[nic[d]] += b;
        }
        largest_pair_[C] = largest;
        used_[C] = used_[C] || used;
    }

    const ClusterSpec& cl_;
    Queues* q_ = nullptr;
    const Layout* at_ = nullptr;
    const double rate_[3] = {cl_.nvlink_bytes_per_s, cl_.intra_node_bytes_per_s, cl_.inter_node_bytes_per_s};
    bool used_[3] = {false, false, false};
    double largest_pair_[3] = {0.0, 0.0, 0.0};  // bytes of the largest pair of each class
};

}  // namespace

template <class Count>
double topology_time(const ClusterSpec& cl, const Count* units, double unit_bytes, bool transposed,
                     double bandwidth_scale) {
    Collective collective(cl);
    collective.add_dense(units, unit_bytes, transposed);
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
