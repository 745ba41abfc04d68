// main.cpp: the `prophet` binary: argument wiring only; each subcommand lives in cmd_<name>.cpp.
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "cmd_ablate.h"
#include "cmd_ckpt.h"
#include "cmd_db.h"
#include "cmd_db_merge.h"
#include "cmd_plan.h"
#include "cmd_policies.h"
#include "cmd_report.h"
#include "cmd_runs.h"
#include "cmd_sweep.h"
#include "cmd_trace.h"
#include "cmd_train.h"
#include "cmd_validate.h"
#include "comm/comm.h"
#include "core/error.h"
#include "kernels/blas.h"

namespace {

const char* kFooter =
    "Exit codes: 0 ok, 1 run failed, 2 usage, 3 invalid config or input, 4 resources (memory/size), 5 database,\n"
    "6 distributed failure or timeout.\n"
    "Config: every subcommand takes --config FILE.toml and repeatable --set section.key=value; --help-config lists\n"
    "the keys. Runs are recorded in the SQLite file store.path (default results/prophet.db).";

// One subcommand: its CLI::App and how to run it. `run` owns the arguments the App's options bind to.
struct Subcommand {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

// The subcommand add(parent, args) declares, run by run(args), over arguments it owns from here on.
template <typename Args, typename Parent, typename Add, typename Run>
Subcommand subcommand(Parent& parent, Add add, Run run) {
    auto args = std::make_shared<Args>();
    CLI::App* app = add(parent, *args);
    return {app, [args, run] { return run(*args); }};
}

// train and profile may run under MPI, which they end (aborting on a failure: the other ranks must not wait)
int end_mpi(int rc) {
    if (rc != prophet::kExitOk && prophet::launched_by_mpi()) prophet::abort_mpi(rc);
    prophet::finalize_mpi();
    return rc;
}

// Every subcommand, in --help order; train and profile get main's argc and argv (MPI may read and change them).
std::vector<Subcommand> add_subcommands(CLI::App& app, int* argc, char*** argv) {
    namespace cli = prophet::cli;
    const auto train = [argc, argv](const cli::TrainArgs& a) { return end_mpi(cli::run_train(a, argc, argv)); };
    const auto profile = [argc, argv](const cli::ProfileArgs& a) { return end_mpi(cli::run_profile(a, argc, argv)); };
    std::vector<Subcommand> all{subcommand<cli::PlanArgs>(app, cli::add_plan_command, cli::run_plan),
                                subcommand<cli::PoliciesArgs>(app, cli::add_policies_command, cli::run_policies),
                                subcommand<cli::TraceArgs>(app, cli::add_trace_command, cli::run_trace),
                                subcommand<cli::TrainArgs>(app, cli::add_train_command, train),
                                subcommand<cli::SweepArgs>(app, cli::add_sweep_command, cli::run_sweep_command),
                                subcommand<cli::ProfileArgs>(app, cli::add_profile_command, profile),
                                subcommand<cli::AblateArgs>(app, cli::add_ablate_command, cli::run_ablate)};
    auto runs_args = std::make_shared<cli::RunsArgs>();
    const cli::RunsCommands runs = cli::add_runs_command(app, *runs_args);
    all.push_back({runs.list, [runs, runs_args] { return cli::run_runs(runs, *runs_args); }});
    CLI::App* db = app.add_subcommand("db", "look after run stores: `db check`, `db merge`");
    db->require_subcommand(1, 1);
    all.push_back(subcommand<cli::DbCheckArgs>(db, cli::add_db_check_command, cli::run_db_check));
    all.push_back(subcommand<cli::DbMergeArgs>(db, cli::add_db_merge_command, cli::run_db_merge));
    all.push_back(subcommand<cli::CkptArgs>(app, cli::add_ckpt_command, cli::run_ckpt_show));
    all.push_back(subcommand<cli::ReportArgs>(app, cli::add_report_command, cli::run_report));
    all.push_back(subcommand<cli::ValidateArgs>(app, cli::add_validate_command, cli::run_validate));
    return all;
}

// Runs the parsed subcommand (app requires exactly one, so some subcommand is always parsed).
int run_parsed(const std::vector<Subcommand>& all) {
    for (const Subcommand& command : all)
        if (command.app->parsed()) return command.run();
    return end_mpi(prophet::kExitUsage);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace prophet;
    // first, before MPI or any thread: OpenBLAS reads its kernel choice when it loads (kernels/blas.h)
    blas_setup(argc, argv);
    CLI::App app{"prophet: load balancing for expert-parallel MoE, measured", "prophet"};
    app.require_subcommand(1, 1);
    app.footer(kFooter);
#ifdef PROPHET_VERSION
    app.set_version_flag("--version", PROPHET_VERSION);
#endif
    const std::vector<Subcommand> subcommands = add_subcommands(app, &argc, &argv);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitUsage;
    }
    try {
        return run_parsed(subcommands);
    } catch (...) {  // bad_alloc: exit 4; an exception other than prophet::Error: exit 1 with its type
        const prophet::Error e = prophet::current_exception_as_error();
        std::fprintf(stderr, "prophet: %s\n", e.what());
        return e.exit_code();
    }
}
