// sweep_internal.h: what the parts of lib/sweep share (not part of the public sweep.h): path resolution of the
// files a sweep names, and the entry points of the engines (sim / model in engine_sim.cpp, real in
// engine_real.cpp) that the runner (runner.cpp) calls per point.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "balance/evaluate.h"
#include "balance/rebalance.h"
#include "core/process.h"
#include "sim/trace_view.h"
#include "sweep/sweep.h"
#include "trace/trace.h"

namespace prophet::sweep::detail {

// A string as a TOML string literal ("..." with escapes).
std::string quoted(const std::string& s);

// A trace path names a generator file (.toml) rather than a recorded trace.
bool is_generator(const std::string& path);

// `path` as written if it exists from the working directory (or is absolute), else relative to the sweep file's
// directory when it exists there, else as written.
std::string resolve_path(const SweepSpec& spec, const std::string& path);

// The file name without directory and extension (for point descriptions).
std::string stem(const std::string& path);

// SHA-256 (hex) of a file's bytes.
std::string file_sha256(const std::string& path);

// A TraceView over a whole trace (all iterations and layers): sim/trace_view.h's, one rule for plan and sweep.
using ::prophet::view_of;

// engine sim / model: one metric row of a point's run.
struct Metric {
    std::string key;
    int64_t step;
    double value;
    int layer = -1;  // >= 0: a per-layer metric (step 0)
};

struct SimulatedPoint {
    std::vector<Metric> metrics;
    double headline_ms = 0;  // the number the progress line shows
    int world_size = 0;      // D of the point's cluster
};

// engine sim / model: loads the point's cluster and trace and simulates (sim) or evaluates (model) its policy.
// Throws prophet::Error (exit 3) for a defective input file.
SimulatedPoint run_simulated_point(const SweepSpec& spec, const SweepPoint& p);

// engine sim / model under balance.regime = serving (engine_serving.cpp): the point's trace, the cost model it is
// planned and timed on, and the rebalancing protocol.
struct ServingPointInput {
    TraceView view;
    CostModel cost;
    EvalSettings settings;
    RebalanceSettings rebalance;
};

// The policy served with periodic rebalancing and static on the same trace: forward time per layer, speedup over
// static (moves apart), stall, balancedness per rebalance (predicted on its window, realised on what it served).
std::vector<Metric> serving_point_metrics(const ServingPointInput& in, const std::string& policy, double* headline_ms);

// engine real: the child's command line (mpirun for ranks > 1, then prophet train / profile --inference). String
// values go to --set as TOML strings ("2024" stays a string).
std::vector<std::string> child_command(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options);

// engine real: the exit code recorded for a point stopped at time_limit_s (as timeout(1) exits), and the seconds
// between its SIGTERM and SIGKILL.
inline constexpr int kExitTimeout = 124;
inline constexpr double kKillGraceSeconds = 10;

// Runs a child command line of a point (options.launcher, or run_child here) under the sweep's time limit.
ChildResult launch(const SweepSpec& spec, const SweepOptions& options, const std::vector<std::string>& command);

// engine real: runs the point's child (child_command through launch).
ChildResult launch_point(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options);

// "3", "2.5": seconds for messages.
std::string format_seconds(double seconds);

// validate_cluster = "calibrate": `prophet profile --calibrate` on the point's ranks, with the sweep's and the
// point's grid keys (they may change the model's shapes), writing `out`; the profile run is recorded in the store
// under the sweep's name. Then the calibration config is recorded again (`prophet train --timeline`, experiment
// "<sweep name>-calibration") until kCalibrationRecordings runs exist, and out's [ops] scale and in_step_us are
// re-fitted on all of them pooled (calibrate_pooled.cpp says why). Throws prophet::Error with the child's last
// stderr line when a child fails.
void calibrate_cluster(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options, const std::string& out);
// recordings of the calibration config that calibrate_cluster fits the [ops] scale and in_step_us on (the profile's
// own run included): three processes, so the fit's median is not one process's draw
constexpr int kCalibrationRecordings = 3;
// cluster_path's [ops] section rewritten with scale and in_step_us fitted on the runs of store_path, pooled
// (sim::fit_to_recordings); the rest of the file is kept as it is.
void refit_calibration_pooled(const std::string& store_path, const std::string& cluster_path,
                              const std::vector<std::string>& run_ids);
// The calibration run's config as one line after "<D> ranks, ": "held out: model.F=512" ([sweep.calibrate_set]) or
// "same config as the point" (the point's own grid values).
std::string calibration_description(const SweepSpec& spec, const SweepPoint& p);

// The child's final {"summary": true, ...} line of stdout; throws when there is none.
nlohmann::json child_summary(const std::string& out);

}  // namespace prophet::sweep::detail

namespace prophet::sweep::detail {

// After a real sweep's points (validate_cluster set): the per-op replay validation (sim/validation_runs.h, the
// library of `prophet validate`) of the child of every point the store holds finished, each replayed with the
// [ops] tables of the cluster file its point was validated on; with [sweep.calibrate_set] every point is held out
// (the calibration ran another config). Recorded as a validation run (report/fig_validation_replay.py draws it).
// Returns its run id, or "" with a log line saying why (a cluster file without [ops], no child with a timeline).
std::string replay_validate_points(Store& store, const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                   const SweepOptions& options);

}  // namespace prophet::sweep::detail
