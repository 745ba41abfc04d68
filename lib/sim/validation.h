// validation.h: the simulator against recorded real runs (`prophet validate`, docs/simulator.md "Validation").
// Each run is replayed step by step on its recorded op DAG (replay.h) with its recorded counts and placements
// (never re-planned), the ops' durations either predicted by the per-op model (op_model.h, the validation) or
// the recorded ones (the replay's own exactness). Errors are (simulated - measured) / measured.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/stats.h"  // percentile (the P90s and the medians below)
#include "sim/op_model.h"
#include "sim/replay.h"

namespace prophet::sim {

enum class ReplaySource { kOpModel, kRecorded };

struct PointValidation {
    std::string run_id, policy, schedule, config;  // config: the model shape, rank count and link (config_key)
    int64_t seed = 0;
    bool held_out = true;   // config differs from the op tables' calibrated_on
    bool busy_machine = false;  // the run recorded testbed.busy_machine = true (docs/testbed.md)
    double load1 = -1;          // its testbed.load1 at the start (-1: not recorded)
    int steps = 0;          // replayed steps (step 0, the warm-up, is left out)
    double measured_mean_ms = 0, sim_mean_ms = 0;
    double measured_median_ms = 0, sim_median_ms = 0;
    double measured_sd_ms = 0;  // step-to-step spread of the measured step
    double error_mean = 0;      // mean vs mean
    double error_median = 0;    // median vs median
    double max_step_error = 0;  // the largest |per-step error|
    double p90_step_error = 0;  // the 90th percentile of |per-step error|
    double step_mape = 0;       // mean |per-step error|
    // per op kind: mean over steps and ranks of (simulated own - recorded own) summed over the kind's ops, ms; and
    // "lead": the same of the untracked time before ops (replay.h), which the per-op model leaves at 0
    std::map<std::string, double> residual_ms;
    std::map<std::string, double> recorded_ms;  // the recorded own time per kind on the same footing
};

// The run's identity for grouping and held-out checks: "V=.. T=.. C=.. NH=.. L=.. E=.. K=.. F=.. B=.. D=.." (the
// form of OpTables::calibrated_on) plus " link=<comm.link_gbps>".
std::string config_key(const RecordedRun& run);

// tables: needed for kOpModel (nullptr for kRecorded).
PointValidation validate_run(const RecordedRun& run, ReplaySource source, const OpTables* tables);

struct ValidationSummary {
    std::vector<PointValidation> points;
    // over points, of error_median: mean |error|, mean error, 90th percentile and max of |error|
    double mape = 0, bias = 0, p90_abs = 0, max_abs = 0;
    // the same over held-out points only
    double heldout_mape = 0, heldout_bias = 0, heldout_p90_abs = 0, heldout_max_abs = 0;
    int heldout_points = 0;
    // Kendall tau of the simulated policy order against the measured one, over pairs of policies of the same
    // config whose measured means differ by more than 2 sd of the seed spread (tau_pairs of them; tau = 0 if none)
    double kendall_tau = 0;
    int tau_pairs = 0;
    std::map<std::string, double> residual_ms;  // per op kind, mean over points
    std::map<std::string, double> recorded_ms;  // per op kind, mean over points
};
ValidationSummary summarize_validation(std::vector<PointValidation> points);

}  // namespace prophet::sim
