#include "cmd_trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "trace/trace.h"

namespace prophet::cli {

CLI::App* add_trace_command(CLI::App& app, TraceArgs& args) {
    CLI::App* cmd = app.add_subcommand("trace", "inspect, convert, import or export routing traces");
    cmd->add_option("action", args.action, "info | convert | import | export")
        ->required()
        ->check(CLI::IsMember({"info", "convert", "import", "export"}));
    cmd->add_option("input", args.input, "info/convert/import: a trace file or generator .toml; export: a trace or run id")
        ->required();
    cmd->add_option("-o,--out", args.output, "convert/export: the binary trace file to write (docs/trace-format.md)");
    cmd->add_option("--format", args.format, "convert/export: binary (docs/trace-format.md) or csv")
        ->check(CLI::IsMember({"binary", "csv"}))
        ->capture_default_str();
    cmd->add_option("--store", args.store_path, "import/export: the SQLite store")->capture_default_str();
    cmd->add_flag("--json", args.json, "info: JSON on stdout");
    cmd->footer(
        "Examples:\n"
        "  prophet trace info experiments/traces/zipf-e16-k2.toml\n"
        "  prophet trace convert experiments/traces/zipf-e16-k2.toml -o /tmp/zipf.ptrace\n"
        "  prophet trace convert /tmp/zipf.ptrace --format csv -o /tmp/zipf.csv   (and back: convert zipf.csv)\n"
        "  prophet trace import /tmp/zipf.ptrace          (prints the trace id; plan with --trace trace:<id>)\n"
        "  prophet trace export <trace-or-run-id> -o /tmp/out.ptrace");
    return cmd;
}

int run_trace(const TraceArgs& args) {
    if ((args.action == "convert" || args.action == "export") && args.output.empty())
        throw Error(kExitUsage, "usage error: prophet trace " + args.action + " needs --out FILE");
    std::error_code ec;
    if (!args.output.empty() && std::filesystem::is_directory(args.output, ec))
        throw Error(kExitUsage, "usage error: --out " + args.output + " is a directory; give the file to write, e.g. " +
                                    (std::filesystem::path(args.output) / "trace.ptrace").string());
    const auto write = [&](const Trace& trace) {
        if (args.format == "csv")
            write_trace_csv(trace, args.output);
        else
            write_trace_file(trace, args.output);
    };
    if (args.action == "export") {
        Store store = Store::open(args.store_path);
        const Trace trace = store.load_trace(args.input);
        write(trace);
        std::fprintf(stderr, "prophet trace: wrote %s\n", args.output.c_str());
        return kExitOk;
    }
    const Trace trace = load_trace(args.input);
    validate_trace(trace, args.input);
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
    const TraceMeta& m = trace.meta;
    const std::vector<double> js = consecutive_js_divergence(trace);
    double js_mean = 0, js_max = 0;
    for (double v : js) {
        js_mean += v / static_cast<double>(js.size());
        js_max = std::max(js_max, v);
    }
    // locality per layer: mean JS divergence of consecutive iterations (js is [(I-1)*L], iteration-major)
    std::vector<double> js_layer(m.num_layers, 0.0);
    const int pairs = m.num_iterations - 1;
    for (int i = 0; i < pairs; ++i)
        for (int l = 0; l < m.num_layers; ++l) js_layer[l] += js[static_cast<size_t>(i) * m.num_layers + l] / pairs;
    // skew of the first iteration: the heaviest expert's share of the token-expert assignments (uniform 1/E),
    // averaged over layers
    double top_share = 0;
    for (int l = 0; l < m.num_layers; ++l) {
        const std::vector<int64_t> loads = expert_loads(trace, 0, l);
        int64_t total = 0, top = 0;
        for (int64_t v : loads) {
            total += v;
            top = std::max(top, v);
        }
        top_share += total > 0 ? static_cast<double>(top) / total / m.num_layers : 0.0;
    }
    if (args.json) {
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
                            {"js_divergence_mean", js_mean},
                            {"js_divergence_max", js_max},
                            {"top_expert_share_iter0", top_share},
                            {"top_expert_share_uniform", 1.0 / m.num_experts},
                            {"js_divergence_per_layer", js_layer},
                            {"js_divergence", js}};
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("source                %s\n", m.source.c_str());
    std::printf("shape                 I=%d iterations x L=%d layers x D=%d devices x E=%d experts, top-%d\n",
                m.num_iterations, m.num_layers, m.num_devices, m.num_experts, m.top_k);
    std::printf("tokens per iteration  %lld\n", static_cast<long long>(m.tokens_per_iteration));
    std::printf("model dims            C=%d F=%d T=%d\n", m.d_model, m.d_ffn, m.seq_len);
    std::printf("transitions           %s\n", trace.has_transitions() ? "recorded" : "none");
    std::printf("heaviest expert share %.3f of the assignments (iteration 0, mean over layers; uniform = 1/E = %.3f)\n",
                top_share, 1.0 / m.num_experts);
    std::printf("JS divergence         consecutive iterations: mean %.4g, max %.4g (nats, max ln 2)\n", js_mean, js_max);
    if (pairs > 0) {
        std::printf("JS per layer          ");
        for (int l = 0; l < m.num_layers; ++l) std::printf("%s%.3g", l ? " " : "", js_layer[l]);
        std::printf("  (mean over consecutive iterations: how well the previous iteration predicts the next)\n");
    }
    return kExitOk;
}

}  // namespace prophet::cli
