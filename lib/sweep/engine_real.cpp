// engine_real.cpp: engine "real": the command line of a point's `prophet train` (or `prophet profile
// --inference`) child, the calibration child of validate_cluster = "calibrate", and the child's summary line.
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "core/process.h"
#include "core/testbed.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep::detail {

namespace {

// The start of a child's command line: mpirun for several ranks (core/testbed.h), then the prophet binary.
std::vector<std::string> child_launcher(int ranks, const SweepOptions& options) {
    // one rank pinned per core, or --oversubscribe unpinned when ranks outnumber cores (docs/testbed.md)
    std::vector<std::string> cmd = mpirun_launcher(ranks, usable_cores());
    cmd.push_back(options.prophet_binary.empty() ? self_binary() : options.prophet_binary);
    return cmd;
}

// Appends to cmd the --set assignments every child of point p gets, each as "--set" "key=value": the store, the
// experiment (the sweep's name; the calibration's extra recordings have their own), the seed (and the policy), then
// [sweep.set] and the grid values (the point's, or the calibration's). Strings are TOML string literals: a bare 2024
// or true would be read as a number or a bool, and a path may hold any character.
void append_child_sets(std::vector<std::string>& cmd, const SweepSpec& spec, const SweepPoint& p,
                       const SweepOptions& options, bool with_policy, const KeyValues& grid,
                       const std::string& experiment) {
    std::vector<std::string> sets = {"store.path=" + quoted(options.store_path), "run.experiment=" + quoted(experiment),
                                     "run.seed=" + std::to_string(p.seed)};
    if (with_policy) sets.push_back("balance.policy=" + quoted(p.policy));
    for (const auto& [k, v] : spec.set) sets.push_back(k + "=" + v);  // canonical TOML text already
    for (const auto& [k, v] : grid) sets.push_back(k + "=" + v);
    for (std::string& kv : sets) {
        cmd.push_back("--set");
        cmd.push_back(std::move(kv));
    }
}

}  // namespace

std::vector<std::string> child_command(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options) {
    std::vector<std::string> cmd = child_launcher(p.ranks, options);
    const std::vector<const char*> sub = spec.command == "infer"
                                             ? std::vector<const char*>{"profile", "--inference", "--config"}
                                             : std::vector<const char*>{"train", "--config"};
    for (const char* a : sub) cmd.push_back(a);
    cmd.push_back(resolve_path(spec, spec.train_config));
    cmd.push_back("--json");
    // validation: the child records every op (its store rows are written after the step's time is taken), so the
    // sweep can replay it with the per-op model after the last point (validate_replay.cpp)
    if (spec.command == "train" && !spec.validate_cluster.empty()) cmd.push_back("--timeline");
    append_child_sets(cmd, spec, p, options, /*with_policy=*/true, p.grid, spec.name);
    return cmd;
}

std::string format_seconds(double seconds) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", seconds);
    return buffer;
}

ChildResult launch(const SweepSpec& spec, const SweepOptions& options, const std::vector<std::string>& command) {
    ChildOptions limits;
    limits.time_limit_s = spec.time_limit_s;
    limits.kill_grace_s = kKillGraceSeconds;
    return options.launcher ? options.launcher(command, limits) : run_child(command, limits);
}

ChildResult launch_point(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options) {
    return launch(spec, options, child_command(spec, p, options));
}

namespace {

// The last line of a child's stdout that is a JSON object for which keep() holds; null when there is none.
template <class Keep>
nlohmann::json last_json_line(const std::string& out, Keep keep) {
    std::istringstream lines(out);
    nlohmann::json last;
    for (std::string line; std::getline(lines, line);) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && keep(j)) last = std::move(j);
    }
    return last;
}

// The child's run id: the last JSON object line of its stdout holding one (prophet profile --json prints no
// summary flag); throws when there is none.
std::string child_run_id(const std::string& out, const char* what) {
    const nlohmann::json j =
        last_json_line(out, [](const nlohmann::json& o) { return o.contains("run_id") && o["run_id"].is_string(); });
    const std::string run_id = j.is_null() ? std::string() : j["run_id"].get<std::string>();
    if (run_id.empty()) throw Error(kExitRunFailed, std::string(what) + " exited 0 but printed no run_id");
    return run_id;
}

// A calibration child's outcome as an Error naming the command, or its run id.
std::string calibration_child(const SweepSpec& spec, const SweepOptions& options, const std::vector<std::string>& cmd,
                              const char* what) {
    const ChildResult child = launch(spec, options, cmd);
    if (child.timed_out)
        throw Error(kExitTimeout, std::string(what) + " ran past time_limit_s = " + format_seconds(spec.time_limit_s) +
                                      " and was stopped");
    if (child.exit_code != 0) {
        const std::string line = last_line(child.err);
        throw Error(child.exit_code, std::string(what) + " exited with code " + std::to_string(child.exit_code) +
                                         (line.empty() ? "" : ": " + line));
    }
    return child_run_id(child.out, what);
}

}  // namespace

void calibrate_cluster(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options,
                       const std::string& out) {
    // the calibration config: the point's, with [sweep.calibrate_set] in place of its grid values (held out: no
    // validated point is the calibrated one); the extra recordings under their own experiment name (the sweep's
    // replay validates the runs of the sweep's name only)
    const KeyValues& grid = spec.calibrate_set.empty() ? p.grid : spec.calibrate_set;
    std::vector<std::string> profile = child_launcher(p.ranks, options);
    for (const std::string& a : {std::string("profile"), std::string("--config"), resolve_path(spec, spec.train_config),
                                 std::string("--calibrate"), std::string("--json"), std::string("--cluster-out"), out})
        profile.push_back(a);
    if (spec.calibrate_grid_passes > 0)
        for (const std::string& a : {std::string("--grid-passes"), std::to_string(spec.calibrate_grid_passes)})
            profile.push_back(a);
    append_child_sets(profile, spec, p, options, /*with_policy=*/false, grid, spec.name);
    std::vector<std::string> run_ids = {calibration_child(spec, options, profile, "prophet profile --calibrate")};
    std::vector<std::string> record = child_launcher(p.ranks, options);
    for (const std::string& a : {std::string("train"), std::string("--config"), resolve_path(spec, spec.train_config),
                                 std::string("--json"), std::string("--timeline")})
        record.push_back(a);
    append_child_sets(record, spec, p, options, /*with_policy=*/false, grid, spec.name + "-calibration");
    while (run_ids.size() < static_cast<size_t>(kCalibrationRecordings))
        run_ids.push_back(
            calibration_child(spec, options, record, "the calibration config's recording (prophet train)"));
    refit_calibration_pooled(options.store_path, out, run_ids);
}

std::string calibration_description(const SweepSpec& spec, const SweepPoint& p) {
    std::string out = std::to_string(p.ranks) + " ranks, ";
    if (spec.calibrate_set.empty()) return out + "same config as the point";
    out += "held out:";
    for (const auto& [k, v] : spec.calibrate_set) out += " " + k + "=" + v;
    return out;
}

// The child's final {"summary": true, ...} line of stdout; throws when there is none.
nlohmann::json child_summary(const std::string& out) {
    nlohmann::json summary = last_json_line(out, [](const nlohmann::json& o) { return o.value("summary", false); });
    if (summary.is_null())
        throw Error(kExitRunFailed, "run failed: the prophet train child exited 0 but printed no summary line");
    return summary;
}

}  // namespace prophet::sweep::detail
