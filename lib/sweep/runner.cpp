// runner.cpp: the resumable point loop of `prophet sweep`: skips the points the store has finished, runs the
// others through their engine and records each as one run in one transaction.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/names.h"
#include "core/process.h"
#include "core/sha256.h"
#include "core/timer.h"
#include "sweep/claims.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep {

namespace fs = std::filesystem;

namespace {

// The hashes of the points the store holds finished (command sweep, this sweep's name). Engine real: also the
// median step time of each finished static point into static_ms (coordinates_key -> ms), so that a resumed sweep,
// or one sharing the store with another, still pairs its points with the static points finished elsewhere.
std::set<std::string> finished_points(Store& store, const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                      std::map<std::string, double>& static_ms) {
    std::set<std::string> done;
    std::map<std::string, std::string> done_runs;  // config_hash -> run_id
    for (const RunRow& row : store.list_runs(spec.name))
        if (row.info.command == "sweep" && row.status == "finished") {
            done.insert(row.info.config_hash);
            done_runs.emplace(row.info.config_hash, row.run_id);
        }
    if (spec.engine == "real")
        for (const SweepPoint& p : points)
            if (p.policy == "static" && done_runs.count(p.hash) && !static_ms.count(coordinates_key(p)))
                for (const MetricRow& m : store.get_metrics(done_runs[p.hash], "median_step_ms"))
                    static_ms[coordinates_key(p)] = m.value;
    return done;
}

// "stopped by signal 15 (Terminated)"
std::string stopped_by(int signal_number) {
    return "stopped by signal " + std::to_string(signal_number) + " (" + strsignal(signal_number) + ")";
}

void log_line(const SweepOptions& options, const std::string& line) {
    if (options.log) options.log(line);
}

// A cluster file to validate a real point against: `path` ("" when none), or why making it failed (`error`).
struct ValidationCluster {
    std::string path, error;
};
using CalibrationCache = std::map<std::string, ValidationCluster>;  // (ranks, grid values) -> calibrated cluster

// What a sweep carries from point to point.
struct SweepState {
    std::optional<Store> store;
    std::set<std::string> done;               // hashes of the points the store holds finished
    std::map<std::string, double> static_ms;  // engine real: coordinates_key -> the static point's median_step_ms
    CalibrationCache calibrated;
};

}  // namespace
using detail::calibrate_cluster;
using detail::calibration_description;
using detail::format_seconds;
using detail::kExitTimeout;
using detail::kKillGraceSeconds;
using detail::launch_point;
using detail::child_summary;
using detail::quoted;
using detail::resolve_path;

