// validation_runs.h: the per-op replay validation of runs in a store as one report, shared by `prophet validate`
// and a real sweep after its last point (docs/sweep.md "Validation"): each run loaded and replayed
// (validation.h), the summary as the JSON report `prophet validate --json` prints, and the report recorded as a
// validation run (report/fig_validation_replay.py draws the newest).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/validation.h"
#include "store/store.h"

namespace prophet::sim {

struct RunToValidate {
    std::string run_id;
    const OpTables* tables = nullptr;  // kOpModel: the [ops] tables to replay the run with; nullptr for kRecorded
    bool optional = false;  // a run that cannot be loaded (no timeline) is excluded with a note instead of thrown
    int held_out = -1;      // -1: decided by the tables' calibrated_on (validation.h); 0 / 1: the caller knows
                            // (a sweep's [sweep.calibrate_set] holds the calibration config out of every point)
};

struct StoredValidation {
    ValidationSummary summary;
    std::vector<std::string> excluded;  // "<run id>: <why>" per run left out
};

// Validates each run in order. Runs recorded oversubscribed (testbed.oversubscribed) are excluded unless
// include_oversubscribed. Throws an input error naming `where` when no run is left.
StoredValidation validate_stored_runs(Store& store, const std::vector<RunToValidate>& runs, ReplaySource source,
                                      bool include_oversubscribed, const std::string& where);

// The report: {"replay": source, "cluster", "calibrated_on", "points": [...], "excluded": [...], "total": {...}}.
nlohmann::json validation_report_json(const StoredValidation& v, const std::string& source, const std::string& cluster,
                                      const std::string& calibrated_on);

// Records the validation as a run: command validate, experiment validation (info carries the git sha, hardware and
// version); params validate.replay, validate.point.<i> = run id and `extra_params` (TOML values); per point i
// (step = i) measured_step_ms, sim_step_ms, error, held_out; totals mape, bias, heldout_mape, kendall_tau (step 0);
// the report as one `validation` event. Returns the run id.
std::string record_validation(Store& store, RunInfo info, const ValidationSummary& summary, const nlohmann::json& report,
                              const std::string& source,
                              const std::vector<std::pair<std::string, std::string>>& extra_params = {});

}  // namespace prophet::sim
