// cmd_sweep.cpp: `prophet sweep`: argument wiring, progress on stderr and the JSON summary (lib/sweep).
#include "cmd_sweep.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cmd_sweep_slurm.h"
#include "cmd_report.h"
#include "core/error.h"
#include "store/run_health.h"
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

// "3,5,7" -> {3, 5, 7}; each a point number 1..n
std::vector<int> parse_points(const std::string& text, size_t n) {
    std::vector<int> out;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 1 || static_cast<size_t>(v) > n)
            throw Error(kExitUsage, "usage error: --points " + text + ": '" + item +
                                        "' is not a point number 1.." + std::to_string(n) + " (list them like 3,5)");
        out.push_back(static_cast<int>(v));
        start = comma + 1;
    }
    return out;
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args) {
    CLI::App* sweep = app.add_subcommand(
        "sweep",
        "run a grid of (cluster, trace, policy, seed, config) points with the simulator, the cost model or real "
        "prophet train child processes (engine = \"real\"); resumable");
    sweep->add_option("file", args.file, "sweep file (experiments/sweeps/*.toml)")->check(CLI::ExistingFile);
    sweep
        ->add_option("--max-points", args.max_points,
                     "stop after this many points have run (resume later); default: no limit")
        ->check(non_negative_number("10"));
    sweep->add_flag("--no-report", args.no_report,
                    "do not build <dir of store>/REPORT.md (prophet report) at the end");
    sweep->add_option("--launcher", args.launcher,
                      "local: run the points here, one after another; slurm: submit the missing points as a Slurm "
                      "job array ([sweep.slurm], docs/cluster.md), each task writing its own shard store")
        ->check(CLI::IsMember({"local", "slurm"}));
    sweep->add_flag("--wait", args.wait, "with --launcher slurm: wait for the job array, then merge the shards");
    sweep->add_flag("--status", args.status, "print each point's state from the store, the shards and squeue");
    sweep->add_option("--points", args.points, "run only these 1-based points, e.g. 3,5 (what a Slurm task runs)");
    add_common_options(sweep, args.common);
    sweep->footer(
        "Points already finished in the store (same sweep name and point config hash) are skipped; a point\n"
        "another running sweep on the same store has claimed is left to it (docs/sweep.md).\n"
        "Regime (sim / model points): balance.regime = auto (default) serves a trace imported from sglang, vllm,\n"
        "trtllm or eplb statistics with periodic rebalancing (balance.rebalance_every, balance.window) and trains\n"
        "every other trace; a [sweep.grid] \"balance.regime\" = [\"serving\"] makes any trace a serving sweep, and\n"
        "command = \"infer\" points are serving runs (docs/serving.md).\n"
        "Example:\n  prophet sweep experiments/sweeps/smoke.toml --set store.path=/tmp/smoke.db\n"
        "  prophet sweep experiments/sweeps/serving.toml --set store.path=/tmp/serving.db\n"
        "  prophet sweep experiments/sweeps/real-smoke.toml --set store.path=/tmp/real-smoke.db\n"
        "  prophet sweep experiments/sweeps/smoke.toml --launcher slurm --dry-run   (prints the sbatch script)");
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
    if (args.status) return run_sweep_status(args, spec, options.store_path);
    if (args.launcher == "slurm") return run_sweep_slurm(args, spec, options.store_path);
    if (!args.points.empty()) options.only_points = parse_points(args.points, sweep::expand_points(spec).size());
    options.dry_run = args.common.dry_run;
    options.max_points = args.max_points;
    options.base = make_run_info("sweep", config, args.common);
    options.log = [&](const std::string& line) {
        if (!options.dry_run)
            std::fprintf(stderr, "%s\n", line.c_str());
        else if (!args.common.json)
            std::printf("%s\n", line.c_str());
    };
    if (!options.dry_run) reap_lost_runs_at(options.store_path, options.log);  // runs a dead process left `running`
    const sweep::SweepSummary s = sweep::run_sweep(spec, options);
    if (!options.dry_run && !args.no_report) build_report(options.store_path);
    if (args.common.json) {
        nlohmann::json out;
        out["points"] = s.points;
        out["already_done"] = s.already_done;
        out["ran"] = s.ran;
        out["skipped"] = s.skipped;
        out["claimed_elsewhere"] = s.claimed_elsewhere;
        out["failed"] = s.failed;
        out["run_ids"] = s.run_ids;
        if (!s.validation_run_id.empty()) out["validation_run"] = s.validation_run_id;
        out["store"] = options.store_path;
        out["dry_run"] = options.dry_run;
        std::printf("%s\n", out.dump(2).c_str());
    } else if (options.dry_run) {
        std::printf("dry run: %d points, %d already done in %s, %d to run\n", s.points, s.already_done,
                    options.store_path.c_str(), s.points - s.already_done);
    } else {
        std::fprintf(stderr, "prophet sweep: %s: %d points, %d ran, %d skipped, %d failed, recorded in %s\n",
                     spec.name.c_str(), s.points, s.ran, s.skipped, s.failed, options.store_path.c_str());
        if (s.claimed_elsewhere > 0)
            std::fprintf(stderr, "prophet sweep: %d point(s) left to another sweep running on the same store\n",
                         s.claimed_elsewhere);
    }
    return s.failed > 0 ? kExitRunFailed : kExitOk;
}

}  // namespace prophet::cli
