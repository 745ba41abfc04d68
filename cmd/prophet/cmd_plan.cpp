#include "cmd_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "balance/cluster.h"
#include "balance/evaluate.h"
#include "balance/options.h"
#include "core/error.h"
#include "core/timer.h"
#include "trace/trace.h"

namespace prophet::cli {

const Schema& plan_schema() {
    static const Schema schema = [] {
        Schema s;
        s.add_string("store.path", "results/prophet.db", {}, "SQLite file every run records into");
        s.add_string("run.experiment", "plan", {}, "experiment label stored with the run");
        s.add_int("run.seed", 0, 0, 1e18, "seed recorded with the run (plan itself is deterministic)");
        add_balance_keys(s, /*allow_all=*/true, "all");
        s.add_int("plan.repeats", 5, 1, 1000, "timing repeats per planning call (median reported)");
        add_cost_model_keys(s, "");
        s.add_bool("plan.record_layers", true, "store one plan_results row per policy, iteration and layer");
        s.add_bool("plan.save_trace", true, "store the trace with the run (skipped when it came from the store)");
        return s;
    }();
    return schema;
}

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args) {
    CLI::App* plan = app.add_subcommand(
        "plan", "run placement policies on a routing trace and a cluster: predicted MoE-layer time, balance, bytes");
    plan->add_option("-t,--trace", args.trace,
                     "trace: generator .toml (experiments/traces/), binary trace file, or run:<id> / trace:<id> (required)");
    plan->add_option("-k,--cluster", args.cluster, "cluster file (experiments/clusters/) (required)")
        ->check(CLI::ExistingFile);
    plan->add_option("-p,--policy", args.policy, "policy name or all (sets balance.policy)");
    add_common_options(plan, args.common);
    plan->footer(
        "Policies: static fastermoe prophet prophet-oracle eplb moetuner top2 top3 exhaustive moetuner-joint.\n"
        "`all` runs every policy; exhaustive and moetuner-joint are skipped (with a note) on instances too large.\n"
        "Example:\n"
        "  prophet plan --trace experiments/traces/zipf-e16-k2.toml --cluster experiments/clusters/hpwnv-16.toml "
        "--policy all");
    return plan;
}

namespace {

bool is_store_reference(const std::string& s) { return s.rfind("run:", 0) == 0 || s.rfind("trace:", 0) == 0; }

struct Loaded {
    Trace trace;
    bool from_store = false;
};

Loaded load_any_trace(const std::string& spec, const std::string& store_path) {
    Loaded out;
    if (is_store_reference(spec)) {
        Store store = Store::open(store_path);
        out.trace = store.load_trace(spec.substr(spec.find(':') + 1));
        out.from_store = true;
    } else {
        if (access(spec.c_str(), R_OK) != 0)
            throw_input_error(spec, "cannot read the trace", "give a generator .toml, a trace file or run:<id>");
        out.trace = load_trace(spec);
    }
    validate_trace(out.trace, spec);
    return out;
}

nlohmann::json score_json(const PolicyScore& p, double static_ms) {
    nlohmann::json j;
    j["name"] = p.name;
    j["skipped"] = p.skipped;
    if (!p.note.empty()) j["note"] = p.note;
    if (p.skipped) return j;
    j["predicted_ms"] = p.mean_system_ms;
    j["system_cost_eq"] = system_cost_eq(p.name);
    j["predicted_eq6_ms"] = p.mean_eq6_ms;
    j["predicted_eq8_ms"] = p.mean_eq8_ms;
    j["speedup_vs_static"] = p.mean_system_ms > 0 ? static_ms / p.mean_system_ms : 0.0;
    j["max_mean_load"] = p.mean_max_mean_load;
    j["balance_std"] = p.mean_balance_std;
    j["rb_vs_static"] = p.mean_rb;
    j["a2a_bytes"] = p.mean_a2a_bytes;
    j["trans_bytes"] = p.mean_trans_bytes;
    j["agg_bytes"] = p.mean_agg_bytes;
    j["replicas"] = p.mean_replicas;
    j["plan_us"] = p.median_plan_us;
    j["dropped_tokens"] = p.mean_dropped_tokens;
    return j;
}

void print_table(const std::vector<PolicyScore>& scores, double static_ms) {
    std::printf("# %-15s %9s %9s %9s %7s %8s %9s %7s %10s %10s %10s %6s %9s\n", "policy", "time", "Eq6", "Eq8",
                "xstatic", "max/mean", "std(H)", "RB", "A2A", "Trans", "Agg", "repl", "plan");
    std::printf("# %-15s %9s %9s %9s %7s %8s %9s %7s %10s %10s %10s %6s %9s\n", "", "(ms)", "(ms)", "(ms)", "", "",
                "(tokens)", "", "(bytes)", "(bytes)", "(bytes)", "", "(us)");
    for (const PolicyScore& p : scores) {
        if (p.skipped) {
            std::printf("  %-15s skipped: %s\n", p.name.c_str(), p.note.c_str());
            continue;
        }
        std::printf("  %-15s %9.3f %9.3f %9.3f %7.3f %8.3f %9.1f %7.2f %10s %10s %10s %6.1f %9.1f\n", p.name.c_str(),
                    p.mean_system_ms, p.mean_eq6_ms, p.mean_eq8_ms,
                    p.mean_system_ms > 0 ? static_ms / p.mean_system_ms : 0.0, p.mean_max_mean_load,
                    p.mean_balance_std, p.mean_rb, fmt_bytes(p.mean_a2a_bytes).c_str(),
                    fmt_bytes(p.mean_trans_bytes).c_str(), fmt_bytes(p.mean_agg_bytes).c_str(), p.mean_replicas,
                    p.median_plan_us);
    }
    std::printf("# time: the policy's own system, Eq 8 for prophet/prophet-oracle (block-wise scheduler hides Trans/Agg),"
                " Eq 6 for the others; xstatic = static time / time; per MoE layer, means over iterations and layers\n");
    for (const PolicyScore& p : scores)
        if (!p.skipped && !p.note.empty()) std::printf("# note: %s: %s\n", p.name.c_str(), p.note.c_str());
}

}  // namespace

