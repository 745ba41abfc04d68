// sweep.h: `prophet sweep`: a grid of (cluster, trace, policy, seed, grid combination) points, each run by the
// simulator, the cost model or (engine "real") a `prophet train` child process, and recorded as one run; points
// already finished in the store are skipped.
//
// File format and semantics: docs/sweep.md. Implementation, one part per file: spec.cpp (the sweep file),
// points.cpp (expansion and point identity), engine_sim.cpp (engines sim / model), engine_real.cpp (engine real's
// children), validate.cpp (simulator validation of real points), runner.cpp (the resumable point loop).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/process.h"
#include "store/store.h"

namespace prophet::sweep {

using KeyValues = std::vector<std::pair<std::string, std::string>>;  // (key, TOML value text)

struct GridAxis {
    std::string key;                  // trace.* or a plan.* / balance.* key
    std::vector<std::string> values;  // canonical TOML text of each value
};

// One arm of an ablation ([sweep.variants]): a named policy with fixed point keys (balance.*, plan.*, sim.*),
// recorded as the run param `ablate.variant` (the name `prophet ablate` records for real runs).
struct Variant {
    std::string name;
    std::string policy;  // its "balance.policy"
    KeyValues set;       // the other keys, canonical TOML values, sorted by key
};

struct SweepSpec {
    std::string origin;  // the file (for messages)
    std::string dir;     // its directory: relative paths not found from the working directory resolve here
    std::string name;
    std::string engine = "sim";  // sim | model | real
    std::string store_path;      // empty: not set in the file
    std::vector<std::string> clusters, traces, policies;
    std::vector<int64_t> seeds;
    std::vector<GridAxis> grid;  // in key order
    std::vector<Variant> variants;  // [sweep.variants] (engines sim / model), in name order; replaces `policies`
    bool match_devices = false;  // leave out (cluster, generator trace) pairs whose device counts differ
    // engine "real" only
    std::string train_config;   // the `prophet train --config` file, as written
    std::string command = "train";  // "train" | "infer": the children run prophet profile --inference
    std::vector<int> ranks;     // D of each point (1: no mpirun); part of the grid
    KeyValues set;              // [sweep.set]: fixed train overrides for every point, sorted by key
    // cluster file the child's recorded loads are simulated on (empty: no validation); kCalibrate: a cluster file
    // measured by `prophet profile --calibrate` on the points' own ranks and config right before the first of them
    std::string validate_cluster;
    // validate points whose child ran more ranks than cores (testbed.oversubscribed, docs/testbed.md) too; by
    // default they are left out of validation: they time the OS scheduler, not the code
    bool validate_oversubscribed = false;
    // wall-clock seconds one real point's child (and a calibration child) may run; 0: no limit. Past it the
    // child's process group gets SIGTERM, then SIGKILL, and the point is recorded failed with exit code 124.
    double time_limit_s = 0;
    // [sweep.calibrate_set]: train overrides of the calibration run in place of the points' grid values (so the
    // simulator is validated on configs it was not calibrated on); empty: each grid point calibrates its own config
    KeyValues calibrate_set;
    // calibrate_grid_passes: the calibration child's `prophet profile --grid-passes` (passes over the GEMM grid);
    // 0: not set, the profile's default
    int calibrate_grid_passes = 0;
};

// Throws prophet::Error (exit 3) naming key, value, rule and fix for any defect: unknown keys, empty lists,
// unknown engine or policy, a grid key that is neither a trace generator key nor a plan.* / balance.* key, or a
// grid value the key does not accept, missing cluster or trace files.
SweepSpec parse_sweep_file(const std::string& path);
SweepSpec parse_sweep_string(const std::string& text, const std::string& origin, const std::string& dir = ".");

inline constexpr const char* kCalibrate = "calibrate";

struct SweepPoint {
    int index = 0;                       // 0-based, in expansion order
    std::string cluster, trace, policy;  // as written in the sweep file (cluster, trace empty for engine "real")
    std::string variant;                 // [sweep.variants] name; empty without variants
    int64_t seed = 0;
    int ranks = 1;          // engine "real": the child's D
    KeyValues grid;         // this point's grid values (key order)
    KeyValues params;       // the flattened resolved point config, sorted by key
    std::string canonical;  // "key=value\n" lines of params
    std::string hash;       // sha256_hex(canonical)
    std::string description;
};

// The per-point run keys (plan.*, balance.*, sim.schedule) a grid or a variant may set.
const Schema& point_schema();

// The key of a point without its policy: points sharing it differ only in policy (speedup_vs_static pairs them).
std::string coordinates_key(const SweepPoint& p);

// clusters x traces x seeds x grid x policies, outermost first (the last grid key varies fastest among the grid
// keys); validates every point's config. Throws prophet::Error (exit 3) like parse_sweep_*.
std::vector<SweepPoint> expand_points(const SweepSpec& spec);

// The canonical "key=value\n" text of a key-value list (sorted by key; order of `kv` does not matter).
std::string canonical_text(KeyValues kv);

struct SweepOptions {
    std::string store_path;  // resolved
    bool dry_run = false;
    int max_points = -1;  // stop after this many points have run (skips do not count); < 0: no limit
    std::vector<int> only_points;  // 1-based point numbers to consider (a Slurm array task's share); empty: all
    RunInfo base;         // git sha, version, hardware, overrides: copied into each point's run
    std::string prophet_binary;  // engine "real": the binary the children run; empty: this process (/proc/self/exe)
    std::function<void(const std::string&)> log;  // progress lines (stderr in the binary); may be empty
    // engine "real": how a child's command line is run (a point's prophet train, a calibration); empty: run_child
    // on this machine. The one place a launcher that runs points elsewhere (e.g. under Slurm) plugs in; it must
    // honour ChildOptions::time_limit_s and report timed_out.
    std::function<ChildResult(const std::vector<std::string>& command, const ChildOptions& limits)> launcher;
};

struct SweepSummary {
    int points = 0;
    int already_done = 0;  // finished in the store before this invocation
    int ran = 0, skipped = 0, failed = 0;
    int claimed_elsewhere = 0;  // not run: another running sweep on the same store held the point's claim
    std::vector<std::string> run_ids;  // runs written by this invocation (finished and failed)
    // engine real with validate_cluster: the per-op replay validation run recorded after the last point ("": none)
    std::string validation_run_id;
};

// Runs (or, dry_run, only counts) every point; a point failing with prophet::Error is recorded as a failed run
// and the sweep continues.
SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options);

