// main.cpp: the `prophet` binary: argument wiring only; each subcommand lives in cmd_<name>.cpp.
#include <cstdio>
#include <exception>

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

// Every subcommand's arguments and its parsed CLI::App (the options bind to the args: never copied).
struct Commands {
    prophet::cli::PlanArgs plan_args;
    CLI::App* plan = nullptr;
    prophet::cli::PoliciesArgs policies_args;
    CLI::App* policies = nullptr;
    prophet::cli::TraceArgs trace_args;
    CLI::App* trace = nullptr;
    prophet::cli::TrainArgs train_args;
    CLI::App* train = nullptr;
    prophet::cli::SweepArgs sweep_args;
    CLI::App* sweep = nullptr;
    prophet::cli::ProfileArgs profile_args;
    CLI::App* profile = nullptr;
    prophet::cli::AblateArgs ablate_args;
    CLI::App* ablate = nullptr;
    prophet::cli::RunsArgs runs_args;
    prophet::cli::RunsCommands runs;
    prophet::cli::DbCheckArgs db_check_args;
    CLI::App* db_check = nullptr;
    prophet::cli::DbMergeArgs db_merge_args;
    CLI::App* db_merge = nullptr;
    prophet::cli::CkptArgs ckpt_args;
    CLI::App* ckpt_show = nullptr;
    prophet::cli::ReportArgs report_args;
    CLI::App* report = nullptr;
    prophet::cli::ValidateArgs validate_args;
    CLI::App* validate = nullptr;
};

void add_commands(CLI::App& app, Commands& c) {
    namespace cli = prophet::cli;
    c.plan = cli::add_plan_command(app, c.plan_args);
    c.policies = cli::add_policies_command(app, c.policies_args);
    c.trace = cli::add_trace_command(app, c.trace_args);
    c.train = cli::add_train_command(app, c.train_args);
    c.sweep = cli::add_sweep_command(app, c.sweep_args);
    c.profile = cli::add_profile_command(app, c.profile_args);
    c.ablate = cli::add_ablate_command(app, c.ablate_args);
    c.runs = cli::add_runs_command(app, c.runs_args);
    CLI::App* db = app.add_subcommand("db", "look after run stores: `db check`, `db merge`");
    db->require_subcommand(1, 1);
    c.db_check = cli::add_db_check_command(db, c.db_check_args);
    c.db_merge = cli::add_db_merge_command(db, c.db_merge_args);
    c.ckpt_show = cli::add_ckpt_command(app, c.ckpt_args);
    c.report = cli::add_report_command(app, c.report_args);
    c.validate = cli::add_validate_command(app, c.validate_args);
}

// Runs the parsed subcommand; train and profile may run under MPI, which they end (aborting on a failure).
int run_parsed(Commands& c, int* argc, char*** argv) {
    using namespace prophet;
    if (c.plan->parsed()) return cli::run_plan(c.plan_args);
    if (c.policies->parsed()) return cli::run_policies(c.policies_args);
    if (c.trace->parsed()) return cli::run_trace(c.trace_args);
    if (c.sweep->parsed()) return cli::run_sweep_command(c.sweep_args);
    if (c.ablate->parsed()) return cli::run_ablate(c.ablate_args);
    if (c.db_merge->parsed()) return cli::run_db_merge(c.db_merge_args);
    if (c.runs.list->parsed()) return cli::run_runs(c.runs, c.runs_args);
    if (c.db_check->parsed()) return cli::run_db_check(c.db_check_args);
    if (c.ckpt_show->parsed()) return cli::run_ckpt_show(c.ckpt_args);
    if (c.report->parsed()) return cli::run_report(c.report_args);
    if (c.validate->parsed()) return cli::run_validate(c.validate_args);
    int rc = kExitUsage;
    if (c.train->parsed()) rc = cli::run_train(c.train_args, argc, argv);
    if (c.profile->parsed()) rc = cli::run_profile(c.profile_args, argc, argv);
    if (rc != kExitOk && launched_by_mpi()) abort_mpi(rc);  // the other ranks must not wait for this one
    finalize_mpi();
    return rc;
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
    Commands commands;
    add_commands(app, commands);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitUsage;
    }
    try {
        return run_parsed(commands, &argc, &argv);
    } catch (...) {  // bad_alloc: exit 4; an exception other than prophet::Error: exit 1 with its type
        const prophet::Error e = prophet::current_exception_as_error();
        std::fprintf(stderr, "prophet: %s\n", e.what());
        return e.exit_code();
    }
}
