// dense_ops.h: durations of the ops of a training iteration outside the MoE blocks' expert path: embedding,
// attention, LM head + loss, the dense-gradient all-reduce and the optimizer (docs/simulator.md, "The whole
// iteration"). The MoE terms (Eqs 1-5) stay in balance/cost_model.h.
//
// Letters (model/model_config.h): N tokens per device per block (before top-k), C d_model, T seq_len, V vocab,
// NH heads, E experts, L blocks, F d_ffn, b bytes per element; t the device's FLOP/s, M its memory bandwidth
// (bytes/s, cluster memory_gbyte_s; 0: streaming terms not modelled). Seconds; bytes.
//   embed_fwd  = 3 N C b / M                      (token row + position row read, sum written)
//   embed_bwd  = 3 N C b / M                      (gradient read, added into both tables)
//   attn_fwd   = (8 N C^2 + 4 N T C) / t + (5 N C + 2 N NH T) b / M   (QKV + proj, scores + weighted sum;
//                                                  ln1 and the residual add 5 N C, softmax 2 N NH T)
//   attn_bwd   = 2 x attn_fwd
//   nec_rest   = 5 N C b / M forward, 2x backward  (ln2 and the MoE residual add: FNEC / BNEC once attention
//                                                  is its own op)
//   head_fwd   = 2 N C V / t + (2 N C + 2 N V) b / M        (tied LM head GEMM; final LN, softmax + loss)
//   head_bwd   = 4 N C V / t + 2 (2 N C + 2 N V) b / M      (dX and dW GEMMs)
//   grad bytes = embedding (V + T) C b; block (4 C^2 + 8 C + C E) b (ln1, qkv, proj, ln2, gate); head 2 C b
//   optimizer  = 8 P b / M, P = dense parameters + L (E / D) 2 C F home expert parameters (the gradient norm
//                reads each gradient once, AdamW reads parameter, gradient, m, v and writes parameter, m, v)
// When the cluster gives measured fnec_ms / bnec_ms, those already hold attention, embedding and LM head (the
// calibration spreads them over the blocks): the dense compute ops then take 0 s and FNEC / BNEC keep the
// measured value. When it gives step_tail_ms, the optimizer takes it and the all-reduce ops 0 s (the tail holds
// the all-reduce).
#pragma once

#include <string>
#include <vector>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "sim/schedule.h"

namespace prophet::sim {

enum class AllReduceAlgorithm : int {
    kAuto,          // hierarchical when the cluster has several nodes, ring otherwise
    kRing,          // one ring over all D devices
    kHierarchical,  // reduce-scatter inside each node, ring over the nodes, all-gather inside each node
};
AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& name);  // "auto" | "ring" | "hierarchical"

// The model dimensions the dense ops need beyond CostModel::model (ModelDims: C, F, T, b, N).
struct DenseOptions {
    bool enabled = false;  // false: the iteration is the MoE blocks only (and the optional optimizer op)
    int vocab = 0;         // V (0: no embedding or LM head work)
    int num_heads = 1;     // NH
    AllReduceMode all_reduce = AllReduceMode::kBlocking;
    AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
    double bucket_bytes = 25.0 * 1024 * 1024;  // DDP's default bucket_cap_mb = 25
};

struct DenseOpTimes {
    double embed_fwd_s = 0, embed_bwd_s = 0;
    double attn_fwd_s = 0, attn_bwd_s = 0;  // per block
    double fnec_s = 0, bnec_s = 0;          // per block: what FNEC / BNEC keep beside attention
    double head_fwd_s = 0, head_bwd_s = 0;
    double optimizer_s = 0;
    bool all_reduce_in_tail = false;        // the cluster's step_tail_ms holds the all-reduce: its ops take 0 s
    // dense gradient bytes in the order backward finishes them: [0] head (final LN), [1 + k] block L-1-k,
    // [L + 1] embedding (wte is tied to the head, so it is complete only after the embedding backward)
    std::vector<double> grad_bytes;
};

// num_layers L and num_experts E from the trace; D from the cluster.
DenseOpTimes dense_op_times(const CostModel& cost, const DenseOptions& options, int num_layers, int num_experts);

// A ring all-reduce of `bytes` over `ranks` ranks (seconds; 0 for one rank): 2 (ranks-1) steps, each moving
// bytes / ranks over every link at bytes_per_s, plus step_latency_s per step. The one formula of the trace-driven
// simulator's dense all-reduce (below) and the per-op model's (op_model.h).
double ring_all_reduce_s(double bytes, int ranks, double bytes_per_s, double step_latency_s);

// All-reduce of `bytes` over the cluster's D devices (seconds; 0 for D = 1 or no bytes). Ring: 2 (D-1)/D bytes
// over the slowest link of the ring (intra-node on one node; else min(intra, inter, NIC)) + 2 (D-1) latencies.
// Hierarchical with g devices per node and n nodes: 2 (g-1)/g bytes over intra-node links, plus a ring over the
// n nodes of bytes / g per device at min(inter, NIC / g) each, + (2 (g-1) + 2 (n-1)) latencies. Latency:
// cluster a2a_latency_s per step.
double all_reduce_s(const ClusterSpec& cluster, double bytes, AllReduceAlgorithm algorithm);

}  // namespace prophet::sim
