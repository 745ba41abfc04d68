// uncertainty.h: the sweep file's perturbations of the simulated truth (docs/sweep.md, "Uncertainty"):
//   truth_scale = { compute = [0.7, 1.0, 1.3], bandwidth = [...], latency = [...], intra_bandwidth = [...],
//                   inter_bandwidth = [...] }   -> grid axes truth.<name>_scale
//   uncertainty = 0.3                           -> truth.compute_scale, truth.bandwidth_scale and
//                                                  truth.latency_scale each [0.7, 1.0, 1.3]: the corners of the
//                                                  +-30% box, its faces and the nominal point (27 combinations)
// The planner keeps the nominal cluster (plan.* scales stay its belief); engine "sim" times each point on the
// cluster the truth.* scales make (sim/truth_scale.h).
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sweep/sweep.h"

namespace prophet::sweep::detail {

// The grid axes that [sweep]'s truth_scale or uncertainty adds (empty: neither is set). Throws a config error
// (exit 3) naming the key for both set at once, an unknown scale name, a value <= 0, an uncertainty outside
// (0, 1), or an engine other than "sim".
std::vector<GridAxis> truth_axes(const toml::table& sweep, const std::string& engine);

}  // namespace prophet::sweep::detail
