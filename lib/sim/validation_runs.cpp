// validation_runs.cpp: validation of stored runs as one report, and its record (see validation_runs.h).
#include "sim/validation_runs.h"

#include "core/error.h"
#include "sim/replay.h"

namespace prophet::sim {

namespace {

nlohmann::json point_json(const PointValidation& p) {
    return {{"run_id", p.run_id},
            {"policy", p.policy},
            {"schedule", p.schedule},
            {"config", p.config},
            {"seed", p.seed},
            {"held_out", p.held_out},
            {"busy_machine", p.busy_machine},
            {"load1", p.load1},
            {"steps", p.steps},
            {"measured_mean_ms", p.measured_mean_ms},
            {"sim_mean_ms", p.sim_mean_ms},
            {"measured_median_ms", p.measured_median_ms},
            {"sim_median_ms", p.sim_median_ms},
            {"measured_sd_ms", p.measured_sd_ms},
            {"error_mean", p.error_mean},
            {"error_median", p.error_median},
            {"max_step_error", p.max_step_error},
            {"p90_step_error", p.p90_step_error},
            {"step_mape", p.step_mape},
            {"residual_ms", p.residual_ms},
            {"recorded_ms", p.recorded_ms}};
}

}  // namespace

StoredValidation validate_stored_runs(Store& store, const std::vector<RunToValidate>& runs, ReplaySource source,
                                      bool include_oversubscribed, const std::string& where) {
    std::vector<PointValidation> points;
    StoredValidation out;
    for (const RunToValidate& r : runs) {
        RecordedRun run;
        try {
            run = load_recorded_run(store, r.run_id);
        } catch (const Error& e) {
            if (!r.optional || e.exit_code() == kExitDatabase) throw;
            out.excluded.push_back(r.run_id + ": " + e.what());
            continue;
        }
        if (run.param("testbed.oversubscribed") == "true" && !include_oversubscribed) {
            out.excluded.push_back(r.run_id + ": oversubscribed (more ranks than cores); --include-oversubscribed "
                                               "(a sweep: validate_oversubscribed = true) keeps it");
            continue;
        }
        points.push_back(validate_run(run, source, r.tables));
        if (r.held_out >= 0) points.back().held_out = r.held_out == 1;
    }
    if (points.empty())
        throw_input_error(where, "no run left to validate (" + std::to_string(out.excluded.size()) + " excluded)",
                          "pass --include-oversubscribed, or record runs with one rank per core and --timeline");
    out.summary = summarize_validation(std::move(points));
    return out;
}

nlohmann::json validation_report_json(const StoredValidation& v, const std::string& source, const std::string& cluster,
                                      const std::string& calibrated_on) {
    const ValidationSummary& s = v.summary;
    nlohmann::json points = nlohmann::json::array();
    for (const PointValidation& p : s.points) points.push_back(point_json(p));
    return {{"replay", source},
            {"cluster", cluster},
            {"calibrated_on", calibrated_on},
            {"points", points},
            {"excluded", v.excluded},
            {"total",
             {{"points", s.points.size()},
              {"mape", s.mape},
              {"bias", s.bias},
              {"p90_abs", s.p90_abs},
              {"max_abs", s.max_abs},
              {"heldout_points", s.heldout_points},
              {"heldout_mape", s.heldout_mape},
              {"heldout_bias", s.heldout_bias},
              {"heldout_p90_abs", s.heldout_p90_abs},
              {"heldout_max_abs", s.heldout_max_abs},
              {"kendall_tau", s.kendall_tau},
              {"tau_pairs", s.tau_pairs},
              {"residual_ms", s.residual_ms},
              {"recorded_ms", s.recorded_ms}}}};
}

std::string record_validation(Store& store, RunInfo info, const ValidationSummary& s, const nlohmann::json& report,
                              const std::string& source,
                              const std::vector<std::pair<std::string, std::string>>& extra_params) {
    info.command = "validate";
    info.experiment = "validation";
    info.simulated = true;
    const std::string run_id = store.begin_run(info);
    store.transaction([&] {
        std::vector<std::pair<std::string, std::string>> params = {{"validate.replay", "\"" + source + "\""}};
        params.insert(params.end(), extra_params.begin(), extra_params.end());
        for (size_t i = 0; i < s.points.size(); ++i) {
            const PointValidation& p = s.points[i];
            params.emplace_back("validate.point." + std::to_string(i), "\"" + p.run_id + "\"");
            store.put_metric(run_id, "measured_step_ms", static_cast<int64_t>(i), p.measured_median_ms);
            store.put_metric(run_id, "sim_step_ms", static_cast<int64_t>(i), p.sim_median_ms);
            store.put_metric(run_id, "error", static_cast<int64_t>(i), p.error_median);
            store.put_metric(run_id, "held_out", static_cast<int64_t>(i), p.held_out ? 1.0 : 0.0);
        }
        store.put_params(run_id, params);
        store.put_metric(run_id, "mape", 0, s.mape);
        store.put_metric(run_id, "bias", 0, s.bias);
        store.put_metric(run_id, "heldout_mape", 0, s.heldout_mape);
        store.put_metric(run_id, "kendall_tau", 0, s.kendall_tau);
        store.put_event(run_id, 0, -1, "info", "validation", "prophet validate report", report.dump());
    });
    store.finish_run(run_id, "finished", 0, "");
    return run_id;
}

}  // namespace prophet::sim
