#include "cmd_trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "import/import.h"
#include "trace/trace.h"

namespace prophet::cli {

CLI::App* add_trace_command(CLI::App& app, TraceArgs& args) {
    CLI::App* cmd = app.add_subcommand("trace", "inspect, convert, import or export routing traces");
    cmd->add_option("action", args.action, "info | convert | import | export")
        ->required()
        ->check(CLI::IsMember({"info", "convert", "import", "export"}));
    cmd->add_option("input", args.inputs,
                    "info/convert/import: a trace file or generator .toml; export: a trace or run id; "
                    "import --format ENGINE: the engine's file(s) or directory")
        ->required();
    cmd->add_option("-o,--out", args.output,
                    "convert/export: the trace file to write; import --format ENGINE: write this binary trace "
                    "file instead of importing into the store");
    std::vector<std::string> formats = {"binary", "csv"};
    for (const std::string& f : import_formats()) formats.push_back(f);
    cmd->add_option("--format", args.format,
                    "convert/export: binary (docs/trace-format.md) or csv; import: sglang, vllm, megatron, trtllm "
                    "or eplb reads that engine's expert-load file (docs/trace-format.md, section 7)")
        ->check(CLI::IsMember(formats))
        ->capture_default_str();
    cmd->add_option("--devices", args.devices,
                    "import --format: devices of the trace, for files without a per-device split (sglang, vllm, "
                    "eplb, megatron: default its --ep-size); counts are spread uniformly");
    cmd->add_option("--top-k", args.top_k, "import --format: experts per token (trtllm records it)");
    cmd->add_option("--rescale-tokens", args.rescale_tokens,
                    "import --format: scale every step to N tokens when steps route different numbers (serving)");
    cmd->add_option("--ep-size", args.ep_size, "import --format megatron: --expert-model-parallel-size of the run");
    cmd->add_option("--etp-size", args.etp_size, "import --format megatron: --expert-tensor-parallel-size (1)");
    cmd->add_option("--pp-size", args.pp_size, "import --format megatron: --pipeline-model-parallel-size (1)");
    cmd->add_option("--store", args.store_path, "import/export: the SQLite store")->capture_default_str();
    cmd->add_flag("--json", args.json, "info: JSON on stdout");
    cmd->footer(
        "Examples:\n"
        "  prophet trace info experiments/traces/zipf-e16-k2.toml\n"
        "  prophet trace convert experiments/traces/zipf-e16-k2.toml -o /tmp/zipf.ptrace\n"
        "  prophet trace convert /tmp/zipf.ptrace --format csv -o /tmp/zipf.csv   (and back: convert zipf.csv)\n"
        "  prophet trace import /tmp/zipf.ptrace          (prints the trace id; plan with --trace trace:<id>)\n"
        "  prophet trace import --format vllm load.json --devices 16 --top-k 8 --rescale-tokens 2048 -o v.ptrace\n"
        "  prophet trace import --format trtllm expert_statistic/ -o t.ptrace\n"
        "  prophet trace export <trace-or-run-id> -o /tmp/out.ptrace");
    return cmd;
}

namespace {

bool is_engine_format(const std::string& format) { return format != "binary" && format != "csv"; }

// import --format ENGINE: the engine's files into a trace file (-o) or the store.
int run_engine_import(const TraceArgs& args) {
    ImportOptions options;
    options.format = args.format;
    options.files = args.inputs;
    options.devices = args.devices;
    options.top_k = args.top_k;
    options.rescale_tokens = args.rescale_tokens;
    options.ep_size = args.ep_size;
    options.etp_size = args.etp_size;
    options.pp_size = args.pp_size;
    if (options.format == "megatron" && options.devices == 0) options.devices = options.ep_size;
    const ImportResult result = import_engine_trace(options);
    for (const std::string& note : result.notes) std::fprintf(stderr, "prophet trace import: %s\n", note.c_str());
    const TraceMeta& m = result.trace.meta;
    std::fprintf(stderr,
                 "prophet trace import: %d iterations x %d layers x %d devices x %d experts, top-%d, %lld tokens "
                 "per iteration; source %s\n",
                 m.num_iterations, m.num_layers, m.num_devices, m.num_experts, m.top_k,
                 static_cast<long long>(m.tokens_per_iteration), m.source.c_str());
    if (!args.output.empty()) {
        write_trace_file(result.trace, args.output);
        std::fprintf(stderr, "prophet trace: wrote %s\n", args.output.c_str());
        return kExitOk;
    }
    Store store = Store::open(args.store_path);
    const std::string id = store.save_trace(result.trace, "");
    std::printf("%s\n", id.c_str());
    std::fprintf(stderr, "prophet trace: imported as trace:%s into %s\n", id.c_str(), args.store_path.c_str());
    return kExitOk;
}

// the usage checks of the binary/csv actions (info, convert, import, export): one input, --out where written
void check_trace_args(const TraceArgs& args) {
    const bool import_only = args.devices != 0 || args.top_k != 0 || args.rescale_tokens != 0 || args.ep_size != 0 ||
                             args.etp_size != 1 || args.pp_size != 1;
    if (import_only)
        throw Error(kExitUsage,
                    "usage error: --devices, --top-k, --rescale-tokens, --ep-size, --etp-size and "
                    "--pp-size apply to prophet trace import --format ENGINE only");
    if (args.inputs.size() != 1)
        throw Error(kExitUsage, "usage error: prophet trace " + args.action + " takes one input, got " +
                                    std::to_string(args.inputs.size()));
    if ((args.action == "convert" || args.action == "export") && args.output.empty())
        throw Error(kExitUsage, "usage error: prophet trace " + args.action + " needs --out FILE");
    std::error_code ec;
    if (!args.output.empty() && std::filesystem::is_directory(args.output, ec))
        throw Error(kExitUsage, "usage error: --out " + args.output + " is a directory; give the file to write, e.g. " +
                                    (std::filesystem::path(args.output) / "trace.ptrace").string());
}

// what prophet trace info reports beyond the header: locality and skew
struct TraceInfoStats {
    std::vector<double> js;  // [(I-1)*L], iteration-major: JS divergence of consecutive iterations, nats
    double js_mean = 0, js_max = 0;
    std::vector<double> js_layer;  // [L]: mean of js over consecutive iterations
    double top_share = 0;          // heaviest expert's share of iteration 0's assignments, mean over layers
};

TraceInfoStats trace_info_stats(const Trace& trace) {
    const TraceMeta& m = trace.meta;
    TraceInfoStats s;
    s.js = consecutive_js_divergence(trace);
    for (double v : s.js) {
        s.js_mean += v / static_cast<double>(s.js.size());
        s.js_max = std::max(s.js_max, v);
    }
    // locality per layer: mean JS divergence of consecutive iterations (js is [(I-1)*L], iteration-major)
    s.js_layer.assign(m.num_layers, 0.0);
    const int pairs = m.num_iterations - 1;
    for (int i = 0; i < pairs; ++i)
        for (int l = 0; l < m.num_layers; ++l) s.js_layer[l] += s.js[static_cast<size_t>(i) * m.num_layers + l] / pairs;
    // skew of the first iteration: the heaviest expert's share of the token-expert assignments (uniform 1/E),
    // averaged over layers
    for (int l = 0; l < m.num_layers; ++l) {
        const std::vector<int64_t> loads = expert_loads(trace, 0, l);
        int64_t total = 0, top = 0;
        for (int64_t v : loads) {
            total += v;
            top = std::max(top, v);
        }
        s.top_share += total > 0 ? static_cast<double>(top) / total / m.num_layers : 0.0;
    }
    return s;
}

void print_trace_info_json(const Trace& trace, const TraceInfoStats& s) {
    const TraceMeta& m = trace.meta;
    nlohmann::json j = {{"source", m.source},
                        {"iterations", m.num_iterations},
                        {"layers", m.num_layers},
                        {"devices", m.num_devices},
                        {"experts", m.num_experts},
                        {"top_k", m.top_k},
                        {"tokens_per_iteration", m.tokens_per_iteration},
                        {"d_model", m.d_model},
                        {"d_ffn", m.d_ffn},
                        {"seq_len", m.seq_len},
                        {"has_transitions", trace.has_transitions()},
                        {"js_divergence_mean", s.js_mean},
                        {"js_divergence_max", s.js_max},
                        {"top_expert_share_iter0", s.top_share},
                        {"top_expert_share_uniform", 1.0 / m.num_experts},
                        {"js_divergence_per_layer", s.js_layer},
                        {"js_divergence", s.js}};
    std::printf("%s\n", j.dump(2).c_str());
}

void print_trace_info_text(const Trace& trace, const TraceInfoStats& s) {
    const TraceMeta& m = trace.meta;
    std::printf("source                %s\n", m.source.c_str());
    std::printf("shape                 I=%d iterations x L=%d layers x D=%d devices x E=%d experts, top-%d\n",
                m.num_iterations, m.num_layers, m.num_devices, m.num_experts, m.top_k);
    std::printf("tokens per iteration  %lld\n", static_cast<long long>(m.tokens_per_iteration));
    std::printf("model dims            C=%d F=%d T=%d\n", m.d_model, m.d_ffn, m.seq_len);
    std::printf("transitions           %s\n", trace.has_transitions() ? "recorded" : "none");
    std::printf("heaviest expert share %.3f of the assignments (iteration 0, mean over layers; uniform = 1/E = %.3f)\n",
                s.top_share, 1.0 / m.num_experts);
    std::printf("JS divergence         consecutive iterations: mean %.4g, max %.4g (nats, max ln 2)\n", s.js_mean,
                s.js_max);
    if (m.num_iterations - 1 > 0) {
        std::printf("JS per layer          ");
        for (int l = 0; l < m.num_layers; ++l) std::printf("%s%.3g", l ? " " : "", s.js_layer[l]);
        std::printf("  (mean over consecutive iterations: how well the previous iteration predicts the next)\n");
    }
}

}  // namespace

int run_trace(const TraceArgs& args) {
    const bool engine = is_engine_format(args.format);
    if (engine && args.action != "import")
        throw Error(kExitUsage, "usage error: --format " + args.format +
                                    " is an engine format: only prophet trace "
                                    "import reads it (convert and export write binary or csv)");
    if (engine) return run_engine_import(args);
    check_trace_args(args);
    const std::string& input = args.inputs[0];
    const auto write = [&](const Trace& trace) {
        if (args.format == "csv")
            write_trace_csv(trace, args.output);
        else
            write_trace_file(trace, args.output);
    };
    if (args.action == "export") {
        Store store = Store::open(args.store_path);
        const Trace trace = store.load_trace(input);
        write(trace);
        std::fprintf(stderr, "prophet trace: wrote %s\n", args.output.c_str());
        return kExitOk;
    }
    const Trace trace = load_trace(input);
    validate_trace(trace, input);
    if (args.action == "convert") {
        write(trace);
        std::fprintf(stderr, "prophet trace: wrote %s\n", args.output.c_str());
        return kExitOk;
    }
    if (args.action == "import") {
        Store store = Store::open(args.store_path);
        const std::string id = store.save_trace(trace, "");
        std::printf("%s\n", id.c_str());
        std::fprintf(stderr, "prophet trace: imported as trace:%s into %s\n", id.c_str(), args.store_path.c_str());
        return kExitOk;
    }
    // info
    const TraceInfoStats stats = trace_info_stats(trace);
    if (args.json)
        print_trace_info_json(trace, stats);
    else
        print_trace_info_text(trace, stats);
    return kExitOk;
}

}  // namespace prophet::cli