std::string format_duration(double seconds) {
    if (seconds < 0) seconds = 0;
    const long s = static_cast<long>(seconds + 0.5);
    char buffer[64];
    if (s >= 3600)
        std::snprintf(buffer, sizeof buffer, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    else if (s >= 60)
        std::snprintf(buffer, sizeof buffer, "%ldm%02lds", s / 60, s % 60);
    else
        std::snprintf(buffer, sizeof buffer, "%lds", s);
    return buffer;
}

namespace {

// The cluster a real point is validated against. validate_cluster = "calibrate": one calibration per (ranks, grid
// values), made before the first such point (with [sweep.calibrate_set] one per rank count serves every grid point).
ValidationCluster validation_cluster(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options,
                                     CalibrationCache& calibrated) {
    ValidationCluster out;
    out.path = spec.validate_cluster.empty() ? "" : resolve_path(spec, spec.validate_cluster);
    if (spec.validate_cluster != kCalibrate) return out;
    const std::string key =
        std::to_string(p.ranks) + "\n" + canonical_text(spec.calibrate_set.empty() ? p.grid : KeyValues{});
    if (!calibrated.count(key)) {
        ValidationCluster c;
        check_file_name("sweep.name", spec.name);
        const fs::path store_dir = fs::path(options.store_path).parent_path();
        c.path = (store_dir / "clusters" /
                  (spec.name + "-" + std::to_string(p.ranks) + "rank" +
                   (p.grid.empty() ? "" : "-" + sha256_hex(key).substr(0, 8)) + ".toml"))
                     .string();
        try {
            calibrate_cluster(spec, p, options, c.path);
            log_line(options, "calibrated " + std::to_string(p.ranks) + " rank(s) for validation: " + c.path);
        } catch (const Error& e) {
            c.error = std::string("calibration failed: ") + e.what();
            log_line(options, c.error);
        }
        calibrated.emplace(key, c);
    }
    return calibrated[key];
}

// How a real point's child ended: its summary, or the error, exit code and status to record.
struct ChildOutcome {
    std::string error, status = "failed";
    int exit_code = 0;
    nlohmann::json summary;
};

ChildOutcome read_child(const SweepSpec& spec, const ChildResult& child) {
    ChildOutcome out;
    out.exit_code = child.exit_code;
    if (child.timed_out) {
        out.error = "timeout: the point ran past time_limit_s = " + format_seconds(spec.time_limit_s) +
                    " and was stopped (SIGTERM to its process group, SIGKILL " + format_seconds(kKillGraceSeconds) +
                    " s later)";
        out.exit_code = kExitTimeout;
    } else if (const int stop = StopSignalForwarder::received()) {
        out.error = "the sweep was " + stopped_by(stop) + " while the point ran";
        out.exit_code = 128 + stop;
        out.status = "killed";
    } else if (child.exit_code == 0) {
        try {
            out.summary = child_summary(child.out);
        } catch (const Error& e) {
            out.error = e.what();
            out.exit_code = e.exit_code();
        }
    } else {
        const std::string line = last_line(child.err);
        out.error =
            "prophet train exited with code " + std::to_string(child.exit_code) + (line.empty() ? "" : ": " + line);
    }
    return out;
}

// The simulator's figures for a finished real point, or why they are absent (`error`, "" when not asked for).
struct PointValidation {
    std::optional<Validation> validation;
    std::string error;
};

// Validates the child run against the point's cluster; names that cluster (and the calibration) in params.
PointValidation validate_point(Store& store, const SweepSpec& spec, const SweepPoint& p, const std::string& child_id,
                               const ValidationCluster& cluster, KeyValues& params) {
    PointValidation out;
    out.error = cluster.error;
    if (spec.validate_cluster.empty() || !out.error.empty()) return out;
    params.emplace_back("validate_cluster", quoted(cluster.path));
    if (spec.validate_cluster == kCalibrate)  // what the calibration ran (the report names it)
        params.emplace_back("validate_calibrated_on", quoted(calibration_description(spec, p)));
    try {
        out.validation = validate_run(store, child_id, p.policy, cluster.path, spec.validate_oversubscribed);
    } catch (const Error& e) {
        if (e.exit_code() == kExitDatabase) throw;
        out.error = e.what();
    }
    return out;
}

// Records a finished real point in one transaction: its params, the child's headline figures, the speedup over
// the static point at the same coordinates (when known) and the validation figures; returns its run id.
std::string record_real_point(Store& store, const RunInfo& info, const KeyValues& params, const nlohmann::json& s,
                              std::optional<double> speedup_vs_static, const std::optional<Validation>& validation) {
    std::string run_id;
    store.transaction([&] {
        run_id = store.begin_run(info);
        store.put_params(run_id, params);
        for (const char* k : {"median_step_ms", "median_tokens_per_s", "median_max_mean_load", "final_loss"})
            store.put_metric(run_id, k, 0, s.value(k, 0.0));
        if (speedup_vs_static) store.put_metric(run_id, "speedup_vs_static", 0, *speedup_vs_static);
        if (validation) {
            store.put_metric(run_id, "sim_step_ms", 0, validation->sim_step_ms);
            store.put_metric(run_id, "measured_step_ms", 0, validation->measured_step_ms);
            store.put_metric(run_id, "sim_error", 0, validation->sim_error);
            for (const auto& [kind, ms] : validation->kind_ms) store.put_metric(run_id, "sim_kind_ms." + kind, 0, ms);
        }
        store.finish_run(run_id, "finished", 0, "");
    });
    return run_id;
}

// Records a point that did not finish (status "failed" or "killed") with its exit code and error; returns its run id.
std::string record_unfinished_point(Store& store, const RunInfo& info, const KeyValues& params,
                                    const std::string& status, int exit_code, const std::string& error) {
    std::string run_id;
    store.transaction([&] {
        run_id = store.begin_run(info);
        store.put_params(run_id, params);
        store.finish_run(run_id, status, exit_code, error);
    });
    return run_id;
}

// "12.3 ms (sim 11.9 ms vs measured 12.3 ms: -3.2%)"
std::string real_status_text(double step_ms, const PointValidation& v) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.4g ms", step_ms);
    std::string text = buffer;
    if (v.validation) {
        std::snprintf(buffer, sizeof buffer, " (sim %.4g ms vs measured %.4g ms: %+.1f%%)", v.validation->sim_step_ms,
                      v.validation->measured_step_ms, v.validation->sim_error * 100);
        text += buffer;
    } else if (!v.error.empty()) {
        text += " (validation skipped: " + v.error + ")";
    }
    return text;
}

// A real point whose child finished: pairs it with its static point, validates it and records it.
std::string record_finished_child(SweepState& state, const SweepSpec& spec, const SweepPoint& p, const RunInfo& info,
                                  const nlohmann::json& s, const ValidationCluster& cluster, SweepSummary& summary) {
    Store& store = *state.store;
    const double step_ms = s.value("median_step_ms", 0.0);
    const std::string key = coordinates_key(p);
    if (p.policy == "static") state.static_ms[key] = step_ms;
    KeyValues params = p.params;
    const std::string child_id = s.value("run_id", std::string());
    params.emplace_back("child_run_id", quoted(child_id));
    // the child's machine record (docs/testbed.md), so figures can filter points by it
    for (const auto& [k, v] : store.get_params(child_id))
        if (k == "testbed.oversubscribed" || k == "testbed.busy_machine" || k == "testbed.load1")
            params.emplace_back(k, v);
    const PointValidation v = validate_point(store, spec, p, child_id, cluster, params);
    std::optional<double> speedup;
    if (state.static_ms.count(key) && step_ms > 0) speedup = state.static_ms[key] / step_ms;
    summary.run_ids.push_back(record_real_point(store, info, params, s, speedup, v.validation));
    ++summary.ran;
    return real_status_text(step_ms, v);
}

// Engine real: the point runs as a child process that records its own run; this records the point's run.
// Returns the text of the point's progress line.
std::string run_real_point(SweepState& state, const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options,
                           RunInfo info, SweepSummary& summary) {
    info.world_size = p.ranks;
    // the child records its own run: hold no connection to the store while it writes
    state.store.reset();
    const ValidationCluster cluster = validation_cluster(spec, p, options, state.calibrated);
    const ChildResult child = launch_point(spec, p, options);
    state.store.emplace(Store::open(options.store_path));
    const ChildOutcome outcome = read_child(spec, child);
    if (outcome.error.empty()) return record_finished_child(state, spec, p, info, outcome.summary, cluster, summary);
    summary.run_ids.push_back(
        record_unfinished_point(*state.store, info, p.params, outcome.status, outcome.exit_code, outcome.error));
    ++summary.failed;
    return outcome.status + ": " + outcome.error;
}

// Engines sim and model: the point runs in this process; records it. Returns the text of its progress line.
std::string run_simulated_point(Store& store, const SweepSpec& spec, const SweepPoint& p, RunInfo info,
                                SweepSummary& summary) {
    try {
        const detail::SimulatedPoint r = detail::run_simulated_point(spec, p);
        info.world_size = r.world_size;
        std::string run_id;
        store.transaction([&] {
            run_id = store.begin_run(info);
            store.put_params(run_id, p.params);
            for (const detail::Metric& m : r.metrics) store.put_metric(run_id, m.key, m.step, m.value, m.layer);
            store.finish_run(run_id, "finished", 0, "");
        });
        summary.run_ids.push_back(run_id);
        ++summary.ran;
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%.4g ms", r.headline_ms);
        return buffer;
    } catch (const Error& e) {
        if (e.exit_code() == kExitDatabase) throw;
        summary.run_ids.push_back(record_unfinished_point(store, info, p.params, "failed", e.exit_code(), e.what()));
        ++summary.failed;
        return std::string("failed: ") + e.what();
    }
}

// The run record of one point, before its engine fills in the world size.
RunInfo point_run_info(const SweepSpec& spec, const SweepOptions& options, const SweepPoint& p) {
    RunInfo info = options.base;
    info.experiment = spec.name;
    info.command = "sweep";
    info.config_toml = p.canonical;
    info.config_hash = p.hash;
    info.seed = p.seed;
    info.backend = spec.engine == "sim" ? "sim" : spec.engine == "model" ? "model" : "real";
    info.simulated = spec.engine == "sim";
    return info;
}

// --dry-run: one line per point, saying which the store already holds.
void log_dry_run(const std::vector<SweepPoint>& points, const std::set<std::string>& done,
                 const SweepOptions& options) {
    for (const SweepPoint& p : points) {
        std::string line = "[";  // appended apart: GCC 12 warns (-Wrestrict, falsely) on "[" + std::string&&
        line += std::to_string(p.index + 1) + "/" + std::to_string(points.size()) + "] " + p.description;
        if (done.count(p.hash)) line += " (already done)";
        log_line(options, line);
    }
}

// Whether --points selects the point (no --points: every point).
bool selected(const SweepOptions& options, const SweepPoint& p) {
    return options.only_points.empty() ||
           std::find(options.only_points.begin(), options.only_points.end(), p.index + 1) != options.only_points.end();
}

// The error that ends a sweep stopped by `signal_number`, `where` it stopped ("before point 3 of 8").
Error stopped_error(int signal_number, const std::string& where) {
    return Error(128 + signal_number, "prophet sweep: " + stopped_by(signal_number) + " " + where +
                                          "; fix: run the same command again to resume");
}

// The sweep's state at its start: the store (unless a dry run finds none) and the points it holds finished.
SweepState open_sweep(const SweepSpec& spec, const std::vector<SweepPoint>& points, const SweepOptions& options,
                      SweepSummary& summary) {
    SweepState state;
    std::error_code ec;
    if (fs::exists(options.store_path, ec) || !options.dry_run) {
        state.store.emplace(Store::open(options.store_path));
        state.done = finished_points(*state.store, spec, points, state.static_ms);
    }
    for (const SweepPoint& p : points)
        if (state.done.count(p.hash)) ++summary.already_done;
    return state;
}

// Whether another sweep finished the point since this one looked (reopening the store a real point closed).
bool finished_elsewhere(SweepState& state, const SweepSpec& spec, const std::vector<SweepPoint>& points,
                        const SweepOptions& options, const SweepPoint& p) {
    if (!state.store) state.store.emplace(Store::open(options.store_path));
    return finished_points(*state.store, spec, points, state.static_ms).count(p.hash) > 0;
}

// After the points: the per-op replay validation of every finished point's child (held out), then a check that
// every run this sweep recorded is there for others.
void finish_sweep(SweepState& state, const SweepSpec& spec, const std::vector<SweepPoint>& points,
                  const SweepOptions& options, SweepSummary& summary) {
    if (spec.engine == "real" && state.store && summary.ran > 0 && !spec.validate_cluster.empty())
        summary.validation_run_id = detail::replay_validate_points(*state.store, spec, points, options);
    if (state.store) {
        std::vector<std::string> recorded = summary.run_ids;
        if (!summary.validation_run_id.empty()) recorded.push_back(summary.validation_run_id);
        require_recorded(*state.store, recorded, "sweep " + spec.name);
        state.store->checkpoint();
    }
}

// The loop's progress: the points left when it started, and the ones run so far with their seconds (the ETA).
struct PointLoopProgress {
    int todo = 0;
    int ran_or_failed = 0;
    double run_seconds = 0;
};

// Runs one claimed point and logs its line with the ETA; a stop signal that came during it stops the sweep.
void run_claimed_point(SweepState& state, const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options,
                       const std::string& prefix, PointLoopProgress& progress, SweepSummary& summary) {
    const int64_t started = now_ns();
    const RunInfo info = point_run_info(spec, options, p);
    const std::string status_text = spec.engine == "real" ? run_real_point(state, spec, p, options, info, summary)
                                                          : run_simulated_point(*state.store, spec, p, info, summary);
    ++progress.ran_or_failed;
    progress.run_seconds += (now_ns() - started) * 1e-9;
    const double eta =
        progress.run_seconds / progress.ran_or_failed * std::max(0, progress.todo - progress.ran_or_failed);
    log_line(options, prefix + ": " + status_text + " ETA " + format_duration(eta));
    if (const int stop = StopSignalForwarder::received()) {
        if (state.store) state.store->checkpoint();
        throw stopped_error(
            stop, "after recording point " + std::to_string(p.index + 1) + " of " + std::to_string(summary.points));
    }
}

}  // namespace

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options) {
    const std::vector<SweepPoint> points = expand_points(spec);
    SweepSummary summary;
    summary.points = static_cast<int>(points.size());
    SweepState state = open_sweep(spec, points, options, summary);
    if (options.dry_run) {
        log_dry_run(points, state.done, options);
        return summary;
    }
    const int n = summary.points;
    PointLoopProgress progress{n - summary.already_done};
    // claims: a point runs in one sweep at a time, and a point another sweep finished meanwhile is skipped
    PointClaims claims(options.store_path);
    // SIGTERM / SIGINT: forwarded to the point's child; the point in flight is recorded, then the sweep stops
    const StopSignalForwarder forwarder;
    for (const SweepPoint& p : points) {
        const std::string prefix = "[" + std::to_string(p.index + 1) + "/" + std::to_string(n) + "] " + p.description;
        if (!selected(options, p)) continue;
        if (state.done.count(p.hash)) {
            ++summary.skipped;
            log_line(options, prefix + ": skipped: already done");
            continue;
        }
        if (options.max_points >= 0 && progress.ran_or_failed >= options.max_points) break;
        if (const int stop = StopSignalForwarder::received())  // came between points: start no other
            throw stopped_error(stop, "before point " + std::to_string(p.index + 1) + " of " + std::to_string(n));
        if (!claims.try_claim(spec.name, p.hash)) {
            ++summary.claimed_elsewhere;
            log_line(options, prefix + ": skipped: another running sweep has claimed it (" + claims.path() + ")");
            continue;
        }
        struct Release {  // the claim ends once the point is recorded (or on an exception)
            PointClaims& claims;
            const std::string &experiment, &hash;
            ~Release() { claims.release(experiment, hash); }
        } release{claims, spec.name, p.hash};
        if (finished_elsewhere(state, spec, points, options, p)) {
            ++summary.skipped;
            log_line(options, prefix + ": skipped: finished by another sweep");
            continue;
        }
        run_claimed_point(state, spec, p, options, prefix, progress, summary);
    }
    finish_sweep(state, spec, points, options, summary);
    return summary;
}

}  // namespace prophet::sweep
