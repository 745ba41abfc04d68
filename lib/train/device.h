// device.h: where a run's model computes (the device.kind key): the check, made before anything is written, that
// the device is usable, and the StepModel (model/step_model.h) the trainer drives on it.
//
//   device.kind = cpu   Model<float> on the rank's CPU (the default; any number of MPI ranks)
//   device.kind = cuda  GpuModel on one GPU (cuda/gpu_step_model.h); one rank only for now (expert parallelism
//                       over GPUs is not built: train_settings_from refuses several ranks, exit 3)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "model/step_model.h"

namespace prophet {

// Throws Error(kExitResource) with one line naming device.kind, what was found and the fix when kind is "cuda"
// and no CUDA device is usable: a build without CUDA, no driver, or zero devices. A no-op for "cpu".
void require_usable_device(const std::string& kind);

// The model operations for `kind` over the host model: CpuStepModel on `host` itself, or a GPU copy of it
// (device 0 of those visible). precision: "fp32" or "bf16" (train.precision; bf16 is refused for cpu by
// train_settings_from, and asserted here). Call require_usable_device first.
// local_rank: this rank's index among the ranks of its host; it uses device local_rank % (devices visible), so
// ranks share GPUs round-robin (4 ranks on a one-GPU machine share GPU 0; one rank per GPU where there are enough).
// rank: this rank in the run, named by every CUDA / cuBLAS error from then on (-1: not named).
std::unique_ptr<StepModel> make_step_model(const std::string& kind, const std::string& precision, Model<float>& host,
                                           int local_rank = 0, int rank = -1);

// The run's communicator for comm.backend: "mpi" returns `world` (the MPI world, or one process); "nccl" wraps it
// in the NCCL communicator (comm/comm_nccl.h: `world` becomes its bootstrap; one rank per GPU, refused alike on
// every rank, exit 3, otherwise). A build without the CUDA backend refuses nccl (exit 4, one line).
std::unique_ptr<Communicator> make_run_communicator(const std::string& backend, std::unique_ptr<Communicator> world);

// This rank's index among the ranks with its host name; hosts [D] (gather_rank_hosts).
int local_rank_of(const std::vector<int>& hosts, int rank);

}  // namespace prophet
