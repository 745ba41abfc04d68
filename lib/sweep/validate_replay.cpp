// validate_replay.cpp: the per-op replay validation of a real sweep's children after its last point (see
// replay_validate_points in sweep_internal.h; docs/sweep.md "Validation").
#include <cstdio>
#include <map>
#include <set>

#include "core/error.h"
#include "sim/validation_runs.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep::detail {

std::string replay_validate_points(Store& store, const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                   const SweepOptions& options) {
    const auto log = [&](const std::string& line) {
        if (options.log) options.log("per-op replay validation " + line);
    };
    std::set<std::string> hashes;
    for (const SweepPoint& p : points) hashes.insert(p.hash);
    // the newest finished point row of each point (list_runs is newest first): its child and its cluster file
    std::set<std::string> seen;
    std::vector<std::string> children, clusters, calibrated_on;
    for (const RunRow& row : store.list_runs(spec.name)) {
        if (row.info.command != "sweep" || row.status != "finished" || !hashes.count(row.info.config_hash) ||
            !seen.insert(row.info.config_hash).second)
            continue;
        std::string child, cluster, description;
        for (const auto& [k, v] : store.get_params(row.run_id)) {
            const auto text = [&v = v] {  // a TOML string literal is a JSON string
                const nlohmann::json j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
                return j.is_string() ? j.get<std::string>() : std::string();
            };
            if (k == "child_run_id") child = text();
            if (k == "validate_cluster") cluster = text();
            if (k == "validate_calibrated_on") description = text();
        }
        if (child.empty() || cluster.empty()) continue;  // no validation cluster (its calibration failed)
        children.push_back(child);
        clusters.push_back(cluster);
        calibrated_on.push_back(description);
    }
    if (children.empty()) {
        log("skipped: no finished point was validated on a cluster file");
        return "";
    }
    std::map<std::string, sim::OpTables> tables;  // cluster file -> its [ops]
    std::vector<sim::RunToValidate> runs;
    const bool held_out = spec.validate_cluster == kCalibrate && !spec.calibrate_set.empty();
    std::string cluster_text, calibrated_text;
    for (size_t i = 0; i < children.size(); ++i) {
        if (!tables.count(clusters[i])) {
            try {
                tables.emplace(clusters[i], sim::load_op_tables(clusters[i]));
            } catch (const Error& e) {
                log("skipped: " + std::string(e.what()) +
                    " (validate_cluster = \"calibrate\" writes [ops]; docs/simulator.md \"Replay validation\")");
                return "";
            }
            cluster_text += (cluster_text.empty() ? "" : ", ") + clusters[i];
            const std::string& on = tables.at(clusters[i]).calibrated_on;
            calibrated_text += (calibrated_text.empty() ? "" : "; ") + on +
                               (calibrated_on[i].empty() ? "" : " (" + calibrated_on[i] + ")");
        }
        sim::RunToValidate r;
        r.run_id = children[i];
        r.tables = &tables.at(clusters[i]);
        r.optional = true;  // a child recorded before the sweep asked for --timeline is left out with a note
        if (held_out) r.held_out = 1;
        runs.push_back(r);
    }
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
