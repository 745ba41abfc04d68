// truth_scale.h: the simulated truth perturbed against the cluster file (docs/sweep.md, "Uncertainty"): the
// planner plans with the nominal cluster, the simulator times with this one. Scales multiply throughputs and
// latencies, so 0.7 is a device 30% slower or a link with 30% less bandwidth than the file says.
#pragma once

#include "balance/cluster.h"

namespace prophet::sim {

struct TruthScale {
    double compute = 1;          // compute_flops and memory bandwidth (the device); measured FNEC / BNEC / step
                                 // tail divided by it
    double bandwidth = 1;        // every link figure: the all-to-all steps, Trans, Agg, intra, inter, NIC
    double latency = 1;          // a2a_latency_s (all-to-all and all-reduce steps)
    double intra_bandwidth = 1;  // link class inside a node (intra_node), on top of `bandwidth`
    double inter_bandwidth = 1;  // link class across nodes (inter_node, the node NIC), on top of `bandwidth`

    bool nominal() const {
        return compute == 1 && bandwidth == 1 && latency == 1 && intra_bandwidth == 1 && inter_bandwidth == 1;
    }
};

// The cluster as the scales make it. Every scale must be > 0 (PROPHET_ASSERT; the sweep spec validates).
ClusterSpec perturbed_cluster(const ClusterSpec& nominal, const TruthScale& scale);

}  // namespace prophet::sim
