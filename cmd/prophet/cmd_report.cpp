// cmd_report.cpp: `prophet report`: finds a Python with pandas + seaborn + matplotlib and runs
// report/build_report.py on a store; `prophet sweep` calls run_report at its end.
#include "cmd_report.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/process.h"

namespace prophet::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kInstallHint =
    "install them: apt-get install python3-pandas python3-seaborn python3-matplotlib (or point PROPHET_PYTHON at a "
    "python3 that has them)";

// report/build_report.py of this binary's source tree (PROPHET_SOURCE_DIR), else ./report; empty when neither exists.
std::string build_report_script() {
    std::error_code ec;
#ifdef PROPHET_SOURCE_DIR
    const fs::path source = fs::path(PROPHET_SOURCE_DIR) / "report" / "build_report.py";
    if (fs::is_regular_file(source, ec)) return source.string();
#endif
    const fs::path local = fs::path("report") / "build_report.py";
    if (fs::is_regular_file(local, ec)) return local.string();
    return "";
}

// std::system's status as an exit code (-1: killed by a signal or not run)
int exit_code_of(int status) { return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

// PROPHET_PYTHON, else /usr/bin/python3 (the system one has the Debian packages ci/install-deps.sh installs)
std::string python_path() {
    const char* env = std::getenv("PROPHET_PYTHON");
    return env && *env ? env : "/usr/bin/python3";
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, ReportArgs& args) {
    CLI::App* cmd = app.add_subcommand(
        "report", "write REPORT.md (a summary table per experiment, then the figures) and the figures as PNG, PDF "
                  "and CSV from a store");
    cmd->add_option("--db", args.db, "the SQLite store to read (opened read-only)")->capture_default_str();
    cmd->add_option("--out", args.out, "directory for the figures and their CSV data (default: <dir of db>/figures)");
    cmd->add_option("--report", args.report, "the markdown file to write (default: <dir of db>/REPORT.md)");
    cmd->add_option("--experiment", args.experiments,
                    "only runs of these experiments (run.experiment / the sweep's name; repeatable)");
    cmd->add_option("--section", args.section,
                    "all: summary, the papers' tables beside ours, figures; paper: only the papers' tables and figures "
                    "beside ours (report/paper_sections.py, docs/paper-comparison.md)")
        ->check(CLI::IsMember({"all", "paper"}))
        ->capture_default_str();
    cmd->footer(
        "Runs report/build_report.py with PROPHET_PYTHON or /usr/bin/python3, which needs pandas, seaborn and\n"
        "matplotlib (apt-get install python3-pandas python3-seaborn python3-matplotlib).\n"
        "Exit codes: 0 written (or 'nothing to report' for a store without runs), 1 a figure failed or no such\n"
        "Python, 5 no store at --db or one that cannot be read (corrupt pages: the cause is printed). A read-only\n"
        "store (file, directory or mount) is read like any other.\n"
        "Example:\n  prophet report --db results/prophet.db --experiment main-real main-sim");
    return cmd;
}

int run_report(const ReportArgs& args) {
    std::error_code ec;
    if (!fs::is_regular_file(args.db, ec)) {
        std::fprintf(stderr, "prophet report: no store at %s (run a sweep or train first, or pass --db FILE)\n",
                     args.db.c_str());
        return kExitDatabase;
    }
    const std::string script = build_report_script();
    if (script.empty()) {
        std::fprintf(stderr, "prophet report: report/build_report.py not found (run from the source tree)\n");
        return kExitRunFailed;
    }
    const std::string python = python_path();
    const std::string probe = shell_quoted(python) + " -c 'import pandas, seaborn, matplotlib' >/dev/null 2>&1";
    if (exit_code_of(std::system(probe.c_str())) != 0) {
        std::fprintf(stderr, "prophet report: %s cannot import pandas, seaborn and matplotlib; %s\n", python.c_str(),
                     kInstallHint);
        return kExitRunFailed;
    }
    fs::path dir = fs::path(args.db).parent_path();
    if (dir.empty()) dir = ".";
    const std::string out = args.out.empty() ? (dir / "figures").string() : args.out;
    const std::string report = args.report.empty() ? (dir / "REPORT.md").string() : args.report;
    std::string command = shell_quoted(python) + " " + shell_quoted(script) + " --db " + shell_quoted(args.db) +
                          " --out " + shell_quoted(out) + " --report " + shell_quoted(report);
    if (!args.experiments.empty()) {
        command += " --experiment";
        for (const std::string& e : args.experiments) command += " " + shell_quoted(e);
    }
    if (args.section != "all") command += " --section " + shell_quoted(args.section);
    if (args.quiet) command += " >/dev/null 2>&1";
    setenv("PROPHET_BINARY", self_binary().c_str(), 1);  // report/common.py asks it for the policy registry
    std::fflush(stdout);
    std::fflush(stderr);
    const int code = exit_code_of(std::system(command.c_str()));
    if (code == kExitOk || code == kExitDatabase) return code;  // build_report.py printed its line
    std::fprintf(stderr, "prophet report: report/build_report.py exited with code %d%s\n", code,
                 fs::is_regular_file(report, ec) ? " (a figure failed; the report names it)" : "; no report written");
    return kExitRunFailed;
}

}  // namespace prophet::cli
