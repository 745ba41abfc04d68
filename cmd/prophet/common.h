// common.h: what every subcommand shares: --config/--set/--json/--dry-run, config resolution, the run record
// (git sha, hardware), and the output conventions (results on stdout, logs on stderr).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.h"
#include "core/error.h"
#include "store/store.h"

namespace prophet::cli {

struct CommonArgs {
    std::vector<std::string> config_files;  // --config (repeatable, merged in order)
    std::vector<std::string> sets;          // --set key=value (repeatable, after the files)
    bool json = false;
    bool dry_run = false;
    bool help_config = false;
};

void add_common_options(CLI::App* command, CommonArgs& args);
// defaults < --config files < --set; throws prophet::Error (exit 3) on any bad key or value, and on a store.path
// given empty
Config resolve_config(const Schema& schema, const CommonArgs& args);
// A CLI11 check for an option taking a number >= 0: "abc" is "not a number", -1 is "negative", each with
// `example` ("60") as the fix. Usage errors (exit 2).
CLI::Validator non_negative_number(const std::string& example);
// prints every key of the schema (for --help-config)
void print_schema(const Schema& schema, const std::string& command);

// Prints an error found while starting a run and returns its exit code. Every rank checks the same config before
// MPI exists, and only rank 0 prints it. Under mpirun, which stops every rank once one exits non-zero, a non-root
// rank first waits 3 s so that rank 0 prints and ends the job (a non-root rank exiting first could get rank 0
// stopped before it printed: the error was then lost). A non-root rank still running after the wait found an error
// rank 0 did not (a file missing on its host) and prints it itself, naming its rank.
int report_start_error(const Error& e, int world_rank);

// Opens the store at `path` for a command that only reads or repairs one (`prophet runs`, `prophet db check`):
// a missing file is exit 5 naming the path and the fix, never a new empty store.
Store open_existing_store(const std::string& path);
// The same for a command that only reads (runs, db check): a store that cannot be written is opened read-only.
Store open_store_to_read(const std::string& path);

RunInfo make_run_info(const std::string& command, const Config& config, const CommonArgs& args);
std::string git_sha(bool* dirty);
std::string hardware_json();

// "%.3g"-style compact numbers for tables
std::string fmt(double value, int precision = 3);
std::string fmt_bytes(double bytes);

}  // namespace prophet::cli