// "1m20s", "12s", "1h02m"
std::string format_duration(double seconds);

// Simulator validation of one real point (docs/sweep.md, docs/simulator.md "Validation").
struct Validation {
    double sim_step_ms = 0;       // mean simulated iteration time over iterations 1.. (the child's schedule)
    double measured_step_ms = 0;  // median of the child's step_ms over steps 1..
    double sim_error = 0;         // (sim - measured) / measured
    // where the simulated step goes, ms per iteration (1..) and device: per op kind (sim::op_kind_name) the mean
    // over devices of its summed op lengths, and "trans_exposed" / "agg_exposed", the part of Trans / Agg no compute
    // hid (IterationResult::kind_exposed_s); the report sets them beside the run's recorded ops
    std::map<std::string, double> kind_ms;
};

// Rebuilds the trace of a finished train run from its expert_load rows (every step and layer; dims from its
// model.* params), simulates it with `policy` on the cluster file (num_devices = the run's D, its schedule) and
// compares with the run's step_ms. Throws prophet::Error (exit 3) when the run recorded too few steps or no loads,
// or when it ran oversubscribed (param testbed.oversubscribed = true) and include_oversubscribed is false.
Validation validate_run(Store& store, const std::string& run_id, const std::string& policy,
                        const std::string& cluster_path, bool include_oversubscribed = false);

}  // namespace prophet::sweep
