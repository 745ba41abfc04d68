// calibrate_ops.h: microbenchmarks for the per-op model's tables (sim/op_model.h), the [ops] section that
// `prophet profile --calibrate` appends to the cluster file it writes. One BLAS thread per rank (the trainer's
// setting), every figure the median over repeats of the slowest rank's time:
//   GEMMs: the FLOP rate of each op (forward nn, data gradient nt, weight gradient tn) on one fixed grid of
//     (M, N, K), M = 16 .. 1024, N and K = 8 .. 2048 (calibrate_ops.cpp: the same for every config; the per-op
//     model interpolates any shape from it, sim::GemmGrid);
//   streaming: a copy of 4 KiB (the latency) and of 8 MiB (bandwidth, read + write bytes);
//   attention: the causal attention kernel at this rank's B/D sequences, its FLOP rate (and at every further shape
//     given: prophet profile --ops-shape; the calibration run and its scale fit stay the model's own);
//   all-to-all: 1 KiB per peer (latency per peer) and 1 MiB per peer (bandwidth per rank);
//   point to point: 8 B (latency) and 4 MiB (bandwidth) from rank 0 to rank 1;
//   all-reduce: 8 B (latency per ring step) and 4 MiB (bandwidth, from the ring formula);
//   the emulated link's cost per paced message (comm/comm_paced.h), through a paced communicator.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "sim/op_model.h"
#include "train/train_config.h"

namespace prophet {

// Collective: every rank takes part (at least 2 ranks). calibrated_on describes settings.model and the rank count.
// `comm` must be the UNPACED communicator even when the run has an emulated link (settings.link_gbps > 0): the
// all-to-all, point-to-point and all-reduce tables are the inner transport's, and the per-op model adds the link's
// pacing on top (sim/op_model.cpp wire_s); tables timed through the link would count it twice.
// grid_progress(done, total), when set, is called after each of the GEMM grid's timings (most of the
// calibration's time: about 20 s on the suite's 2-core VMs), on every rank that passes it.
// grid_passes: passes over the whole GEMM grid, each point keeping its fastest pass's median. A disturbance
// (another process, the host) only slows a pass, and one that covered a point's few repeats once put a point at half
// its neighbours' rate (55 against 101-111 GFLOP/s in 1 of 7 campaigns' grids, 2026-12-03), which every held-out
// shape interpolated from it inherited; so 2 by default. 1 takes half the grid's time, for a quiet machine or a
// calibration whose accuracy does not matter (the suite's tests of the calibration's plumbing).
using GridProgress = std::function<void(int done, int total)>;
constexpr int kDefaultGemmGridPasses = 2;
sim::OpTables calibrate_op_tables(Communicator& comm, const TrainSettings& settings,
                                  const std::vector<ModelConfig>& further_shapes = {},
                                  int grid_passes = kDefaultGemmGridPasses, const GridProgress& grid_progress = {});

// A config error naming --grid-passes unless passes is in [1, sim::kMaxGemmGridPasses].
void check_grid_passes(int passes);

// One --ops-shape value, "KEY=N,KEY=N,..." with keys C, F, NH, V, E, T, B (e.g. "C=128,F=1024,NH=8"), over
// `base` (the calibration's model) for the keys not given; validated like a model config. A config error naming
// --ops-shape, the text and the allowed keys otherwise.
ModelConfig parse_ops_shape(const std::string& text, const ModelConfig& base);

}  // namespace prophet
