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
    cli::PlanArgs plan_args;
    CLI::App* plan = cli::add_plan_command(app, plan_args);
    cli::PoliciesArgs policies_args;
    CLI::App* policies = cli::add_policies_command(app, policies_args);
    cli::TraceArgs trace_args;
    CLI::App* trace = cli::add_trace_command(app, trace_args);
    cli::TrainArgs train_args;
    CLI::App* train = cli::add_train_command(app, train_args);
    cli::SweepArgs sweep_args;
    CLI::App* sweep = cli::add_sweep_command(app, sweep_args);
    cli::ProfileArgs profile_args;
    CLI::App* profile = cli::add_profile_command(app, profile_args);
    cli::AblateArgs ablate_args;
    CLI::App* ablate = cli::add_ablate_command(app, ablate_args);
    cli::RunsArgs runs_args;
    const cli::RunsCommands runs = cli::add_runs_command(app, runs_args);
    CLI::App* db = app.add_subcommand("db", "look after run stores: `db check`, `db merge`");
    db->require_subcommand(1, 1);
    cli::DbCheckArgs db_check_args;
    CLI::App* db_check = cli::add_db_check_command(db, db_check_args);
    cli::DbMergeArgs db_merge_args;
    CLI::App* db_merge = cli::add_db_merge_command(db, db_merge_args);
    cli::CkptArgs ckpt_args;
    CLI::App* ckpt_show = cli::add_ckpt_command(app, ckpt_args);
    cli::ReportArgs report_args;
    CLI::App* report = cli::add_report_command(app, report_args);
    cli::ValidateArgs validate_args;
    CLI::App* validate = cli::add_validate_command(app, validate_args);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitUsage;
    }
    try {
        if (plan->parsed()) return cli::run_plan(plan_args);
        if (policies->parsed()) return cli::run_policies(policies_args);
        if (trace->parsed()) return cli::run_trace(trace_args);
        if (sweep->parsed()) return cli::run_sweep_command(sweep_args);
        if (ablate->parsed()) return cli::run_ablate(ablate_args);
        if (db_merge->parsed()) return cli::run_db_merge(db_merge_args);
        if (runs.list->parsed()) return cli::run_runs(runs, runs_args);
        if (db_check->parsed()) return cli::run_db_check(db_check_args);
        if (ckpt_show->parsed()) return cli::run_ckpt_show(ckpt_args);
        if (report->parsed()) return cli::run_report(report_args);
        if (validate->parsed()) return cli::run_validate(validate_args);
        int rc = kExitUsage;
        if (train->parsed()) rc = cli::run_train(train_args, &argc, &argv);
        if (profile->parsed()) rc = cli::run_profile(profile_args, &argc, &argv);
        if (rc != kExitOk && launched_by_mpi()) abort_mpi(rc);  // the other ranks must not wait for this one
        finalize_mpi();
        return rc;
    } catch (...) {  // bad_alloc: exit 4; an exception other than prophet::Error: exit 1 with its type
        const prophet::Error e = prophet::current_exception_as_error();
        std::fprintf(stderr, "prophet: %s\n", e.what());
        return e.exit_code();
    }
    return kExitUsage;
}
