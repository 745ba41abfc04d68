// device.h: where a run's model computes (the device.kind key): the check, made before anything is written, that
// the device is usable, and the StepModel (model/step_model.h) the trainer drives on it.
//
//   device.kind = cpu   Model<float> on the rank's CPU (the default; any number of MPI ranks)
//   device.kind = cuda  GpuModel on one GPU (cuda/gpu_step_model.h); one rank only for now (expert parallelism
//                       over GPUs is not built: train_settings_from refuses several ranks, exit 3)
#pragma once

#include <memory>
#include <string>

#include "model/step_model.h"

namespace prophet {

// Throws Error(kExitResource) with one line naming device.kind, what was found and the fix when kind is "cuda"
// and no CUDA device is usable: a build without CUDA, no driver, or zero devices. A no-op for "cpu".
void require_usable_device(const std::string& kind);

// The model operations for `kind` over the host model: CpuStepModel on `host` itself, or a GPU copy of it
// (device 0 of those visible). Call require_usable_device first.
std::unique_ptr<StepModel> make_step_model(const std::string& kind, Model<float>& host);

}  // namespace prophet
