// validate_replay.cpp: the per-op replay validation of a real sweep's children after its last point (see
// replay_validate_points in sweep_internal.h; docs/sweep.md "Validation").
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "core/error.h"
#include "sim/validation_runs.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep::detail {

namespace {

using Log = std::function<void(const std::string&)>;

// A finished point's child run and the cluster file it was validated against (with what the calibration ran).
struct ValidatedChild {
    std::string child, cluster, calibrated_on;
};

// The newest finished point row of each point (list_runs is newest first) that was validated on a cluster file.
std::vector<ValidatedChild> validated_children(Store& store, const SweepSpec& spec,
                                               const std::vector<SweepPoint>& points) {
    std::set<std::string> hashes;
    for (const SweepPoint& p : points) hashes.insert(p.hash);
    std::set<std::string> seen;
    std::vector<ValidatedChild> out;
    for (const RunRow& row : store.list_runs(spec.name)) {
        if (row.info.command != "sweep" || row.status != "finished" || !hashes.count(row.info.config_hash) ||
            !seen.insert(row.info.config_hash).second)
            continue;
        ValidatedChild c;
        for (const auto& [k, v] : store.get_params(row.run_id)) {
            const auto text = [&v = v] {  // a TOML string literal is a JSON string
                const nlohmann::json j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
                return j.is_string() ? j.get<std::string>() : std::string();
            };
            if (k == "child_run_id") c.child = text();
            if (k == "validate_cluster") c.cluster = text();
            if (k == "validate_calibrated_on") c.calibrated_on = text();
        }
        if (c.child.empty() || c.cluster.empty()) continue;  // no validation cluster (its calibration failed)
        out.push_back(std::move(c));
    }
    return out;
}

// The children to replay, each with its cluster file's [ops] (loaded once into tables), and the text naming the
// clusters and what they were calibrated on. False (logged) when a cluster file has no usable [ops].
bool runs_to_validate(const SweepSpec& spec, const std::vector<ValidatedChild>& children, const Log& log,
                      std::map<std::string, sim::OpTables>& tables, std::vector<sim::RunToValidate>& runs,
                      std::string& cluster_text, std::string& calibrated_text) {
    const bool held_out = spec.validate_cluster == kCalibrate && !spec.calibrate_set.empty();
    for (const ValidatedChild& c : children) {
        if (!tables.count(c.cluster)) {
            try {
                tables.emplace(c.cluster, sim::load_op_tables(c.cluster));
            } catch (const Error& e) {
                log("skipped: " + std::string(e.what()) +
                    " (validate_cluster = \"calibrate\" writes [ops]; docs/simulator.md \"Replay validation\")");
                return false;
            }
            cluster_text += (cluster_text.empty() ? "" : ", ") + c.cluster;
            const std::string& on = tables.at(c.cluster).calibrated_on;
            calibrated_text += (calibrated_text.empty() ? "" : "; ") + on +
                               (c.calibrated_on.empty() ? "" : " (" + c.calibrated_on + ")");
        }
        sim::RunToValidate r;
        r.run_id = c.child;
        r.tables = &tables.at(c.cluster);
        r.optional = true;  // a child recorded before the sweep asked for --timeline is left out with a note
        if (held_out) r.held_out = 1;
        runs.push_back(r);
    }
    return true;
}

}  // namespace

std::string replay_validate_points(Store& store, const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                   const SweepOptions& options) {
    const Log log = [&](const std::string& line) {
        if (options.log) options.log("per-op replay validation " + line);
    };
    const std::vector<ValidatedChild> children = validated_children(store, spec, points);
    if (children.empty()) {
        log("skipped: no finished point was validated on a cluster file");
        return "";
    }
    std::map<std::string, sim::OpTables> tables;  // cluster file -> its [ops]
    std::vector<sim::RunToValidate> runs;
    std::string cluster_text, calibrated_text;
    if (!runs_to_validate(spec, children, log, tables, runs, cluster_text, calibrated_text)) return "";
    try {
        const sim::StoredValidation v = sim::validate_stored_runs(store, runs, sim::ReplaySource::kOpModel,
                                                                  spec.validate_oversubscribed, "sweep " + spec.name);
        nlohmann::json report = sim::validation_report_json(v, "model", cluster_text, calibrated_text);
        report["data"] = "prophet sweep " + spec.name + " (per-op replay of its children, cluster " + cluster_text + ")";
        const std::string id = sim::record_validation(store, options.base, v.summary, report, "model",
                                                      {{"validate.sweep", quoted(spec.name)}});
        char buffer[160];
        std::snprintf(buffer, sizeof buffer, "of %zu child run(s) (%zu excluded): held-out MAPE %.1f%% over %d, all %.1f%%",
                      v.summary.points.size(), v.excluded.size(), 100 * v.summary.heldout_mape,
                      v.summary.heldout_points, 100 * v.summary.mape);
        log(std::string(buffer) + ", recorded as run " + id);
        for (const std::string& e : v.excluded) log("excluded " + e);
        return id;
    } catch (const Error& e) {
        if (e.exit_code() == kExitDatabase) throw;
        log("skipped: " + std::string(e.what()));
        return "";
    }
}

}  // namespace prophet::sweep::detail
