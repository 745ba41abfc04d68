// cmd_sweep.cpp: `prophet sweep`: argument wiring, progress on stderr and the JSON summary (lib/sweep).
#include "cmd_sweep.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cmd_report.h"
#include "core/error.h"
#include "sweep/sweep.h"

namespace prophet::cli {

namespace {

namespace fs = std::filesystem;

const Schema& sweep_command_schema() {
    static const Schema schema = [] {
        Schema s;
        s.add_string("store.path", "", {},
                     "SQLite file the points record into (empty: [sweep] store, else "
                     "results/prophet.db)");
        return s;
    }();
    return schema;
}

// Builds <dir of store>/REPORT.md and <dir of store>/figures from the store (prophet report's code path); warns
// (one line) and returns on any problem: the sweep's result does not depend on the report.
void build_report(const std::string& store_path) {
    ReportArgs report;
    report.db = store_path;
    report.quiet = true;
    const int code = run_report(report);
    fs::path dir = fs::path(store_path).parent_path();
    if (code == kExitOk)
        std::fprintf(stderr, "prophet sweep: report: %s\n", (dir.empty() ? fs::path(".") : dir).append("REPORT.md").c_str());
    else
        std::fprintf(stderr, "prophet sweep: warning: the report exited with code %d (run prophet report --db %s)\n",
                     code, store_path.c_str());
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args) {
    CLI::App* sweep = app.add_subcommand(
        "sweep",
        "run a grid of (cluster, trace, policy, seed, config) points with the simulator, the cost model or real "
        "prophet train child processes (engine = \"real\"); resumable");
    sweep->add_option("file", args.file, "sweep file (experiments/sweeps/*.toml)")->check(CLI::ExistingFile);
    sweep->add_option("--max-points", args.max_points, "stop after this many points have run (resume later)");
    sweep->add_flag("--no-report", args.no_report,
                    "do not build <dir of store>/REPORT.md (prophet report) at the end");
    add_common_options(sweep, args.common);
    sweep->footer(
        "Points already finished in the store (same sweep name and point config hash) are skipped.\n"
        "Example:\n  prophet sweep experiments/sweeps/smoke.toml --set store.path=/tmp/smoke.db\n"
        "  prophet sweep experiments/sweeps/real-smoke.toml --set store.path=/tmp/real-smoke.db");
    return sweep;
}

int run_sweep_command(const SweepArgs& args) {
    const Schema& schema = sweep_command_schema();
    if (args.common.help_config) {
        print_schema(schema, "sweep");
        return kExitOk;
    }
    if (args.file.empty())
        throw Error(kExitUsage, "usage error: prophet sweep needs a sweep file (see prophet sweep --help)");
    const Config config = resolve_config(schema, args.common);
    const sweep::SweepSpec spec = sweep::parse_sweep_file(args.file);
    sweep::SweepOptions options;
    options.store_path = config.get_string("store.path");
    if (options.store_path.empty())
        options.store_path = spec.store_path.empty() ? "results/prophet.db" : spec.store_path;
    options.dry_run = args.common.dry_run;
    options.max_points = args.max_points;
    options.base = make_run_info("sweep", config, args.common);
    options.log = [&](const std::string& line) {
        if (!options.dry_run)
            std::fprintf(stderr, "%s\n", line.c_str());
        else if (!args.common.json)
            std::printf("%s\n", line.c_str());
    };
    const sweep::SweepSummary s = sweep::run_sweep(spec, options);
    if (!options.dry_run && !args.no_report) build_report(options.store_path);
    if (args.common.json) {
        nlohmann::json out;
        out["points"] = s.points;
        out["already_done"] = s.already_done;
        out["ran"] = s.ran;
        out["skipped"] = s.skipped;
        out["failed"] = s.failed;
        out["run_ids"] = s.run_ids;
        out["store"] = options.store_path;
        out["dry_run"] = options.dry_run;
        std::printf("%s\n", out.dump(2).c_str());
    } else if (options.dry_run) {
        std::printf("dry run: %d points, %d already done in %s, %d to run\n", s.points, s.already_done,
                    options.store_path.c_str(), s.points - s.already_done);
    } else {
        std::fprintf(stderr, "prophet sweep: %s: %d points, %d ran, %d skipped, %d failed, recorded in %s\n",
                     spec.name.c_str(), s.points, s.ran, s.skipped, s.failed, options.store_path.c_str());
    }
    return s.failed > 0 ? kExitRunFailed : kExitOk;
}

}  // namespace prophet::cli
