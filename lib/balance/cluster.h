// cluster.h: the hardware a cost model describes (docs/cost-model.md gives every field with its unit).
//
// A cluster file is TOML; experiments/clusters/ ships the paper's clusters and MoETuner's nodes.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace prophet {

struct BandwidthStep {
    double max_message_bytes;  // this bandwidth applies to messages up to this size (bytes; last = +inf)
    double bytes_per_s;
};

struct ClusterSpec {
    std::string name;
    int num_devices = 0;        // D
    int devices_per_node = 1;
    double compute_flops = 0;   // t: sustained FLOP/s of one device on expert GEMMs
    std::vector<BandwidthStep> a2a_bandwidth;  // B̄ by the largest per-device all-to-all message (ascending)
    double trans_bytes_per_s = 0;  // Trans (parameter broadcast) bandwidth
    double agg_bytes_per_s = 0;    // Agg (gradient reduce) bandwidth
    // topology-aware variant (docs/cluster.md "Topology"): link classes, per-device ports, NICs; bytes/s per
    // direction, 0 = no limit from that resource
    bool topology = false;              // the file describes its topology: the topology-aware model by default
    // Trans/Agg collective of the systems run on this cluster (the default of plan.trans_broadcast): false = star,
    // the home sends to each receiver (prophet train's point to point); true = chain, NCCL's pipelined ring
    // broadcast / reduce (what Pro-Prophet's and FasterMoE's code call), each device forwarding one copy per expert
    // at most at trans_bytes_per_s / agg_bytes_per_s (cost_model.h)
    bool chain_broadcast = false;
    double intra_node_bytes_per_s = 0;  // per pair inside a node outside an NVLink domain (PCIe)
    double inter_node_bytes_per_s = 0;  // per pair across nodes
    double node_nic_bytes_per_s = 0;    // each NIC of a node; 0: no NIC limit beyond the per-pair links
    int nics_per_node = 1;              // rails: device with local index l uses NIC l * nics_per_node / devices_per_node
    int nvlink_domain = 1;              // devices per NVLink domain (aligned groups inside a node); 1: no NVLink
    double nvlink_bytes_per_s = 0;      // a device's NVLink port (all its NVLink traffic, per pair too)
    double pcie_bytes_per_s = 0;        // a device's host port: its PCIe peer and inter-node traffic
    double gpu_injection_bytes_per_s = 0;  // a device's total egress over every class
    double gpu_ejection_bytes_per_s = 0;   // a device's total ingress over every class
    double nvlink_latency_s = 0, intra_node_latency_s = 0, inter_node_latency_s = 0;  // per class, per collective
    // measured non-expert block time (seconds) per device; < 0: estimate from model dimensions
    double fnec_s = -1;
    double bnec_s = -1;
    // measured time of what a training step does after its last backward block (dense-gradient all-reduce,
    // gradient norm, optimizer step), seconds per iteration; < 0: not modelled (the simulator's optimizer op)
    double step_tail_s = -1;
    // fixed per-collective latency (seconds), added once per all-to-all (and per step of a dense all-reduce)
    double a2a_latency_s = 0;
    // memory bandwidth of one device (bytes/s) for the simulator's streaming ops (layernorms, softmax, embedding,
    // optimizer; sim/dense_ops.h); 0: not given, those terms take no time
    double memory_bytes_per_s = 0;

    enum class LinkClass { kNvlink, kIntraNode, kInterNode };
    int node_of(int device) const { return device / devices_per_node; }
    // global index of the NIC (rail) that carries the device's inter-node traffic
    int nic_of(int device) const {
        return node_of(device) * nics_per_node + (device % devices_per_node) * nics_per_node / devices_per_node;
    }
    LinkClass link_class(int src, int dst) const {
        if (node_of(src) != node_of(dst)) return LinkClass::kInterNode;
        return nvlink_domain > 1 && src / nvlink_domain == dst / nvlink_domain ? LinkClass::kNvlink
                                                                               : LinkClass::kIntraNode;
    }
    double a2a_bytes_per_s(double max_message_bytes) const;
    double link_bytes_per_s(int src, int dst) const;  // topology-aware pair bandwidth (by link class)
    double link_latency_s(LinkClass c) const;
};

const Schema& cluster_schema();
ClusterSpec load_cluster_file(const std::string& path);
// The same from the text of a cluster file; `origin` names it in errors.
ClusterSpec load_cluster_text(const std::string& text, const std::string& origin);
ClusterSpec cluster_from_config(const Config& config, const std::string& origin);
std::string cluster_to_toml(const ClusterSpec& cluster);  // what `prophet profile --calibrate` writes

}  // namespace prophet
