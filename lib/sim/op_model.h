// op_model.h: the per-op cost model of the real trainer (beside balance/cost_model.h, which stays the planner's
// "paper model", Eqs 1-8). Each op the trainer records (schedule/timeline.h) gets a predicted duration from its
// features: the model config, the step's routing counts and placement, the rank. The constants are tables
// measured on the machine by `prophet profile --calibrate` (train/calibrate_ops.h) and kept in the cluster file's
// [ops] section (docs/cluster.md lists every field).
//
// Per op kind (N = this rank's tokens B/D*T, C model width, F expert hidden, V vocabulary, E experts):
//   GEMM (M x N x K, fp32, forward x W / data gradient dy W^T / weight gradient x^T dy: GemmOp): 2MNK FLOP at the
//     FLOP rate of that op at (M, N, K), interpolated multilinearly in (log M, log N, log K) on the rate grid the
//     calibration measured (GemmGrid: a fixed grid spanning the suite's shapes, never the validated ones), each
//     coordinate clamped to its axis (beyond the grid: the edge's rate);
//   streaming ops (layernorm, gelu, softmax, residual adds, pack/unpack copies, embedding): stream_latency +
//     bytes / stream bandwidth;
//   attention core (QK^T, softmax-V): its FLOP at attn_gflop_s;
//   expert compute: per expert with rows on this rank, its two GEMMs (+ gelu); backward: two data-gradient and
//     two weight-gradient GEMMs (+ gelu'); the dense layers' backward likewise;
//   all-to-all: a2a_latency * peers + max(bytes out, bytes in) of the rank / a2a bandwidth; a collective takes the
//     slowest rank's time; over an emulated link: bytes out / link rate when slower, + (link latency +
//     link_message_s) per message;
//   Trans / Agg: p2p_latency * messages + expert bytes moved by the rank / p2p bandwidth (a part of a split
//     transfer: half of the block's when both parts were recorded); over an emulated link, the bytes and messages
//     the rank sends (Trans: the home; Agg: the other holders) at the link's rate, when slower;
//   dense all-reduce: by size class, the calibration's all-reduce measured on a grid of sizes and interpolated
//     linearly in bytes (ring_allreduce_seconds); without that grid the ring, 2 (D-1) steps of latency +
//     2 (D-1)/D * bytes / allreduce bandwidth;
//   optimizer: a one-number all-reduce + 7 streams of the rank's parameter bytes (AdamW reads p, g, m, v and
//     writes p, m, v) at the stream bandwidth;
//   layout / stats: a small all-gather / all-reduce (latency) and streaming over the counts;
//   plan: the recorded duration (the planner's CPU time is the policy's, not the machine's);
//   waits: 0 (the replay's dependencies carry them).
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "sim/replay.h"

