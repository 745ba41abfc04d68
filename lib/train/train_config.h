// train_config.h: every key of `prophet train` / `prophet profile`, and the checks that must pass before any
// communication (E divisible by D, K <= E, B divisible by D, a readable data file, a cluster file for the planner).
#pragma once

#include <string>

#include "balance/cost_model.h"
#include "balance/policies.h"
#include "core/config.h"
#include "kernels/optim.h"
#include "model/data.h"
#include "model/model_config.h"

namespace prophet {

const Schema& train_schema();

struct TrainSettings {
    ModelConfig model;
    DataConfig data;
    int64_t steps = 20;
    LrSchedule lr;
    AdamWConfig adamw;
    double grad_clip = 1.0;
    int log_every = 1;
    int threads = 1;  // BLAS threads per rank
    std::string checkpoint_dir;
    int64_t save_every = 0;  // 0: only at the end when checkpoint_dir is set
    int64_t keep_checkpoints = 3;  // newest step directories kept after each save; 0: all
    std::string policy;
    BalanceOptions balance;
    int profile_iterations = 1;  // eplb/moetuner: static for this many iterations, then plan once
    std::string cluster_path;    // the planner's cost model (num_devices is replaced by the world size)
    CostModel cost;
    std::string store_path;
    std::string experiment;
    int64_t seed = 1;
    double comm_timeout_s = 600;
    double link_gbps = 0;          // > 0: PacedCommunicator in front of the ranks' communicator
    double link_latency_us = 0;
    bool replicas_within_host = false;  // host-aware placement: replicas only on the owner's host (docs/cluster.md)
    bool schedule_blockwise = false;  // schedule.mode = blockwise (Pro-Prophet's scheduler)
    bool schedule_fastermoe = false;  // schedule.mode = fastermoe (FasterMoE's overlap; docs/scheduler.md)
    std::string schedule_split = "time";
    bool record_loads = true;    // one expert_load row per step and layer
    std::string routing_trace;   // routing.source = "trace": the trace whose counts replace the gate's choices
    std::string device_kind = "cpu";  // device.kind: cpu | cuda (train/device.h)
    std::string comm_backend = "mpi"; // comm.backend: mpi | nccl (nccl with device.kind = cuda only)
    std::string precision = "fp32";   // train.precision: fp32 | bf16 (bf16 with device.kind = cuda only)
    double debug_slow_step_pct = 0;  // TEST ONLY: spin for this % of each step's wall time (the throughput gate)
};

// Reads and cross-checks the resolved config for a run on `world_size` ranks; throws prophet::Error (exit 3)
// naming the key, the value, the rule and a fix. Reads the cluster file and checks the data file exists.
TrainSettings train_settings_from(const Config& config, int world_size);

// model.T, C, L, E, K, F and B of a config into m (the shape a step's time depends on; a recorded run's config
// holds them too); throws what Config::get_int throws for a missing key.
void read_model_dims(const Config& config, ModelConfig& m);

// The cost model of the trainer's planner on `cluster` for a run of model m on D ranks: the file's num_devices
// replaced by D (one node of D when its devices_per_node does not divide D), m's dimensions at fp32, and the
// links priced as the trainer runs them: topology-aware where the file describes its topology (as `prophet plan`
// prices it), and a star Trans/Agg whatever the file's trans_broadcast, since the trainer sends each copy from the
// owner point to point (moe/trans_agg.h). The trainer and the simulator's validation of its runs share it.
CostModel trainer_cost_model(ClusterSpec cluster, const ModelConfig& m, int D);

}  // namespace prophet
