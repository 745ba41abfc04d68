// calibrate.h: measures this machine for the cost model (`prophet profile --calibrate`) and writes a cluster file
// that `prophet plan` accepts. Each figure is measured the way the cost model uses it:
//   all-to-all: every rank sends m bytes to every other rank; B̄(size) = received bytes per rank / time (Eq 1);
//   Trans / Agg: one expert (2CF floats) broadcast from / reduced to rank 0 among all ranks; B from Eq 4 / 5 with
//                r = D-1 receivers: B = (D-1) * bytes / (D * time);
//   point to point: rank 0 -> rank 1, 4 MiB;
//   compute: the expert FFN (two GEMMs and gelu) on this rank's tokens, 4 M C F FLOP per call (Eq 2's t);
//   all-to-all wait: how much longer the FFN followed by an all-to-all of this rank's routed rows takes than the
//                two alone (ranks sharing cores arrive apart): the cluster's a2a_latency_us;
//   FNEC / BNEC: a forward/backward of the model with a timed local expert executor, minus the expert time, / L;
//   step tail: what a step does after its last backward block (dense-gradient all-reduce, gradient norm, AdamW on
//              the dense tensors and the rank's home experts, loss all-reduce, zero-grad), once per step.
// Timings are medians over repeats of the maximum over ranks (the slowest rank decides, as in a step).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "balance/cluster.h"
#include "comm/comm.h"
#include "model/moe_gpt.h"
#include "train/train_config.h"

namespace prophet {

struct Calibration {
    int num_ranks = 0;
    std::vector<double> a2a_received_bytes;  // per size step: bytes each rank receives in one all-to-all
    std::vector<double> a2a_seconds;         // per size step: median time
    double p2p_bytes_per_s = 0;
    double trans_bytes_per_s = 0;
    double agg_bytes_per_s = 0;
    double expert_flops_per_s = 0;
    double fnec_s = 0;
    double bnec_s = 0;
    double step_tail_s = 0;  // per step, seconds
    double a2a_wait_s = 0;   // per all-to-all, seconds
};

// Collective: the median over `repeats` repeats (after 2 warm-ups, each after a barrier) of the slowest rank's time
// of fn(), seconds.
double time_collective(Communicator& comm, const std::function<void()>& fn, int repeats = 7);
// Collective, time_collective of: an all-to-all of per_peer bytes from every rank to every other (none to itself);
// a message of `bytes` from rank 0 to rank 1. Seconds. working_set_bytes > bytes: each repeat sends the next of
// working_set_bytes / bytes buffers (each sent once before timing), so that a working set larger than the caches times
// messages from memory, as the trainer's Trans and Agg read parameters and gradients no recent op touched.
// repeats: as time_collective's (the median's samples).
double time_a2a(Communicator& comm, size_t per_peer, int repeats = 7);
double time_p2p(Communicator& comm, size_t bytes, size_t working_set_bytes = 0, int repeats = 7);

// The trainer's step masks under static EP on rank `rank` of D (the calibrated step tail): skip [tensors] = 1 for the
// experts another rank is home of (AdamW skips them), include = 1 for this rank's home experts and, on rank 0 only,
// the dense tensors (the gradient norm counts each once).
void static_ep_step_masks(const Model<float>& model, int rank, int D, std::vector<char>* skip,
                          std::vector<char>* include);

// Collective: every rank takes part. Needs at least 2 ranks (exit 3 otherwise).
Calibration calibrate_machine(Communicator& comm, const Model<float>& model, const TrainSettings& settings);
ClusterSpec calibration_cluster(const Calibration& cal, int num_devices);
// extra_toml: sections appended after [cluster] (the per-op model's [ops], train/calibrate_ops.h)
void write_cluster_file(const ClusterSpec& cluster, const Calibration& cal, const std::string& path,
                        const std::string& extra_toml = "");
std::string calibration_json(const Calibration& cal);

}  // namespace prophet
