// calibrate_device.h: `prophet profile --calibrate --set device.kind=cuda`: the Calibration's compute figures
// measured where the run computes (train/calibrate.h measures the CPU's first; this replaces them). The links
// (all-to-all, point to point, Trans, Agg, the all-to-all wait) stay the communicator's host-buffer figures, which
// is the path a cuda run's expert parallelism takes (host-staged, docs/gpu.md).
#pragma once

#include "comm/comm.h"
#include "model/moe_gpt.h"
#include "train/calibrate.h"
#include "train/train_config.h"

namespace prophet {

// Collective. On every rank's GPU: the expert FFN at this rank's token count (expert_flops_per_s), one block's
// forward / backward non-expert compute (fnec_s, bnec_s) and the step's tail as the trainer runs it on the device
// (dense all-reduce through the host, gradient norm, AdamW, the loss all-reduce, zero-grad: step_tail_s); the
// slowest rank decides. A no-op for device.kind = cpu.
void calibrate_on_device(Communicator& comm, const Model<float>& trained, const TrainSettings& settings,
                         Calibration* cal);

}  // namespace prophet
