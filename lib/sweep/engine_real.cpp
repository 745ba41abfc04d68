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

// The --set assignments every child of point p gets: the store, the sweep's name as experiment, the seed (and the
// policy), then [sweep.set] and the point's grid values. Strings are TOML string literals: a bare 2024 or true
// would be read as a number or a bool, and a path may hold any character.
std::vector<std::string> child_sets(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options,
                                    bool with_policy, const KeyValues& grid) {
    std::vector<std::string> sets = {"store.path=" + quoted(options.store_path), "run.experiment=" + quoted(spec.name),
                                     "run.seed=" + std::to_string(p.seed)};
    if (with_policy) sets.push_back("balance.policy=" + quoted(p.policy));
    for (const auto& [k, v] : spec.set) sets.push_back(k + "=" + v);  // canonical TOML text already
    for (const auto& [k, v] : grid) sets.push_back(k + "=" + v);
    return sets;
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
    for (const std::string& kv : child_sets(spec, p, options, /*with_policy=*/true, p.grid)) {
        cmd.push_back("--set");
        cmd.push_back(kv);
    }
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

void calibrate_cluster(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options, const std::string& out) {
    std::vector<std::string> cmd = child_launcher(p.ranks, options);
    for (const std::string& a : {std::string("profile"), std::string("--config"), resolve_path(spec, spec.train_config),
                                 std::string("--calibrate"), std::string("--cluster-out"), out})
        cmd.push_back(a);
    // held out: [sweep.calibrate_set] replaces the point's grid values, so no validated point is the calibrated one
    const KeyValues& grid = spec.calibrate_set.empty() ? p.grid : spec.calibrate_set;
    for (const std::string& kv : child_sets(spec, p, options, /*with_policy=*/false, grid)) {
        cmd.push_back("--set");
        cmd.push_back(kv);
    }
    const ChildResult child = launch(spec, options, cmd);
    if (child.timed_out)
        throw Error(kExitTimeout, "prophet profile --calibrate ran past time_limit_s = " +
                                      format_seconds(spec.time_limit_s) + " and was stopped");
    if (child.exit_code != 0) {
        const std::string line = last_line(child.err);
        throw Error(child.exit_code, "prophet profile --calibrate exited with code " +
                                         std::to_string(child.exit_code) + (line.empty() ? "" : ": " + line));
    }
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
    std::istringstream lines(out);
    std::string line;
    nlohmann::json summary;
    while (std::getline(lines, line)) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.value("summary", false)) summary = std::move(j);
    }
    if (summary.is_null())
        throw Error(kExitRunFailed, "run failed: the prophet train child exited 0 but printed no summary line");
    return summary;
}

}  // namespace prophet::sweep::detail
