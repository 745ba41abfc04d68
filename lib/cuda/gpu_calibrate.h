// gpu_calibrate.h: the compute figures of `prophet profile --calibrate` measured on this rank's GPU
// (train/calibrate_device.h puts them into the Calibration), each the way the CPU calibration defines it
// (train/calibrate.h): the expert FFN (two GEMMs and gelu) on this rank's M rows, and one block's forward /
// backward non-expert compute = the model's forward / backward minus its experts, / L. Device times from cudaEvent
// pairs (the model's EventTimeline for the blocks), medians over repeats after warm-ups.
#pragma once

#include "cuda/context.h"
#include "model/moe_gpt.h"

namespace prophet::cuda {

struct GpuComputeFigures {
    double expert_s = 0;  // one expert FFN on M rows, seconds (4 M C F FLOP)
    double fnec_s = 0;    // per block, seconds
    double bnec_s = 0;
};

// model: layout and values of the run's model (a GpuModel copy is made); inputs, targets: HOST [B_local,T].
GpuComputeFigures measure_gpu_compute(Context& ctx, const Model<float>& model, const int* inputs, const int* targets,
                                      int B_local, double loss_denominator, int M);

}  // namespace prophet::cuda
