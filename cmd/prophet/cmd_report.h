// cmd_report.h: `prophet report`: REPORT.md and its figures from a store, by report/build_report.py (docs/reports.md).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace prophet::cli {

struct ReportArgs {
    std::string db = "results/prophet.db";
    std::string out;     // figures directory (empty: <dir of db>/figures)
    std::string report;  // the markdown file (empty: <dir of db>/REPORT.md)
    std::vector<std::string> experiments;  // only these experiments (empty: all)
    std::string section = "all";           // all, or paper: only the papers' tables beside ours
    bool quiet = false;  // the scripts' output to /dev/null (prophet sweep's closing report)
};

CLI::App* add_report_command(CLI::App& app, ReportArgs& args);
// Exit codes: 0 report written or nothing to report, 1 a figure script failed or no Python with pandas + seaborn,
// 5 no store (or not a SQLite file) at args.db. Prints one line on stderr for each problem.
int run_report(const ReportArgs& args);

}  // namespace prophet::cli