int run_plan(const PlanArgs& args) {
    const Schema& schema = plan_schema();
    if (args.common.help_config) {
        print_schema(schema, "plan");
        return kExitOk;
    }
    if (args.trace.empty() || args.cluster.empty())
        throw Error(kExitUsage, "usage error: prophet plan needs --trace FILE and --cluster FILE (see prophet plan --help)");
    Config config = resolve_config(schema, args.common);
    if (!args.policy.empty()) config.apply_set("balance.policy=" + args.policy);
    const BalanceOptions options = balance_options_from(config);
    const std::string store_path = config.get_string("store.path");

    // ---- inputs, all validated before anything is written -----------------------------------------------
    Loaded loaded = load_any_trace(args.trace, store_path);
    const Trace& trace = loaded.trace;
    const TraceMeta& meta = trace.meta;
    const ClusterSpec cluster = load_cluster_file(args.cluster);
    const TraceShape shape{meta.num_devices, meta.num_experts, meta.tokens_per_iteration,
                           meta.d_model,     meta.d_ffn,       meta.seq_len};
    const CostModel cost = cost_model_for_trace(cluster, args.cluster, shape, args.trace, config,
                                                "--set plan.d_model=1024 --set plan.d_ffn=2048");

    std::vector<std::string> policies;
    const std::string& chosen = config.get_string("balance.policy");
    const bool all = chosen == "all";
    if (all)
        policies = policy_names();
    else
        policies = {chosen};

    const std::vector<double> js = consecutive_js_divergence(trace);
    double js_mean = 0, js_max = 0;
    for (double v : js) {
        js_mean += v / static_cast<double>(js.size());
        js_max = std::max(js_max, v);
    }
    std::fprintf(stderr,
                 "prophet plan: trace %s: I=%d L=%d D=%d E=%d k=%d, %lld tokens/iter, C=%d F=%d; "
                 "JS divergence of consecutive iterations: mean %.4g, max %.4g\n",
                 meta.source.c_str(), meta.num_iterations, meta.num_layers, meta.num_devices, meta.num_experts,
                 meta.top_k, static_cast<long long>(meta.tokens_per_iteration), cost.model.d_model, cost.model.d_ffn,
                 js_mean, js_max);
    std::fprintf(stderr, "prophet plan: cluster %s: D=%d, %d per node, %.3g TFLOP/s, FNEC %.3g ms%s\n",
                 cluster.name.c_str(), cluster.num_devices, cluster.devices_per_node, cluster.compute_flops / 1e12,
                 cost.fnec_s() * 1e3, cost.topology_aware ? ", topology-aware" : "");
    if (args.common.dry_run) {
        std::string list;
        for (const auto& p : policies) list += (list.empty() ? "" : " ") + p;
        std::printf("dry run: would evaluate [%s] on %d iterations x %d layers and record into %s\n", list.c_str(),
                    meta.num_iterations, meta.num_layers, store_path.c_str());
        return kExitOk;
    }

    // ---- evaluate ------------------------------------------------------------------------------------------
    TraceView view;
    view.counts = trace.counts.data();
    view.transitions = trace.has_transitions() ? trace.transitions.data() : nullptr;
    view.num_iterations = meta.num_iterations;
    view.num_layers = meta.num_layers;
    view.num_devices = meta.num_devices;
    view.num_experts = meta.num_experts;
    EvalSettings settings;
    settings.options = options;
    settings.plan_repeats = static_cast<int>(config.get_int("plan.repeats"));
    settings.profile_iterations = static_cast<int>(config.get_int("balance.profile_iterations"));
    settings.num_nodes = cluster.num_devices / cluster.devices_per_node;

    std::vector<PolicyScore> scores;
    const int64_t started = now_ns();
    for (size_t i = 0; i < policies.size(); ++i) {
        std::fprintf(stderr, "prophet plan: [%zu/%zu] %s ...\n", i + 1, policies.size(), policies[i].c_str());
        scores.push_back(evaluate_policy(policies[i], view, cost, settings, /*allow_skip=*/all));
    }
    double static_ms = 0;
    for (const PolicyScore& p : scores)
        if (p.name == "static") static_ms = p.mean_system_ms;
    if (static_ms == 0) {  // a single policy: score static too, for the ratio
        EvalSettings quick = settings;
        quick.plan_repeats = 1;
        static_ms = evaluate_policy("static", view, cost, quick, false).mean_system_ms;
    }

    // ---- record: one transaction, so a failure leaves nothing half-written -----------------------------------
    Store store = Store::open(store_path);
    RunInfo info = make_run_info("plan", config, args.common);
    info.experiment = config.get_string("run.experiment");
    info.seed = config.get_int("run.seed");
    info.world_size = meta.num_devices;
    info.backend = "model";
    std::string run_id;
    const bool record_layers = config.get_bool("plan.record_layers");
    store.transaction([&] {
        run_id = store.begin_run(info);
        auto params = config.flat();
        params.emplace_back("input.trace", args.trace);
        params.emplace_back("input.cluster", args.cluster);
        params.emplace_back("trace.source", meta.source);
        store.put_params(run_id, params);
        if (config.get_bool("plan.save_trace") && !loaded.from_store) store.save_trace(trace, run_id);
        for (const PolicyScore& p : scores) {
            if (p.skipped) {
                store.put_event(run_id, 0, -1, "info", "policy_skipped", p.name + ": " + p.note, "");
                continue;
            }
            for (const char* key :
                 {"time_ms", "eq6_ms", "eq8_ms", "max_mean_load", "balance_std", "rb_vs_static", "plan_us"}) {
                const std::string k = key;
                const double v = k == "time_ms"         ? p.mean_system_ms
                                 : k == "eq6_ms"        ? p.mean_eq6_ms
                                 : k == "eq8_ms"        ? p.mean_eq8_ms
                                 : k == "max_mean_load" ? p.mean_max_mean_load
                                 : k == "balance_std"   ? p.mean_balance_std
                                 : k == "rb_vs_static"  ? p.mean_rb
                                                        : p.median_plan_us;
                store.put_metric(run_id, "plan." + p.name + "." + k, 0, v);
            }
            if (!record_layers) continue;
            for (const LayerScore& s : p.layers) {
                PlanResultRow row;
                row.run_id = run_id;
                row.policy = p.name;
                row.iteration = s.iteration;
                row.layer = s.layer;
                row.predicted_eq6_ms = s.cost.eq6_s * 1e3;
                row.predicted_eq8_ms = s.cost.eq8_s * 1e3;
                row.max_mean_load = s.max_mean_load;
                row.balance_std = s.balance_std;
                row.a2a_bytes = s.cost.a2a_bytes;
                row.trans_bytes = s.cost.trans_bytes;
                row.agg_bytes = s.cost.agg_bytes;
                row.replicas = s.replicas;
                row.plan_us = s.plan_us;
                row.dropped_tokens = s.dropped_tokens;
                store.put_plan_result(row);
            }
        }
        store.finish_run(run_id, "finished", 0, "");
    });
    const double elapsed_s = (now_ns() - started) * 1e-9;

    if (args.common.json) {
        nlohmann::json out;
        out["schema_version"] = 1;
        out["run_id"] = run_id;
        out["trace"] = {{"source", meta.source},           {"iterations", meta.num_iterations},
                        {"layers", meta.num_layers},       {"devices", meta.num_devices},
                        {"experts", meta.num_experts},     {"top_k", meta.top_k},
                        {"tokens_per_iteration", meta.tokens_per_iteration},
                        {"js_divergence_mean", js_mean},   {"js_divergence_max", js_max}};
        out["cluster"] = cluster.name;
        out["policies"] = nlohmann::json::array();
        for (const PolicyScore& p : scores) out["policies"].push_back(score_json(p, static_ms));
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("# prophet plan | trace %s | cluster %s | run %s | means over %d iterations x %d layers\n",
                    meta.source.c_str(), cluster.name.c_str(), run_id.c_str(), meta.num_iterations, meta.num_layers);
        print_table(scores, static_ms);
    }
    std::fprintf(stderr, "prophet plan: recorded run %s in %s (%.1f s)\n", run_id.c_str(), store_path.c_str(), elapsed_s);
    return kExitOk;
}

}  // namespace prophet::cli
