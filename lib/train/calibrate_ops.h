// calibrate_ops.h: microbenchmarks for the per-op model's tables (sim/op_model.h), the [ops] section that
// `prophet profile --calibrate` appends to the cluster file it writes. One BLAS thread per rank (the trainer's
// setting), every figure the median over repeats of the slowest rank's time:
//   GEMMs at the model's shapes (x W for qkv 3C x C, proj C x C, gate E x C, LM head V x C, expert F x C and C x F)
//     for M = 16 .. 4096 rows;
//   streaming: a copy of 4 KiB (the latency) and of 8 MiB (bandwidth, read + write bytes);
//   attention: the causal attention kernel at this rank's B/D sequences, its FLOP rate;
//   all-to-all: 1 KiB per peer (latency per peer) and 1 MiB per peer (bandwidth per rank);
//   point to point: 8 B (latency) and 4 MiB (bandwidth) from rank 0 to rank 1;
//   all-reduce: 8 B (latency per ring step) and 4 MiB (bandwidth, from the ring formula).
#pragma once

#include "comm/comm.h"
#include "sim/op_model.h"
#include "train/train_config.h"

namespace prophet {

// Collective: every rank takes part (at least 2 ranks). calibrated_on describes settings.model and the rank count.
sim::OpTables calibrate_op_tables(Communicator& comm, const TrainSettings& settings);

}  // namespace prophet
