// cost_model.h: predicted time of one MoE block from its token flow, by Pro-Prophet's Eqs 1-8.
//
// Units: seconds, bytes, FLOPs. docs/cost-model.md derives every term. In short (per MoE layer):
//   token_bytes   = C * bytes_per_elem                               (one token's activation)
//   expert_bytes  = 2 * C * F * bytes_per_elem                       (W1 [C,F] + W2 [F,C])
//   Eq 1 T_A2A    = max_i R_i * token_bytes / B̄(max_i R_i * token_bytes) + a2a_latency
//   Eq 2 T_FEC    = max_i H_i * 4*C*F / t                            (2 GEMMs, 2 FLOP per multiply-add)
//   Eq 3 T_BEC    = 2 * T_FEC
//   Eq 4 T_Trans  = sum_e (D - n_e) * expert_bytes / (D * B_trans)    (D - n_e = r_e + 1 for a replicated expert:
//                   its r_e replica holders and the owner, as the paper and the authors' code count;
//                   trans_receivers = kReplicaHolders counts r_e = D - 1 - n_e, the bytes that really move)
//   Eq 5 T_Agg    = sum_e (D - n_e) * expert_bytes / (D * B_agg)
//   Eq 6 T'       = 4 T_A2A + 3 T_FEC + T_Trans + T_Agg
//   Eq 8 T'       = 4 T_A2A + 3 T_FEC + exposed Trans + exposed Agg. The paper credits max(0, T_Trans - T_FEC -
//                   T_FNEC); the block-wise scheduler moves whole experts (docs/scheduler.md, split rule `time`):
//                   first fit of each expert's share t_e = T_Trans * w_e / sum w into the FNEC window, the rest
//                   beside FEC, so exposed Trans = max(0, rest - T_FEC) and an expert longer than both windows
//                   stays exposed (transfer_credit = kWholeExperts, the default). kChunks splits transfers into
//                   pieces that fill both windows: exposed = max(0, T_Trans - T_FEC - T_FNEC), the paper's credit.
//                   Agg likewise with BNEC first, then BEC. Layer 0 (CostModel::first_block): nothing before its
//                   Trans, nothing after its Agg, so exposed = whole under either credit (Eq 8 = Eq 6 there).
//   FasterMoE's system (its paper, smart scheduling): the shadow broadcast runs beside the dispatch all-to-all's
//                   sends and the gradient reduce beside the backward combine, so
//                   T_F = 4 T_A2A + 3 T_FEC + max(0, T_Trans - T_A2A) + max(0, T_Agg - T_A2A).
// The topology-aware variant replaces Eq 1 and Eqs 4-5 by the busiest resource of the traffic (topology.h):
// pair links by class, per-device NVLink / host ports, GPU injection / ejection and the NICs, maximised, plus the
// latency of the slowest class used; Trans is each owner's broadcast to its receivers, Agg the reverse.
// On by default for cluster files that describe their topology (ClusterSpec::topology).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "balance/cluster.h"
#include "balance/placement.h"

namespace prophet {

struct ModelDims {
    int d_model = 0;             // C
    int d_ffn = 0;               // F
    int seq_len = 0;             // T (for the attention term of FNEC)
    int bytes_per_elem = 4;      // fp32
    int64_t tokens_per_device = 0;  // tokens (before top-k) each device feeds one block per iteration
};

enum class TransReceivers { kPaper, kReplicaHolders };  // D - n (owner counted) | D - 1 - n (replicas only)
enum class TransferCredit { kWholeExperts, kChunks };    // Eq 8's credit: the scheduler's split, or ideal chunks
// topology-aware Trans/Agg paths: the home sends to each receiver (the trainer's point-to-point Trans, the
// home's egress queue holds r copies) | a pipelined chain home -> receivers of its node -> the other nodes' in
// order (a ring/chain broadcast as NCCL's; every link on the chain carries one copy)
enum class TransBroadcast { kStar, kChain };

struct CostModel {
    ClusterSpec cluster;
    ModelDims model;
    bool topology_aware = false;
    TransReceivers trans_receivers = TransReceivers::kPaper;
    TransferCredit transfer_credit = TransferCredit::kWholeExperts;
    TransBroadcast trans_broadcast = TransBroadcast::kStar;
    // The layer is the iteration's first MoE block (layer 0): Eq 8 credits no window to its Trans (nothing runs
    // before it) or its Agg (nothing after it), as the simulator's block-wise schedule runs them; see
    // model_for_layer(). Exposed = whole, so its Eq 8 equals Eq 6.
    bool first_block = false;
    // sensitivity study: the planner's belief scaled against the true cluster (1 = calibrated)
    double compute_scale = 1.0;
    double bandwidth_scale = 1.0;