namespace prophet::sim {

// How a GEMM reads its operands (kernels/blas.h gemm(trans_a, trans_b, ...)), M the token rows:
//   kNN: out[M, N] = x[M, K] W[K, N]        forward (blas gemm(false, false, M, N, K))
//   kNT: out[M, N] = dy[M, K] W[N, K]^T     a data gradient dx = dy W^T (gemm(false, true, M, N, K))
//   kTN: dW[K, N] += x[M, K]^T dy[M, N]     a weight gradient summed over the M rows (gemm(true, false, K, N, M))
// Their speeds differ by shape (the transposed operand's access pattern, the M-long inner loop of kTN), so
// the calibration measures each at the shapes the trainer runs it.
enum class GemmOp { kNN, kNT, kTN };
const char* gemm_op_name(GemmOp op);  // "nn", "nt", "tn"

// The per-kernel GEMM model: the FLOP rate of each GemmOp measured on a fixed grid of (M, N, K) (the same axes for
// every op; calibrate_ops.h gives the grid). A shape between grid points gets the rate interpolated multilinearly
// in (log M, log N, log K) from the 8 grid points around it; a coordinate beyond an axis is clamped to its end.
// The rate at a grid point is that point's measurement, and the interpolation is monotone along an axis wherever
// the measured rates are.
constexpr int kMaxGemmGridPasses = 16;  // GemmGrid::passes' bound (a pass of the suite's grid: about 10 s on a core)
struct GemmGrid {
    std::vector<double> m, n, k;                     // the axes: rows, output columns, inner dimension; ascending, > 0
    std::array<std::vector<double>, 3> flops_per_s;  // per GemmOp: [m.size()][n.size()][k.size()], K fastest
    // timing passes over the whole grid, each point keeping its fastest (calibrate_ops.h); 0: not recorded (files
    // written before 2026-12-06, all of them 2 passes)
    int passes = 0;
    bool empty() const { return m.empty() || n.empty() || k.empty(); }
};

struct OpTables {
    GemmGrid gemm;
    double stream_latency_s = 0;     // per streaming op
    double stream_bytes_per_s = 0;   // read + write bytes per second of a streaming kernel (layernorm, copies)
    double attn_flops_per_s = 0;     // attention core
    double a2a_latency_s = 0;        // per peer of an all-to-all
    double a2a_bytes_per_s = 0;      // per rank
    double p2p_latency_s = 0;        // per message (Trans/Agg)
    double p2p_bytes_per_s = 0;
    double allreduce_latency_s = 0;  // per ring step
    double allreduce_bytes_per_s = 0;
    // the all-reduce by size class: the float all-reduce measured at each of a grid of message sizes on
    // allreduce_ranks ranks (bytes ascending, seconds of one call); empty: the ring formula only (older files)
    std::vector<double> allreduce_sizes_bytes, allreduce_sizes_s;
    int allreduce_ranks = 0;
    // the emulated link's own cost per paced message (comm/comm_paced.h: the wire thread sleeps until a message's
    // release time, wakes, and hands it to the inner communicator): wall time beyond latency + bytes / rate,
    // measured by the calibration through a paced communicator. Added per message only to runs with a link.
    double link_message_s = 0;
    // attention core rate at further model shapes (--ops-shape): (C, NH) -> FLOP/s; other shapes: attn_flops_per_s
    std::map<std::pair<int, int>, double> attn_flops_per_s_at;
    std::string calibrated_on;       // the config the tables were measured at (validation: held out or not)
    // per op kind name: recorded / modelled own time over the calibration run's steps (fit_op_scales), multiplied
    // into that kind's prediction; a kind not listed: 1. What microbenchmarks miss inside a real step (cold caches,
    // the other threads of the rank) is then carried to held-out configs per op kind.
    std::map<std::string, double> scale;
    // per communication op kind name: seconds added to every call of that kind (fit_in_step_overheads): the
    // in-step cost a tight-loop microbenchmark never sees. A rank that reaches a collective early waits in
    // MpiRequest::wait's poll loop, which backs off to sleeps of up to 100 us (comm/comm_mpi.cpp), so the
    // collective ends only when that rank wakes; in a microbenchmark the ranks arrive together and never sleep.
    // Not added to the all-to-alls, Trans and Agg of a run over an emulated link: there link_message_s, measured
    // through the same waits, already carries it per message.
    std::map<std::string, double> in_step_s;
    bool empty() const { return gemm.empty(); }
};

// FLOP/s of an M x N x K GEMM of kind op: the grid's rate interpolated at (log M, log N, log K) (see GemmGrid)
double gemm_flops_per_s(const GemmGrid& grid, double m, double n, double k, GemmOp op = GemmOp::kNN);
// seconds of an M x N x K GEMM of kind op: 2MNK / gemm_flops_per_s; 0 when m <= 0
double gemm_seconds(const OpTables& tables, double m, int n, int k, GemmOp op = GemmOp::kNN);
// seconds of an all-reduce of `bytes` over D ranks. With a size grid measured on D ranks (allreduce_sizes_*): the
// measured time interpolated linearly in bytes between the two grid sizes around it (per size class a latency and
// a bandwidth: the segment's intercept and slope), below the smallest size that size's time, above the largest the
// last segment extended. Otherwise the ring formula 2 (D-1) (latency + bytes / (D * bandwidth)). 0 when D <= 1.
double ring_allreduce_seconds(const OpTables& tables, double bytes, int num_ranks);
// FLOP/s of the attention core at model width C with NH heads: the (C, NH) entry of attn_flops_per_s_at, else
// attn_flops_per_s (the calibration model's)
double attn_flops_per_s(const OpTables& tables, int C, int NH);

// [ops] of the cluster file at `path`; an input error naming the field when a field is missing or out of range
OpTables load_op_tables(const std::string& path);
// the [ops] section as TOML (appended to a cluster file by the calibration)
std::string op_tables_to_toml(const OpTables& tables);

// The model config of a recorded run (its params) and the routing features of one step.
struct OpModelConfig {
    int V = 0, T = 0, C = 0, NH = 0, L = 0, E = 0, K = 0, F = 0, B = 0, D = 0;
    // owner | least_loaded | even_split | flow | max_flow (the run's balance.route_to, "auto" resolved)
    std::string route_rule;
    // the run's emulated link (comm.link_gbps, comm.link_latency_us): every rank's all-to-all and point-to-point
    // egress leaves at this rate, so an exchange takes the slower of the table's bandwidth and the link's for the
    // bytes the rank sends, plus the link latency per message. 0: no emulated link
    double link_bytes_per_s = 0;
    double link_latency_s = 0;
    // every rank pinned to one core (testbed.pinned, one CPU per rank in testbed.binding): a rank's threads share
    // that core, so a Trans/Agg on the communication lane (block-wise) takes its copy's CPU time from the compute
    bool one_core_per_rank = false;
};
OpModelConfig op_model_config(const RecordedRun& run);  // input error naming the run when model.* is absent

// Predicted own duration (microseconds) of every op of a step's graph, times tables.scale of its kind, plus
// tables.in_step_s of its kind per call (see OpTables). Wake-ups are 0, and so is lead, but where the config has
// one core per rank: there a Trans/Agg on the communication lane charges its rank's copy (latency per message and
// bytes moved at the unpaced point-to-point rate; the emulated link's pacing is a sleep) as lead of the
// compute-lane op after its submitter. plan ops keep their recorded duration.
ReplayDurations predict_durations(const OpTables& tables, const OpModelConfig& config, const RecordedStep& step,
                                  const ReplayGraph& graph);

// tables with scale fitted on a recorded run (the calibration's own): per compute op kind (and the optimizer),
// the median over steps 1.. of that step's recorded own time summed over ranks over the modelled one (scale
// ignored): a few slow early steps do not move it. Communication kinds, waits and plan are not fitted.
OpTables fit_op_scales(OpTables tables, const RecordedRun& run);
// The same over several recordings of the calibration config (a campaign records it again between its points):
// the median over every step of every run, so the machine's drift over the campaign is sampled, not one moment.
OpTables fit_op_scales(OpTables tables, const std::vector<const RecordedRun*>& runs);

// The communication kinds fit_in_step_overheads fits: the all-to-alls, the collective layout all-gathers, the
// dense all-reduce, stats, Trans and Agg (the optimizer is scaled instead: AdamW's streams dominate it).
bool is_in_step_kind(prophet::OpKind kind);
// tables with in_step_s fitted on a recorded run (the calibration's own, over no emulated link): per kind of
// is_in_step_kind, per step 1.. the mean over that kind's calls (every rank's op of a collective unit is one call
// of that rank) of recorded own - modelled own (in_step_s ignored), then the median over steps (a noisy step does
// not move it), floored at 0. A kind the run never recorded is left out (0).
OpTables fit_in_step_overheads(OpTables tables, const RecordedRun& run);
// The same over several recordings of the calibration config: the median over every step of every run.
OpTables fit_in_step_overheads(OpTables tables, const std::vector<const RecordedRun*>& runs);
// The calibration's whole fit on its recordings (one or several, pooled): fit_op_scales, then
// fit_in_step_overheads with those scales (the in-step terms are what the scaled model still leaves).
OpTables fit_to_recordings(OpTables tables, const std::vector<const RecordedRun*>& runs);

}  // namespace prophet::sim
