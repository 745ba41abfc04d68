// truth_scale.cpp: scales a cluster's figures (truth_scale.h).
#include "sim/truth_scale.h"

#include "core/error.h"

namespace prophet::sim {

ClusterSpec perturbed_cluster(const ClusterSpec& nominal, const TruthScale& s) {
    PROPHET_ASSERT_MSG(s.compute > 0 && s.bandwidth > 0 && s.latency > 0 && s.intra_bandwidth > 0 &&
                           s.inter_bandwidth > 0,
                       "truth scales must be positive");
    ClusterSpec c = nominal;
    c.compute_flops *= s.compute;
    c.memory_bytes_per_s *= s.compute;
    // measured times (< 0: not given) shrink as the device gets faster
    for (double* t : {&c.fnec_s, &c.bnec_s, &c.step_tail_s})
        if (*t >= 0) *t /= s.compute;
    for (BandwidthStep& step : c.a2a_bandwidth) step.bytes_per_s *= s.bandwidth;
    c.trans_bytes_per_s *= s.bandwidth;
    c.agg_bytes_per_s *= s.bandwidth;
    c.intra_node_bytes_per_s *= s.bandwidth * s.intra_bandwidth;
    c.inter_node_bytes_per_s *= s.bandwidth * s.inter_bandwidth;
    c.node_nic_bytes_per_s *= s.bandwidth * s.inter_bandwidth;
    // topology ports (balance/topology.h): NVLink and PCIe carry intra-node traffic, the GPU's total ports both
    c.nvlink_bytes_per_s *= s.bandwidth * s.intra_bandwidth;
    c.pcie_bytes_per_s *= s.bandwidth * s.intra_bandwidth;
    c.gpu_injection_bytes_per_s *= s.bandwidth;
    c.gpu_ejection_bytes_per_s *= s.bandwidth;
    c.a2a_latency_s *= s.latency;
    c.nvlink_latency_s *= s.latency;
    c.intra_node_latency_s *= s.latency;
    c.inter_node_latency_s *= s.latency;
    return c;
}

}  // namespace prophet::sim
