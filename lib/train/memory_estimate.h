// memory_estimate.h: the bytes one rank of `prophet train` / `prophet profile` allocates, computed from the
// config alone, so that a model that cannot fit is refused (exit 4) before anything is allocated or any rank
// talks to another.
//
// Counted per rank (float32 everywhere, every rank holds every expert's parameters, see trainer.h):
//   parameters    params + grads + AdamW m + v: 4 x num_params floats
//   activations   the Activations arenas for B/D sequences, exactly as model/moe_gpt.cpp allocates them
//   ep_buffers    the expert-parallel executor's buffers (moe/ep_executor.h) at perfectly balanced routing, each
//                 rank computing N*K rows (N = B/D*T); skewed routing needs more, at most ep_buffers_worst when
//                 every rank's tokens go to this rank's experts (D*N*K rows)
// Not counted: the data source, the policy's state and the store (small next to the above for every preset).
// The refusal uses the balanced figure, so it never refuses a run that could fit; the worst case is reported.
#pragma once

#include <string>

#include "core/config.h"
#include "model/model_config.h"

namespace prophet {

struct MemoryEstimate {
    double num_params = 0;          // parameters of the whole model (param_layout(config).num_params)
    double parameters_bytes = 0;    // 4 arrays x num_params x 4 B
    double activations_bytes = 0;   // float + int arenas for B/D sequences
    double ep_buffers_bytes = 0;    // balanced routing
    double ep_buffers_worst_bytes = 0;
    double total_bytes() const { return parameters_bytes + activations_bytes + ep_buffers_bytes; }
    double worst_bytes() const { return parameters_bytes + activations_bytes + ep_buffers_worst_bytes; }
};

// config: validated (model_config_validate); world_size D divides B. Doubles, so no shape overflows.
MemoryEstimate estimate_train_memory(const ModelConfig& config, int world_size);

// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read.
double available_memory_bytes();

// The limit for one rank in bytes: limit_gib * 2^30 when limit_gib > 0, else MemAvailable / ranks_on_node;
// 0 when neither is known (no check).
double memory_limit_bytes(double limit_gib, int ranks_on_node);

// Throws prophet::Error (exit 4) when the estimate exceeds the limit, naming the parts, the limit, where the
// limit came from (limit_key or MemAvailable) and what to change. ranks_on_node: ranks sharing this machine.
void check_memory_fits(const MemoryEstimate& estimate, double limit_gib, int ranks_on_node,
                       const std::string& limit_key);

// What start_run calls before any allocation or communication: the estimate for `world_size` ranks against
// train.max_memory_gib, the ranks on this node taken from the launcher (OMPI_COMM_WORLD_LOCAL_SIZE,
// MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE; else all of world_size).
void check_train_memory(const Config& config, const ModelConfig& model, int world_size);

// "1.23 GiB" / "45.6 MiB" / "789 KiB" / "12 B"
std::string format_gib(double bytes);

}  // namespace prophet
