#include "balance/bound_terms.h"

#include <algorithm>

namespace prophet::bound_detail {
namespace {

// Eq 1's flat time of a busiest receiver of at least `message` bytes: m / B(m) grows inside each bandwidth step,
// so the least over m >= message is at `message` or at the lower edge of a later step.
double flat_a2a_bound(const ClusterSpec& cl, double message, double bandwidth_scale) {
    double best = kUnlimited, lower_edge = 0;
    for (const BandwidthStep& step : cl.a2a_bandwidth) {
        if (step.max_message_bytes >= message)
            best = std::min(best, std::max(message, lower_edge) / (step.bytes_per_s * bandwidth_scale));
        lower_edge = step.max_message_bytes;
    }
    if (!(best < kUnlimited)) best = message / (cl.a2a_bandwidth.back().bytes_per_s * bandwidth_scale);
    return best;
}

}  // namespace

double a2a_bound(const CostModel& m, const TopologyLimits& topo, int64_t sent, int64_t across, double busiest) {
    if (sent <= 0) return 0.0;
    const int D = m.cluster.num_devices;
    const double tb = m.token_bytes(), bytes = static_cast<double>(sent) * tb;
    double t;
    if (m.topology_aware) {
        const double remote = drain_bound(static_cast<double>(across) * tb, topo.remote_sum);
        const double one = drain_bound(busiest * tb, topo.ingress_max);
        t = std::max({drain_bound(bytes, topo.ingress_sum), remote, one}) / m.bandwidth_scale + topo.min_latency;
    } else {
        const int64_t mean = (sent + D - 1) / D;  // tokens: some device receives at least the mean
        const double message = std::max(static_cast<double>(mean), busiest) * tb;
        t = flat_a2a_bound(m.cluster, message, m.bandwidth_scale);
    }
    return t + m.cluster.a2a_latency_s;
}

double transfer_bound(const CostModel& m, const TopologyLimits& topo, int64_t n, bool agg) {
    const int D = m.cluster.num_devices;
    const double eb = m.expert_bytes();
    const double collective = agg ? m.cluster.agg_bytes_per_s : m.cluster.trans_bytes_per_s;
    if (!m.topology_aware) {
        // Eqs 4-5: sum over replicated experts of (receivers + sender), each expert has at most D - 1 receivers
        const int64_t sender = m.trans_receivers == TransReceivers::kPaper ? (n + D - 2) / (D - 1) : 0;
        return static_cast<double>(n + sender) * eb / (D * collective * m.bandwidth_scale);
    }
    const double bulk = drain_bound(static_cast<double>(n) * eb, agg ? topo.egress_sum : topo.ingress_sum);
    double t = std::max(drain_bound(eb, topo.best_path), bulk) / m.bandwidth_scale + topo.min_latency;
    if (m.trans_broadcast == TransBroadcast::kChain) {
        // the chain's own rate: some device receives (forwards) at least ceil(n / D) copies
        const int64_t per_device = (n + D - 1) / D;  // ceil(n / D), whole copies
        const double copies = static_cast<double>(per_device) * eb;
        t = std::max(t, copies / (collective * m.bandwidth_scale));
    }
    return t;
}

}  // namespace prophet::bound_detail
