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
    // topology-aware variant: per-pair link bandwidth (bytes/s) and a per-node network interface
    double intra_node_bytes_per_s = 0;
    double inter_node_bytes_per_s = 0;
    double node_nic_bytes_per_s = 0;  // 0: no NIC limit beyond the per-pair links
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

    int node_of(int device) const { return device / devices_per_node; }
    double a2a_bytes_per_s(double max_message_bytes) const;
    double link_bytes_per_s(int src, int dst) const;  // topology-aware pair bandwidth
};

const Schema& cluster_schema();
ClusterSpec load_cluster_file(const std::string& path);
ClusterSpec cluster_from_config(const Config& config, const std::string& origin);
std::string cluster_to_toml(const ClusterSpec& cluster);  // what `prophet profile --calibrate` writes

}  // namespace prophet
