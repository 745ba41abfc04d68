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

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options) {
    const std::vector<SweepPoint> points = expand_points(spec);
    SweepSummary summary;
    summary.points = static_cast<int>(points.size());
    auto log = [&](const std::string& line) {
        if (options.log) options.log(line);
    };

    const bool real = spec.engine == "real";
    std::set<std::string> done;
    std::map<std::string, double> static_ms;  // engine real: coordinates_key -> the static point's median_step_ms
    std::error_code ec;
    const bool store_exists = fs::exists(options.store_path, ec);
    std::optional<Store> store;
    if (store_exists || !options.dry_run) {
        store.emplace(Store::open(options.store_path));
        done = finished_points(*store, spec, points, static_ms);
    }
    for (const SweepPoint& p : points)
        if (done.count(p.hash)) ++summary.already_done;
    if (options.dry_run) {
        for (const SweepPoint& p : points)
            log("[" + std::to_string(p.index + 1) + "/" + std::to_string(points.size()) + "] " + p.description +
                (done.count(p.hash) ? " (already done)" : ""));
        return summary;
    }

    // validate_cluster = "calibrate": one calibration per (ranks, grid values), made before the first such point
    struct Calibrated {
        std::string path, error;
    };
    std::map<std::string, Calibrated> calibrated;
    const fs::path store_dir = fs::path(options.store_path).parent_path();
    const int n = summary.points;
    const int todo = n - summary.already_done;
    double run_seconds = 0;
    int ran_or_failed = 0;
    // claims: a point runs in one sweep at a time, and a point another sweep finished meanwhile is skipped
    PointClaims claims(options.store_path);
    // SIGTERM / SIGINT: forwarded to the point's child; the point in flight is recorded, then the sweep stops
    const StopSignalForwarder forwarder;
    for (const SweepPoint& p : points) {
        if (!options.only_points.empty() &&
            std::find(options.only_points.begin(), options.only_points.end(), p.index + 1) == options.only_points.end())
            continue;
        const std::string prefix = "[" + std::to_string(p.index + 1) + "/" + std::to_string(n) + "] " + p.description;
        if (done.count(p.hash)) {
            ++summary.skipped;
            log(prefix + ": skipped: already done");
            continue;
        }
        if (options.max_points >= 0 && ran_or_failed >= options.max_points) break;
        if (const int stop = StopSignalForwarder::received())  // came between points: start no other
            throw Error(128 + stop, "prophet sweep: " + stopped_by(stop) + " before point " +
                                        std::to_string(p.index + 1) + " of " + std::to_string(n) +
                                        "; fix: run the same command again to resume");
        if (!claims.try_claim(spec.name, p.hash)) {
            ++summary.claimed_elsewhere;
            log(prefix + ": skipped: another running sweep has claimed it (" + claims.path() + ")");
            continue;
        }
        struct Release {  // the claim ends once the point is recorded (or on an exception)
            PointClaims& claims;
            const std::string &experiment, &hash;
            ~Release() { claims.release(experiment, hash); }
        } release{claims, spec.name, p.hash};
        if (!store) store.emplace(Store::open(options.store_path));
        if (finished_points(*store, spec, points, static_ms).count(p.hash)) {  // by another sweep, since we looked
            ++summary.skipped;
            log(prefix + ": skipped: finished by another sweep");
            continue;
        }
        const int64_t started = now_ns();
        RunInfo info = options.base;
        info.experiment = spec.name;
        info.command = "sweep";
        info.config_toml = p.canonical;
        info.config_hash = p.hash;
        info.seed = p.seed;
        info.backend = spec.engine == "sim" ? "sim" : spec.engine == "model" ? "model" : "real";
        info.simulated = spec.engine == "sim";
        std::string run_id, status_text;
        if (real) {
            info.world_size = p.ranks;
            // the child records its own run: hold no connection to the store while it writes
            store.reset();
            std::string validate_path = spec.validate_cluster.empty() ? "" : resolve_path(spec, spec.validate_cluster);
            std::string calibration_error;
            if (spec.validate_cluster == kCalibrate) {
                // with [sweep.calibrate_set] one calibration per rank count serves every grid point
                const std::string key =
                    std::to_string(p.ranks) + "\n" + canonical_text(spec.calibrate_set.empty() ? p.grid : KeyValues{});
                if (!calibrated.count(key)) {
                    Calibrated c;
                    check_file_name("sweep.name", spec.name);
                    c.path = (store_dir / "clusters" /
                              (spec.name + "-" + std::to_string(p.ranks) + "rank" +
                               (p.grid.empty() ? "" : "-" + sha256_hex(key).substr(0, 8)) + ".toml"))
                                 .string();
                    try {
                        calibrate_cluster(spec, p, options, c.path);
                        log("calibrated " + std::to_string(p.ranks) + " rank(s) for validation: " + c.path);
                    } catch (const Error& e) {
                        c.error = std::string("calibration failed: ") + e.what();
                        log(c.error);
                    }
                    calibrated.emplace(key, c);
                }
                validate_path = calibrated[key].path;
                calibration_error = calibrated[key].error;
            }
            const ChildResult child = launch_point(spec, p, options);
            store.emplace(Store::open(options.store_path));
            std::string error;
            int exit_code = child.exit_code;
            std::string status = "failed";
            nlohmann::json s;
            if (child.timed_out) {
                error = "timeout: the point ran past time_limit_s = " + format_seconds(spec.time_limit_s) +
                        " and was stopped (SIGTERM to its process group, SIGKILL " +
                        format_seconds(kKillGraceSeconds) + " s later)";
                exit_code = kExitTimeout;
            } else if (const int stop = StopSignalForwarder::received()) {
                error = "the sweep was " + stopped_by(stop) + " while the point ran";
                exit_code = 128 + stop;
                status = "killed";
            } else if (child.exit_code == 0) {
                try {
                    s = child_summary(child.out);
                } catch (const Error& e) {
                    error = e.what();
                    exit_code = e.exit_code();
                }
            } else {
                const std::string line = last_line(child.err);
                error = "prophet train exited with code " + std::to_string(child.exit_code) +
                        (line.empty() ? "" : ": " + line);
            }
            if (error.empty()) {
                const double step_ms = s.value("median_step_ms", 0.0);
                const std::string key = coordinates_key(p);
                if (p.policy == "static") static_ms[key] = step_ms;
                KeyValues params = p.params;
                const std::string child_id = s.value("run_id", std::string());
                params.emplace_back("child_run_id", quoted(child_id));
                // the child's machine record (docs/testbed.md), so figures can filter points by it
                for (const auto& [k, v] : store->get_params(child_id))
                    if (k == "testbed.oversubscribed" || k == "testbed.busy_machine" || k == "testbed.load1")
                        params.emplace_back(k, v);
                std::optional<Validation> validation;
                std::string validation_error = calibration_error;
                if (!spec.validate_cluster.empty() && validation_error.empty()) {
                    params.emplace_back("validate_cluster", quoted(std::as_const(validate_path)));
                    if (spec.validate_cluster == kCalibrate)  // what the calibration ran (the report names it)
                        params.emplace_back("validate_calibrated_on", quoted(calibration_description(spec, p)));
                    try {
                        validation = validate_run(*store, child_id, p.policy, validate_path,
                                                  spec.validate_oversubscribed);
                    } catch (const Error& e) {
                        if (e.exit_code() == kExitDatabase) throw;
                        validation_error = e.what();
                    }
                }
                store->transaction([&] {
                    run_id = store->begin_run(info);
                    store->put_params(run_id, params);
                    for (const char* k : {"median_step_ms", "median_tokens_per_s", "median_max_mean_load",
                                          "final_loss"})
                        store->put_metric(run_id, k, 0, s.value(k, 0.0));
                    if (static_ms.count(key) && step_ms > 0)
                        store->put_metric(run_id, "speedup_vs_static", 0, static_ms[key] / step_ms);
                    if (validation) {
                        store->put_metric(run_id, "sim_step_ms", 0, validation->sim_step_ms);
                        store->put_metric(run_id, "measured_step_ms", 0, validation->measured_step_ms);
                        store->put_metric(run_id, "sim_error", 0, validation->sim_error);
                        for (const auto& [kind, ms] : validation->kind_ms)
                            store->put_metric(run_id, "sim_kind_ms." + kind, 0, ms);
                    }
                    store->finish_run(run_id, "finished", 0, "");
                });
                ++summary.ran;
                char buffer[64];
                std::snprintf(buffer, sizeof buffer, "%.4g ms", step_ms);
                status_text = buffer;
                if (validation) {
                    std::snprintf(buffer, sizeof buffer, " (sim %.4g ms vs measured %.4g ms: %+.1f%%)",
                                  validation->sim_step_ms, validation->measured_step_ms,
                                  validation->sim_error * 100);
                    status_text += buffer;
                } else if (!validation_error.empty()) {
                    status_text += " (validation skipped: " + validation_error + ")";
                }
            } else {
                store->transaction([&] {
                    run_id = store->begin_run(info);
                    store->put_params(run_id, p.params);
                    store->finish_run(run_id, status, exit_code, error);
                });
                ++summary.failed;
                status_text = status + ": " + error;
            }
        } else {
            try {
                const detail::SimulatedPoint r = detail::run_simulated_point(spec, p);
                info.world_size = r.world_size;
                const double headline_ms = r.headline_ms;
                const std::vector<detail::Metric>& metrics = r.metrics;
                store->transaction([&] {
                    run_id = store->begin_run(info);
                    store->put_params(run_id, p.params);
                    for (const detail::Metric& m : metrics) store->put_metric(run_id, m.key, m.step, m.value, m.layer);
                    store->finish_run(run_id, "finished", 0, "");
                });
                ++summary.ran;
                char buffer[64];
                std::snprintf(buffer, sizeof buffer, "%.4g ms", headline_ms);
                status_text = buffer;
            } catch (const Error& e) {
                if (e.exit_code() == kExitDatabase) throw;
                store->transaction([&] {
                    run_id = store->begin_run(info);
                    store->put_params(run_id, p.params);
                    store->finish_run(run_id, "failed", e.exit_code(), e.what());
                });
                ++summary.failed;
                status_text = std::string("failed: ") + e.what();
            }
        }
        summary.run_ids.push_back(run_id);
        ++ran_or_failed;
        run_seconds += (now_ns() - started) * 1e-9;
        const double eta = run_seconds / ran_or_failed * std::max(0, todo - ran_or_failed);
        log(prefix + ": " + status_text + " ETA " + format_duration(eta));
        if (const int stop = StopSignalForwarder::received()) {
            if (store) store->checkpoint();
            throw Error(128 + stop, "prophet sweep: " + stopped_by(stop) + " after recording point " +
                                        std::to_string(p.index + 1) + " of " + std::to_string(n) +
                                        "; fix: run the same command again to resume");
        }
    }
    // the per-op replay validation of every finished point's child (held out), once the points this run added are in
    if (real && store && summary.ran > 0 && !spec.validate_cluster.empty())
        summary.validation_run_id = detail::replay_validate_points(*store, spec, points, options);
    if (store) {
        std::vector<std::string> recorded = summary.run_ids;  // every point this sweep recorded is there for others
        if (!summary.validation_run_id.empty()) recorded.push_back(summary.validation_run_id);
        require_recorded(*store, recorded, "sweep " + spec.name);
        store->checkpoint();
    }
    return summary;
}

}  // namespace prophet::sweep
