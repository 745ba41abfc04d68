// dense_ops.cpp: the non-expert ops' durations and the dense all-reduce by algorithm (formulas in dense_ops.h).
#include "sim/dense_ops.h"

#include <algorithm>

#include "core/enum_table.h"
#include "core/error.h"

namespace prophet::sim {

namespace {
constexpr EnumName<AllReduceAlgorithm> kAllReduceAlgorithmNames[] = {
    {AllReduceAlgorithm::kAuto, "auto"},
    {AllReduceAlgorithm::kRing, "ring"},
    {AllReduceAlgorithm::kHierarchical, "hierarchical"}};
}  // namespace

AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& name) {
    return parse_enum(kAllReduceAlgorithmNames, "sim.allreduce_algorithm", name, "--set sim.allreduce_algorithm=ring");
}

namespace {

// seconds to stream `bytes` through memory (0 when the cluster has no memory bandwidth)
double stream_s(const ClusterSpec& cluster, double bytes) {
    return cluster.memory_bytes_per_s > 0 ? bytes / cluster.memory_bytes_per_s : 0.0;
}

// bandwidth one device gets across nodes: its link, and its share of the node's NIC when `sharing` devices of
// the node send across at once
double inter_node_share(const ClusterSpec& cluster, int sharing) {
    double bw = cluster.inter_node_bytes_per_s;
    if (cluster.node_nic_bytes_per_s > 0) bw = std::min(bw, cluster.node_nic_bytes_per_s / sharing);
    return bw;
}

}  // namespace

double ring_all_reduce_s(double bytes, int ranks, double bytes_per_s, double step_latency_s) {
    if (ranks <= 1) return 0.0;
    return 2.0 * (ranks - 1) / ranks * bytes / bytes_per_s + 2.0 * (ranks - 1) * step_latency_s;
}

double all_reduce_s(const ClusterSpec& cluster, double bytes, AllReduceAlgorithm algorithm) {
    const int D = cluster.num_devices;
    if (D <= 1 || bytes <= 0) return 0.0;
    const int g = std::max(1, cluster.devices_per_node);
    const int n = D / g;
    const double lat = cluster.a2a_latency_s;
    if (algorithm == AllReduceAlgorithm::kAuto)
        algorithm = n > 1 ? AllReduceAlgorithm::kHierarchical : AllReduceAlgorithm::kRing;
    PROPHET_ASSERT_MSG(cluster.intra_node_bytes_per_s > 0 && cluster.inter_node_bytes_per_s > 0,
                       "all-reduce needs the cluster's intra- and inter-node bandwidth");
    if (algorithm == AllReduceAlgorithm::kRing || n == 1) {
        // a ring over every device: each step moves bytes / D over every ring link at once; one ring edge per
        // node boundary crosses a NIC
        const double link = n > 1 ? std::min(cluster.intra_node_bytes_per_s, inter_node_share(cluster, 1))
                                  : cluster.intra_node_bytes_per_s;
        return ring_all_reduce_s(bytes, D, link, lat);
    }
    // reduce-scatter and all-gather inside each node (a ring of g), a ring of the n nodes over bytes / g each
    return ring_all_reduce_s(bytes, g, cluster.intra_node_bytes_per_s, lat) +
           ring_all_reduce_s(bytes / g, n, inter_node_share(cluster, g), lat);
}

DenseOpTimes dense_op_times(const CostModel& cost, const DenseOptions& options, int num_layers, int num_experts) {
    PROPHET_ASSERT(num_layers >= 1 && num_experts >= 1);
    const ClusterSpec& cl = cost.cluster;
    const double t = cl.compute_flops * cost.compute_scale;
    PROPHET_ASSERT_MSG(t > 0, "the cluster's compute_flops must be positive");
    const double N = static_cast<double>(cost.model.tokens_per_device);
    const double C = cost.model.d_model, T = cost.model.seq_len, F = cost.model.d_ffn;
    const double V = options.vocab, NH = options.num_heads, b = cost.model.bytes_per_elem;
    const double E = num_experts, L = num_layers, D = cl.num_devices;
    DenseOpTimes o;
    // measured non-expert time (calibrated clusters) holds attention, embedding and the LM head already
    const bool measured_nec = cl.fnec_s >= 0 || cl.bnec_s >= 0;
    if (measured_nec) {
        o.fnec_s = cost.fnec_s();
        o.bnec_s = cost.bnec_s();
    } else {
        o.embed_fwd_s = stream_s(cl, 3 * N * C * b);
        o.embed_bwd_s = o.embed_fwd_s;
        o.attn_fwd_s = (8 * N * C * C + 4 * N * T * C) / t + stream_s(cl, (5 * N * C + 2 * N * NH * T) * b);
        o.attn_bwd_s = 2 * o.attn_fwd_s;
        o.fnec_s = stream_s(cl, 5 * N * C * b);
        o.bnec_s = 2 * o.fnec_s;
        o.head_fwd_s = 2 * N * C * V / t + stream_s(cl, (2 * N * C + 2 * N * V) * b);
        o.head_bwd_s = 4 * N * C * V / t + 2 * stream_s(cl, (2 * N * C + 2 * N * V) * b);
    }
    const double embedding = (V + T) * C * b, block = (4 * C * C + 8 * C + C * E) * b, head = 2 * C * b;
    o.grad_bytes.push_back(head);
    for (int l = 0; l < num_layers; ++l) o.grad_bytes.push_back(block);
    o.grad_bytes.push_back(embedding);
    if (cl.step_tail_s >= 0) {
        o.optimizer_s = cl.step_tail_s;
        o.all_reduce_in_tail = true;
    } else {
        double dense_bytes = 0;
        for (double g : o.grad_bytes) dense_bytes += g;
        const double expert_bytes = L * (E / D) * 2 * C * F * b;
        o.optimizer_s = stream_s(cl, 8 * (dense_bytes + expert_bytes));
    }
    return o;
}

}  // namespace prophet::sim
