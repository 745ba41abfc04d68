// cmd_trace.h: `prophet trace`: inspect, convert, import and export routing traces.
#pragma once

#include "common.h"

namespace prophet::cli {

struct TraceArgs {
    std::string action;  // info | convert | import | export
    std::vector<std::string> inputs;  // file, generator .toml, (export) a trace or run id; import --format: files
    std::string output;               // convert / export / import --format: trace file to write
    std::string format = "binary";    // convert / export: binary | csv; import: an engine format (lib/import)
    int devices = 0;                  // import --format: D of the trace (formats without a per-device split)
    int top_k = 0;                    // import --format: K (formats that do not record it)
    int64_t rescale_tokens = 0;       // import --format: scale every step to N tokens (0 = exact)
    int ep_size = 0, etp_size = 1, pp_size = 1;  // import --format megatron: the run's expert-parallel grid
    std::string store_path = "results/prophet.db";
    bool json = false;
};

CLI::App* add_trace_command(CLI::App& app, TraceArgs& args);
int run_trace(const TraceArgs& args);

}  // namespace prophet::cli
