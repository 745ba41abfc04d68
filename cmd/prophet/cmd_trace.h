// cmd_trace.h: `prophet trace`: inspect, convert, import and export routing traces.
#pragma once

#include "common.h"

namespace prophet::cli {

struct TraceArgs {
    std::string action;  // info | convert | import | export
    std::string input;   // file, generator .toml, or (export) a trace or run id
    std::string output;  // convert / export: trace file to write
    std::string format = "binary";  // convert / export: binary | csv
    std::string store_path = "results/prophet.db";
    bool json = false;
};

CLI::App* add_trace_command(CLI::App& app, TraceArgs& args);
int run_trace(const TraceArgs& args);

}  // namespace prophet::cli
