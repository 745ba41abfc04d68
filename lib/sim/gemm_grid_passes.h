// gemm_grid_passes.h: the one rule for a GEMM grid's pass count (GemmGrid::passes), shared by the three places
// that read one: `prophet profile --grid-passes`, a sweep's calibrate_grid_passes and a cluster file's
// [ops] gemm_grid_passes. Each names its own field in the error.
#pragma once

#include <cstdint>
#include <string>

#include "sim/op_model.h"

namespace prophet::sim {

inline bool gemm_grid_passes_allowed(int64_t passes) { return passes >= 1 && passes <= kMaxGemmGridPasses; }

// the error's "what is allowed" for a pass count outside gemm_grid_passes_allowed
inline std::string gemm_grid_passes_rule() {
    return "must be an integer in [1, " + std::to_string(kMaxGemmGridPasses) + "]";
}

}  // namespace prophet::sim
