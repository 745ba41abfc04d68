// cmd_validate.cpp: `prophet validate` (see cmd_validate.h; docs/simulator.md "Validation").
#include "cmd_validate.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "sim/validation_runs.h"

namespace prophet::cli {

namespace {

std::string pct(double x) { return fmt(100 * x, 3) + "%"; }

void print_table(const sim::ValidationSummary& s, const std::string& source, const std::string& calibrated_on,
                 const std::vector<std::string>& excluded) {
    std::printf("replay: %s durations%s\n", source == "recorded" ? "recorded" : "op-model (per-op model)",
                calibrated_on.empty() ? "" : (", tables calibrated on " + calibrated_on).c_str());
    std::printf("%-16s %-10s %-9s %-8s %10s %10s %10s %10s %8s %8s %8s %8s\n", "run", "policy", "schedule", "set",
                "meas mean", "sim mean", "meas med", "sim med", "err med", "err mean", "P90 step", "max step");
    for (const sim::PointValidation& p : s.points)
        std::printf("%-16s %-10s %-9s %-8s %10s %10s %10s %10s %8s %8s %8s %8s\n", p.run_id.c_str(), p.policy.c_str(),
                    p.schedule.c_str(), source == "recorded" ? "-" : p.held_out ? "held-out" : "calib",
                    fmt(p.measured_mean_ms, 4).c_str(), fmt(p.sim_mean_ms, 4).c_str(),
                    fmt(p.measured_median_ms, 4).c_str(), fmt(p.sim_median_ms, 4).c_str(), pct(p.error_median).c_str(),
                    pct(p.error_mean).c_str(), pct(p.p90_step_error).c_str(), pct(p.max_step_error).c_str());
    std::printf("(err: (simulated - measured) / measured; P90 / max step: of |per-step errors|; times in ms)\n");
    std::printf("total: %zu points: MAPE %s, bias %s, P90 |err| %s, max |err| %s\n", s.points.size(),
                pct(s.mape).c_str(), pct(s.bias).c_str(), pct(s.p90_abs).c_str(), pct(s.max_abs).c_str());
    if (source != "recorded")
        std::printf("held out: %d points: MAPE %s, bias %s, P90 |err| %s, max |err| %s\n", s.heldout_points,
                    pct(s.heldout_mape).c_str(), pct(s.heldout_bias).c_str(), pct(s.heldout_p90_abs).c_str(),
                    pct(s.heldout_max_abs).c_str());
    std::printf("policy order: Kendall tau %s over %d significant pairs (measured means > 2 sd of the seed spread apart)\n",
                fmt(s.kendall_tau, 3).c_str(), s.tau_pairs);
    std::printf("per-op kind, ms per step and rank (mean over points): recorded -> simulated (residual)\n");
    for (const auto& [kind, ms] : s.residual_ms) {
        const auto rec = s.recorded_ms.find(kind);
        const double recorded = rec == s.recorded_ms.end() ? 0.0 : rec->second;
        if (std::abs(ms) >= 0.0005 || recorded >= 0.0005)
            std::printf("  %-13s %9.3f -> %9.3f (%+.3f)\n", kind.c_str(), recorded, recorded + ms, ms);
    }
    for (const std::string& e : excluded) std::printf("excluded: %s\n", e.c_str());
    for (const sim::PointValidation& p : s.points)
        if (p.busy_machine)
            std::printf("busy: %s started on a busy machine (load %s): its measured steps include other jobs' time\n",
                        p.run_id.c_str(), fmt(p.load1, 3).c_str());
}

}  // namespace

CLI::App* add_validate_command(CLI::App& app, ValidateArgs& args) {
    CLI::App* cmd = app.add_subcommand(
        "validate",
        "the simulator against recorded real runs: replays each step's recorded counts and placements on its recorded "
        "op DAG, the ops timed by a calibrated per-op model, and compares with the measured step");
    cmd->add_option("--store", args.db, "the store holding the runs (recorded with prophet train --timeline)")
        ->capture_default_str();
    cmd->add_option("--run", args.run_ids, "a run to validate (repeatable)");
    cmd->add_option("--experiment", args.experiment, "every finished train run of this experiment");
    cmd->add_option("--cluster", args.cluster,
                    "a cluster file with an [ops] section (prophet profile --calibrate writes one); needed unless "
                    "--replay recorded");
    cmd->add_option("--replay", args.replay,
                    "model: the per-op model's durations (the validation); recorded: the recorded durations (the "
                    "replay's own exactness check: within 3% per step)")
        ->check(CLI::IsMember({"model", "recorded"}))
        ->capture_default_str();
    cmd->add_option("--refit-on", args.refit_on,
                    "re-fit the [ops] per-kind scale and in_step_us on this run of the store before validating: "
                    "the calibration run (prophet profile --calibrate records its timeline), e.g. after a change "
                    "of the fit; its config must be the tables' calibrated_on, with no emulated link. Repeatable: "
                    "the fit pools the steps of every run given (the calibration config recorded again between a "
                    "campaign's points)");
    cmd->add_flag("--include-oversubscribed", args.include_oversubscribed,
                  "keep runs recorded with more ranks than cores (docs/testbed.md): left out by default");
    cmd->add_flag("!--no-record", args.record, "do not record the validation as a run in the store");
    cmd->add_flag("--json", args.json, "one JSON object on stdout instead of the table");
    cmd->footer(
        "Examples:\n"
        "  mpirun -np 2 prophet profile --config experiments/train/main-2rank.toml --calibrate --cluster-out c.toml\n"
        "  mpirun -np 2 prophet train --config experiments/train/main-2rank.toml --set balance.policy=prophet --timeline\n"
        "  prophet validate --experiment main-2rank --cluster c.toml\n"
        "  prophet validate --store tests/fixtures/replay-2rank.db --experiment replay-fixture --replay recorded --no-record\n"
        "Points whose model shape and rank count match the [ops] tables' calibrated_on are the calibration set;\n"
        "the others are held out. Errors are (simulated - measured) / measured of each run's median step\n"
        "(step 0 left out). docs/simulator.md explains the replay and what the per-op model leaves out;\n"
        "experiments/validate-heldout.sh runs the whole held-out campaign (calibrate, record, validate, figure).");
    return cmd;
}

namespace {

void check_validate_args(const ValidateArgs& args) {
    if (args.run_ids.empty() && args.experiment.empty())
        throw Error(kExitUsage, "usage error: prophet validate needs --run ID (repeatable) or --experiment NAME; fix: "
                                "e.g. prophet validate --experiment main-2rank --cluster c.toml");
    if (args.replay == "model" && args.cluster.empty())
        throw Error(kExitUsage, "usage error: --replay model needs --cluster FILE with an [ops] section; fix: "
                                "calibrate one with mpirun -np 2 prophet profile --config CONFIG --calibrate "
                                "--cluster-out FILE, or pass --replay recorded");
}

// The --run ids, then every finished train run of --experiment not among them; those go into by_experiment too
// (they may lack a timeline: left out with a note, not an error).
std::vector<std::string> runs_to_check(Store& store, const ValidateArgs& args, std::set<std::string>& by_experiment) {
    std::vector<std::string> ids = args.run_ids;
    if (!args.experiment.empty())
        for (const RunRow& r : store.list_runs(args.experiment))
            if (r.info.command == "train" && r.status == "finished" &&
                std::find(ids.begin(), ids.end(), r.run_id) == ids.end()) {
                by_experiment.insert(r.run_id);
                ids.push_back(r.run_id);
            }
    if (ids.empty())
        throw_input_error(args.db, "has no finished train run of experiment " + args.experiment,
                          "list them with prophet runs --db " + args.db);
    return ids;
}

// --refit-on: the [ops] per-kind scales and in-step overheads fitted again on the calibration runs (pooled).
sim::OpTables refit_tables(Store& store, const ValidateArgs& args, const sim::OpTables& tables) {
    std::vector<sim::RecordedRun> runs;
    for (const std::string& id : args.refit_on) {
        runs.push_back(sim::load_recorded_run(store, id));
        if (sim::config_key(runs.back()) != tables.calibrated_on + " link=0.0")
            throw_config_error("--refit-on", id,
                               "must be a run of the calibration config: its config " + sim::config_key(runs.back()) +
                                   " is not the tables' calibrated_on " + tables.calibrated_on + " with link=0.0",
                               "pass the run of prophet profile --calibrate (prophet runs --db " + args.db + ")");
    }
    std::vector<const sim::RecordedRun*> pooled;
    for (const sim::RecordedRun& r : runs) pooled.push_back(&r);
    sim::OpTables fitted_tables = sim::fit_to_recordings(tables, pooled);
    std::string fitted, ids;  // kind = factor / us per call, and the runs, for the log
    for (const std::string& id : args.refit_on) ids += (ids.empty() ? "" : " ") + id;
    for (const auto& [kind, v] : fitted_tables.scale) fitted += " " + kind + "=x" + std::to_string(v).substr(0, 5);
    for (const auto& [kind, v] : fitted_tables.in_step_s)
        fitted += " " + kind + "=+" + std::to_string(v * 1e6).substr(0, 5) + "us";
    std::fprintf(stderr, "prophet: [ops] scale and in_step_us re-fitted on run%s %s:%s\n", runs.size() > 1 ? "s" : "",
                 ids.c_str(), fitted.c_str());
    return fitted_tables;
}

// The per-op model's tables of --cluster (none for --replay recorded), re-fitted with --refit-on.
sim::OpTables op_tables_for(Store& store, const ValidateArgs& args, sim::ReplaySource source) {
    sim::OpTables tables;
    if (source == sim::ReplaySource::kOpModel) tables = sim::load_op_tables(args.cluster);
    if (args.refit_on.empty()) return tables;
    if (source != sim::ReplaySource::kOpModel)
        throw_config_error("--refit-on", args.refit_on.front(), "only applies with --replay model", "drop --refit-on");
    return refit_tables(store, args, tables);
}

}  // namespace

int run_validate(const ValidateArgs& args) {
    check_validate_args(args);
    Store store = open_existing_store(args.db);
    std::set<std::string> by_experiment;
    const std::vector<std::string> ids = runs_to_check(store, args, by_experiment);
    const sim::ReplaySource source =
        args.replay == "recorded" ? sim::ReplaySource::kRecorded : sim::ReplaySource::kOpModel;
    const sim::OpTables tables = op_tables_for(store, args, source);
    std::vector<sim::RunToValidate> runs;
    for (const std::string& id : ids) {
        sim::RunToValidate r;
        r.run_id = id;
        r.tables = source == sim::ReplaySource::kOpModel ? &tables : nullptr;
        r.optional = by_experiment.count(id) > 0;
        runs.push_back(r);
    }
    const sim::StoredValidation v =
        sim::validate_stored_runs(store, runs, source, args.include_oversubscribed, args.db);
    const nlohmann::json report = sim::validation_report_json(v, args.replay, args.cluster, tables.calibrated_on);
    if (args.json) std::printf("%s\n", report.dump().c_str());
    else print_table(v.summary, args.replay, tables.calibrated_on, v.excluded);
    if (args.record) {
        RunInfo info;
        info.git_sha = git_sha(&info.git_dirty);
        info.hardware_json = hardware_json();
        const std::string run_id = sim::record_validation(store, info, v.summary, report, args.replay);
        std::fprintf(stderr, "prophet: validation recorded as run %s\n", run_id.c_str());
    }
    return kExitOk;
}

}  // namespace prophet::cli