    double token_bytes() const { return double(model.d_model) * model.bytes_per_elem; }
    double expert_bytes() const { return 2.0 * model.d_model * model.d_ffn * model.bytes_per_elem; }
    double expert_flops_per_token() const { return 4.0 * model.d_model * model.d_ffn; }
    double fnec_s() const;  // forward non-expert compute of one block (cluster value or estimate)
    double bnec_s() const;  // backward non-expert compute (cluster value or 2 * FNEC)
};

struct CostBreakdown {
    double a2a_s = 0;    // one all-to-all (Eq 1)
    double fec_s = 0;    // Eq 2
    double bec_s = 0;    // Eq 3
    double trans_s = 0;  // Eq 4
    double agg_s = 0;    // Eq 5
    double fnec_s = 0;
    double bnec_s = 0;
    double exposed_trans_s = 0;  // Eq 8's exposed Trans under the model's transfer_credit
    double exposed_agg_s = 0;    // Eq 8's exposed Agg
    double exposed_trans_chunked_s = 0;  // max(0, Trans - FEC - FNEC): what ideal chunks would leave exposed
    double exposed_agg_chunked_s = 0;    // max(0, Agg - BEC - BNEC)
    double eq6_s = 0;
    double eq8_s = 0;
    double fastermoe_s = 0;  // FasterMoE's system: broadcast/reduce beside one all-to-all each (see above)
    double owner_move_s = 0;  // owner moves charged to this (iteration, layer), blocking, already in eq6_s, eq8_s
                              // and fastermoe_s (moves.h charge_owner_moves; 0 from predict_layer)
    double a2a_bytes = 0;     // all-to-all bytes of one direction, summed over devices (off-diagonal)
    double trans_bytes = 0;   // parameter bytes sent by Trans
    double agg_bytes = 0;     // gradient bytes sent by Agg
};

// The placement supplies owners (the Trans source, the Agg destination) for the topology-aware variant.
CostBreakdown predict_layer(const CostModel& model, const LayerFlow& flow, const Placement& placement);

// Eqs 4-5 alone: the Trans and Agg seconds predict_layer reports (trans_s, agg_s), without the all-to-all, the
// compute or Eq 8's split; for callers that time parts of a transfer (the simulator's whole-expert split).
struct TransferSeconds {
    double trans_s = 0, agg_s = 0;
};
TransferSeconds transfer_seconds(const CostModel& model, const LayerFlow& flow, const Placement& placement);

// Expert e's copies on the topology-aware Trans path, as (sender, receiver) pairs (distinct; out is cleared
// first): the owner to each holder (star), or a chain from the owner through its node's receivers, then the
// following nodes' (wrapping), each node's receivers in device order. Agg sends the same pairs reversed.
void expert_copies(const CostModel& model, const Placement& placement, int expert,
                   std::vector<std::pair<int, int>>& out);

// Under a chain broadcast, the copies each device forwards (sent) and receives in one Trans, over every expert with
// replicas, [D] each. The chain's own rate makes Trans at least busiest() copies at trans_gbit_s (Agg likewise),
// a step in the number of copies the busiest device handles, whatever the others do.
struct ChainLoads {
    std::vector<int> sent, received;  // [D]
    int busiest() const;              // the largest of either
};
ChainLoads chain_loads(const CostModel& model, const Placement& placement);

// The model for layer `layer` of an iteration: `model` with first_block set for layer 0.
inline CostModel model_for_layer(const CostModel& model, int layer) {
    CostModel m = model;
    m.first_block = layer == 0;
    return m;
}
// One all-to-all of a [D*D] traffic matrix (bytes, src*D + dst, diagonal ignored): Eq 1 (the device receiving
// the most, bandwidth by that message size) or, topology-aware, the busiest link; plus the latency when anything
// moves. predict_layer times compute_flow's route so; the layer-to-layer token path (token_path.h) its own routes.
double a2a_time_s(const CostModel& model, const std::vector<double>& bytes);

// T' by Eq 6 or Eq 8 (cost_eq is 6 or 8)
inline double layer_cost(const CostBreakdown& c, int cost_eq) { return cost_eq == 8 ? c.eq8_s : c.eq6_s; }

// Exposed part of a transfer split into whole-expert pieces (seconds each, in expert order): first fit into the
// first window, the rest beside the second. Returns max(0, rest - second_window).
double exposed_whole_pieces(const std::vector<double>& pieces, double first_window, double second_window);

}  // namespace prophet
