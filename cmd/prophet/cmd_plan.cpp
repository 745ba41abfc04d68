#include "cmd_plan.h"
#include "plan_serving.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "balance/cluster.h"
#include "balance/evaluate.h"
#include "balance/moves.h"
#include "balance/options.h"
#include "balance/policy_registry.h"
#include "balance/regime.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "plan/policy_models.h"
#include "plan_bound.h"
#include "sim/simulator.h"
#include "sim/trace_view.h"
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
        s.add_int("plan.jobs", 0, 0, 1024,
                  "threads for a generated trace's devices and for the policies, evaluated side by side (0: the "
                  "machine's hardware threads; 1: one after another, so each policy's planning time is taken with "
                  "no other policy running)");
        add_cost_model_keys(s, "");
        add_serving_keys(s);
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
    plan->add_option("-p,--policy", args.policy,
                     "policy name, all, or a comma-separated list such as static,prophet (sets balance.policy)");
    plan->add_option("-j,--jobs", args.jobs,
                     "threads: a generated trace's devices and the policies side by side (sets plan.jobs; default 0, "
                     "every hardware thread; 1 times each policy's planning with no other policy running)")
        ->check(CLI::Range(0, 1024));
    add_common_options(plan, args.common);
    plan->footer(
        "Policies: static deepspeed fastermoe prophet prophet-oracle eplb moetuner top2 top3 exhaustive "
        "moetuner-joint flow.\n"
        "`all` runs every policy; exhaustive and moetuner-joint are skipped (with a note) on instances too large.\n"
        "Regime: balance.regime = auto (default) is serving for a trace imported from sglang, vllm, trtllm or eplb\n"
        "statistics (a serving section: periodic rebalancing, balance.rebalance_every / balance.window), training\n"
        "otherwise; --set balance.regime=serving or training overrides it (docs/serving.md).\n"
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

Loaded load_any_trace(const std::string& spec, const std::string& store_path, int threads) {
    Loaded out;
    if (is_store_reference(spec)) {
        Store store = Store::open(store_path);
        out.trace = store.load_trace(spec.substr(spec.find(':') + 1));
        out.from_store = true;
    } else {
        if (access(spec.c_str(), R_OK) != 0)
            throw_input_error(spec, "cannot read the trace", "give a generator .toml, a trace file or run:<id>");
        out.trace = load_trace(spec, threads);
    }
    validate_trace(out.trace, spec);
    return out;
}

// The device count a generator .toml declares, read without generating the trace (minutes at DeepSeek-V3 scale),
// so that a cluster of another size fails first. 0 when `spec` is not a generator .toml.
int declared_generator_devices(const std::string& spec) {
    const std::string ext = ".toml";
    if (is_store_reference(spec) || spec.size() < ext.size() || spec.compare(spec.size() - ext.size(), ext.size(), ext))
        return 0;
    Config generator(trace_generator_schema(), "trace generator " + spec);
    generator.merge_toml_file(spec);
    return generator.has("trace.num_devices") ? static_cast<int>(generator.get_int("trace.num_devices")) : 0;
}

// --policy: one name, `all`, or a comma-separated list (what users type: static,prophet). Each name of a list is
// checked like balance.policy; the list is recorded as balance.policy's value. Returns the listed policies (empty
// for one name or `all`, which balance.policy holds).
std::vector<std::string> apply_policy_option(Config& config, const std::string& text) {
    if (text.find(',') == std::string::npos) {
        config.apply_set("balance.policy=" + text);
        return {};
    }
    std::vector<std::string> listed;
    std::stringstream parts(text);
    for (std::string name; std::getline(parts, name, ',');) {
        if (name.empty() || name == "all")
            throw Error(kExitUsage, "usage error: --policy " + text +
                                        ": a list names policies (e.g. static,prophet); " +
                                        (name.empty() ? "an empty name" : "`all` is not one") + " is not allowed");
        Config probe = config;
        probe.apply_set("balance.policy=" + name);  // a config error naming the bad one
        if (std::find(listed.begin(), listed.end(), name) == listed.end()) listed.push_back(name);
    }
    config.set("balance.policy", text, "--policy");
    return listed;
}

using plan::PolicyModels;
using plan::StaticTimes;

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

nlohmann::json model_json(const PolicyScore& p, double time_ms, double static_ms) {
    nlohmann::json j;
    j["predicted_ms"] = time_ms;
    j["speedup_vs_static"] = ratio(static_ms, time_ms);
    j["planned_with_eq"] = p.planned_cost_eq;  // 0: the policy has no cost objective
    j["max_mean_load"] = p.mean_max_mean_load;
    j["balance_std"] = p.mean_balance_std;
    j["rb_vs_static"] = p.mean_rb;
    j["a2a_bytes"] = p.mean_a2a_bytes;
    j["a2a_ms"] = p.mean_a2a_ms;
    j["trans_bytes"] = p.mean_trans_bytes;
    j["agg_bytes"] = p.mean_agg_bytes;
    j["replicas"] = p.mean_replicas;
    return j;
}

nlohmann::json score_json(const PolicyModels& m, const StaticTimes& st) {
    nlohmann::json j;
    j["name"] = m.name();
    j["skipped"] = m.skipped();
    if (!m.note().empty()) j["note"] = m.note();
    if (m.skipped()) return j;
    j["route_rule"] = m.eq8.route_rule;
    j["token_path"] = m.eq8.token_path;
    if (!m.eq8.solver_status.empty()) j["solver_status"] = m.eq8.solver_status;
    j["plan_us"] = m.eq8.median_plan_us;
    j["dropped_tokens"] = m.eq8.mean_dropped_tokens;
    j["eq6"] = model_json(m.eq6, m.eq6.mean_eq6_ms, st.eq6_ms);
    nlohmann::json eq8 = model_json(m.eq8, m.eq8.mean_eq8_ms, st.eq8_ms);
    eq8["exposed_trans_ms"] = m.eq8.mean_exposed_trans_ms;
    eq8["exposed_agg_ms"] = m.eq8.mean_exposed_agg_ms;
    eq8["exposed_trans_chunked_ms"] = m.eq8.mean_exposed_trans_chunked_ms;
    eq8["exposed_agg_chunked_ms"] = m.eq8.mean_exposed_agg_chunked_ms;
    j["eq8"] = eq8;
    j["fastermoe_system"] = model_json(m.eq6, m.eq6.mean_fastermoe_ms, st.fastermoe_ms);
    nlohmann::json sim = model_json(m.system(), m.sim.moe_ms, st.sim_ms);
    sim["schedule"] = m.sim.schedule;
    sim["iteration_ms"] = m.sim.iteration_ms;
    sim["exposed_trans_ms"] = m.sim.exposed_trans_ms;
    sim["exposed_agg_ms"] = m.sim.exposed_agg_ms;
    j["sim"] = sim;
    const MoveCost& moves = m.moves;  // owner moves over the trace, summed; each column charges them per iteration
    j["one_off_moves"] = {{"experts", moves.experts}, {"bytes", moves.bytes}, {"ms", moves.seconds * 1e3}};
    j["owner_move_ms"] = {
        {"eq6", m.eq6.mean_owner_move_ms}, {"eq8", m.eq8.mean_owner_move_ms}, {"sim", m.sim.owner_move_ms}};
    return j;
}

void print_table(const std::vector<PolicyModels>& scores, const StaticTimes& st) {
    std::printf("# %-15s %9s %7s %9s %7s %9s %7s %9s %7s %8s %8s %9s %9s %6s %9s %9s\n", "policy", "Eq6", "xstat6",
                "Eq8", "xstat8", "FasterMoE", "xstatF", "Sim", "xstatS", "max/mean", "max/mean", "expTrans", "expAgg",
                "repl", "plan", "dropped");
    std::printf("# %-15s %9s %7s %9s %7s %9s %7s %9s %7s %8s %8s %9s %9s %6s %9s %9s\n", "", "(ms)", "", "(ms)", "",
                "sys (ms)", "", "sys (ms)", "", "(Eq6)", "(Eq8)", "Eq8 (ms)", "Eq8 (ms)", "(Eq8)", "(us)", "(tokens)");
    for (const PolicyModels& m : scores) {
        if (m.skipped()) {
            std::printf("  %-15s skipped: %s\n", m.name().c_str(), m.note().c_str());
            continue;
        }
        const PolicyScore& a = m.eq6;
        const PolicyScore& b = m.eq8;
        std::printf("  %-15s %9.3f %7.3f %9.3f %7.3f %9.3f %7.3f %9.3f %7.3f %8.3f %8.3f %9.3f %9.3f %6.1f %9.1f "
                    "%9.1f\n",
                    m.name().c_str(), a.mean_eq6_ms, ratio(st.eq6_ms, a.mean_eq6_ms), b.mean_eq8_ms,
                    ratio(st.eq8_ms, b.mean_eq8_ms), a.mean_fastermoe_ms, ratio(st.fastermoe_ms, a.mean_fastermoe_ms),
                    m.sim.moe_ms, ratio(st.sim_ms, m.sim.moe_ms), a.mean_max_mean_load, b.mean_max_mean_load, b.mean_exposed_trans_ms, b.mean_exposed_agg_ms,
                    b.mean_replicas, b.median_plan_us, b.mean_dropped_tokens);
    }
    std::printf(
        "# one model per column, per MoE layer, means over iterations and layers: Eq6 = Trans/Agg blocking, "
        "planned with Eq 6; Eq8 = block-wise scheduler, planned with Eq 8; FasterMoE sys = broadcast/reduce "
        "beside one all-to-all each, Eq-6 placements; Sim sys = trace-driven simulator, MoE time per block under the "
        "policy's system schedule (blockwise for prophet, prophet-oracle and flow on their Eq-8 placements, "
        "fastermoe = broadcast/reduce beside the dispatch all-to-alls for fastermoe, none = transfers blocking "
        "for the rest, on their Eq-6 placements; whole-expert split, no planning time); "
        "xstat* = static / policy under that model\n");
    for (const PolicyModels& m : scores) {
        if (m.skipped()) continue;
        if (!m.eq8.note.empty()) std::printf("# note: %s: %s\n", m.name().c_str(), m.eq8.note.c_str());
        if (!m.eq8.solver_status.empty())
            std::printf("# solver: %s: %s\n", m.name().c_str(), m.eq8.solver_status.c_str());
        if (const MoveCost& mv = m.moves; mv.experts > 0)
            std::printf(
                "# one-off moves: %s: %d experts change owner over the trace, %.4g bytes (weights and AdamW "
                "state), %.4g ms in all; every column charges each move, blocking, in the iteration it happens "
                "(%.4g ms per layer, mean)\n",
                m.name().c_str(), mv.experts, mv.bytes, mv.seconds * 1e3, m.sim.owner_move_ms);
        if (m.eq8.token_path != "home")
            std::printf("# token path: %s: %s (all-to-all from layer l's expert device to layer l+1's): %.4g bytes and "
                        "%.4g ms per all-to-all (mean of a layer's two directions)\n",
                        m.name().c_str(), m.eq8.token_path.c_str(), m.eq6.mean_a2a_bytes, m.eq6.mean_a2a_ms);
    }
}

// How well the previous iteration predicts the next: per-layer JS divergence of consecutive iterations, and per
// model the planner's speedup over static planning from the previous iteration's counts (prophet) against
// planning on the current ones (prophet-oracle), where both ran.
nlohmann::json locality_json(const Trace& trace, const std::vector<PolicyModels>& scores, const StaticTimes& st) {
    const int L = trace.meta.num_layers, pairs = trace.meta.num_iterations - 1;
    const std::vector<double> js = consecutive_js_divergence(trace);  // [(I-1)*L]
    std::vector<double> per_layer(L, 0.0);
    for (int i = 0; i < pairs; ++i)
        for (int l = 0; l < L; ++l) per_layer[l] += js[static_cast<size_t>(i) * L + l] / pairs;
    nlohmann::json j;
    j["js_divergence_per_layer"] = per_layer;
    const PolicyModels *predicted = nullptr, *oracle = nullptr;
    for (const PolicyModels& m : scores) {
        if (m.skipped()) continue;
        if (m.name() == "prophet") predicted = &m;
        if (m.name() == "prophet-oracle") oracle = &m;
    }
    if (predicted && oracle) {
        j["eq6"] = {{"predicted_speedup", ratio(st.eq6_ms, predicted->eq6.mean_eq6_ms)},
                    {"oracle_speedup", ratio(st.eq6_ms, oracle->eq6.mean_eq6_ms)}};
        j["eq8"] = {{"predicted_speedup", ratio(st.eq8_ms, predicted->eq8.mean_eq8_ms)},
                    {"oracle_speedup", ratio(st.eq8_ms, oracle->eq8.mean_eq8_ms)}};
    }
    return j;
}

// A run that failed before recording: its row with status failed and the error, in one transaction.
void record_failed_run(const std::string& store_path, const RunInfo& info, const Error& e) {
    Store store = Store::open(store_path);
    store.transaction([&] { store.finish_run(store.begin_run(info), "failed", e.exit_code(), e.what()); });
}

// What run_plan works on, all validated before anything is written.
struct PlanInputs {
    explicit PlanInputs(Config resolved) : config(std::move(resolved)) {}
    Config config;
    BalanceOptions options;
    std::string store_path;
    std::vector<std::string> policies;  // in the order they run
    bool all = false;                   // --policy all: a policy too large for the instance is skipped
    int jobs = 1;                       // plan.jobs resolved: threads that generate the trace and run policies
    ClusterSpec cluster;
    Loaded loaded;
    CostModel cost;
    double js_mean = 0, js_max = 0;  // JS divergence of consecutive iterations
};

// The policies to run: every one for `all`, the --policy list, else balance.policy's one.
std::vector<std::string> chosen_policies(const Config& config, const std::vector<std::string>& listed) {
    const std::string& chosen = config.get_string("balance.policy");
    if (chosen == "all") return policies_for_all();
    if (!listed.empty()) return listed;
    return {chosen};
}

// Config, cluster, trace and cost model; the cheap checks before the trace is generated.
PlanInputs load_plan_inputs(const PlanArgs& args) {
    PlanInputs in(resolve_config(plan_schema(), args.common));
    const std::vector<std::string> listed =
        args.policy.empty() ? std::vector<std::string>{} : apply_policy_option(in.config, args.policy);
    if (args.jobs >= 0) in.config.set("plan.jobs", static_cast<int64_t>(args.jobs), "--jobs");
    in.options = balance_options_from(in.config);
    in.store_path = in.config.get_string("store.path");
    in.cluster = load_cluster_file(args.cluster);
    if (const int declared = declared_generator_devices(args.trace); declared > 0)
        check_trace_devices(in.cluster, args.cluster, declared, args.trace);
    in.jobs = static_cast<int>(in.config.get_int("plan.jobs"));
    if (in.jobs == 0) in.jobs = hardware_threads();
    in.loaded = load_any_trace(args.trace, in.store_path, in.jobs);
    resolve_regime_in(in.config, in.loaded.trace.meta.source);  // auto: serving for an inference engine's statistics
    const TraceMeta& meta = in.loaded.trace.meta;
    const TraceShape shape = shape_of(meta);
    in.cost = cost_model_for_trace(in.cluster, args.cluster, shape, args.trace, in.config,
                                   "--set plan.d_model=1024 --set plan.d_ffn=2048");
    in.policies = chosen_policies(in.config, listed);
    in.all = in.config.get_string("balance.policy") == "all";
    const std::vector<double> js = consecutive_js_divergence(in.loaded.trace);
    for (double v : js) {
        in.js_mean += v / static_cast<double>(js.size());
        in.js_max = std::max(in.js_max, v);
    }
    return in;
}

// The Trans/Agg collective the topology-aware pricing assumes.
const char* broadcast_name(const CostModel& cost) {
    return cost.trans_broadcast == TransBroadcast::kChain ? "chain" : "star";
}

// The trace and cluster as read, on stderr.
void log_inputs(const PlanInputs& in) {
    const TraceMeta& meta = in.loaded.trace.meta;
    const CostModel& cost = in.cost;
    const ClusterSpec& cluster = in.cluster;
    std::fprintf(stderr,
                 "prophet plan: trace %s: I=%d L=%d D=%d E=%d k=%d, %lld tokens/iter, C=%d F=%d; "
                 "JS divergence of consecutive iterations: mean %.4g, max %.4g\n",
                 meta.source.c_str(), meta.num_iterations, meta.num_layers, meta.num_devices, meta.num_experts,
                 meta.top_k, static_cast<long long>(meta.tokens_per_iteration), cost.model.d_model, cost.model.d_ffn,
                 in.js_mean, in.js_max);
    std::fprintf(stderr, "prophet plan: cluster %s: D=%d, %d per node, %.3g TFLOP/s, FNEC %.3g ms%s%s\n",
                 cluster.name.c_str(), cluster.num_devices, cluster.devices_per_node, cluster.compute_flops / 1e12,
                 cost.fnec_s() * 1e3, cost.topology_aware ? ", topology-aware, Trans/Agg " : "",
                 cost.topology_aware ? broadcast_name(cost) : "");
}

void print_dry_run(const PlanInputs& in) {
    std::string list;
    for (const auto& p : in.policies) list += (list.empty() ? "" : " ") + p;
    std::printf("dry run: would evaluate [%s] on %d iterations x %d layers and record into %s\n", list.c_str(),
                in.loaded.trace.meta.num_iterations, in.loaded.trace.meta.num_layers, in.store_path.c_str());
}

EvalSettings eval_settings(const PlanInputs& in) {
    EvalSettings settings;
    settings.options = in.options;
    settings.plan_repeats = static_cast<int>(in.config.get_int("plan.repeats"));
    settings.profile_iterations = static_cast<int>(in.config.get_int("balance.profile_iterations"));
    settings.num_nodes = in.cluster.num_devices / in.cluster.devices_per_node;
    return settings;
}

// The order the policies start in: those whose batches the routing LP routes (balance.route_to = flow, flow's own
// rule) first, as their evaluations are the longest by far (at DeepSeek-V3 scale flow took 46 s of a 55 s
// `--policy all`, and started last), then the rest in their order. Each policy's scores depend only on it, so the
// order changes nothing but the wall time.
std::vector<int> start_order(const std::vector<std::string>& policies, const BalanceOptions& options) {
    std::vector<int> order(policies.size());
    for (size_t i = 0; i < policies.size(); ++i) order[i] = static_cast<int>(i);
    auto routes_by_lp = [&](int i) { return effective_route_rule(policies[i], options) == RouteRule::kFlow; };
    std::stable_partition(order.begin(), order.end(), routes_by_lp);
    return order;
}

// Every policy under every model, on plan.jobs threads (longest first: start_order), the scores in the policies'
// order. A failure (e.g. an external policy's bad reply (3) or timeout (6)) is recorded as a failed run, nothing
// else of it, and rethrown (the first policy's in the order, when several fail); no policy starts after one failed.
std::vector<PolicyModels> evaluate_policies(const PlanInputs& in, const PlanArgs& args, const TraceView& view,
                                            const EvalSettings& settings) {
    const int n = static_cast<int>(in.policies.size());
    std::vector<PolicyModels> scores(static_cast<size_t>(n));
    try {
        // each policy's scores depend only on it (plan::evaluate_models), so they do not depend on the thread count
        parallel_for(start_order(in.policies, settings.options), in.jobs, [&](int i, int) {
            const char* name = in.policies[i].c_str();
            std::fprintf(stderr, "prophet plan: [%d/%d] %s ...\n", i + 1, n, name);
            const int64_t started = now_ns();
            scores[i] = plan::evaluate_models(in.policies[i], view, in.cost, settings, /*allow_skip=*/in.all);
            const double seconds = (now_ns() - started) * 1e-9;
            std::fprintf(stderr, "prophet plan: [%d/%d] %s done in %.1f s\n", i + 1, n, name, seconds);
        });
    } catch (...) {
        const Error e = current_exception_as_error();
        record_failed_run(in.store_path, make_run_info("plan", in.config, args.common), e);
        throw e;
    }
    return scores;
}

// Each policy's times beside the lower bound (plan_bound.h), skipped policies left out.
std::vector<PolicyTimes> policy_times(const std::vector<PolicyModels>& scores) {
    std::vector<PolicyTimes> times;
    for (const PolicyModels& m : scores)
        if (!m.skipped())
            times.push_back({m.name(), m.eq8.token_path == "layer_to_layer", m.eq6.mean_eq6_ms, m.eq8.mean_eq8_ms,
                             m.eq6.mean_fastermoe_ms, m.sim.moe_ms, &m.system()});
    return times;
}

// What run_plan computed, for recording and printing.
struct PlanOutcome {
    std::vector<PolicyModels> scores;
    StaticTimes static_times;
    PlanServing serving;
    TraceBounds bounds;
    std::vector<PolicyTimes> times;  // points into scores
    int max_replicas = 0;
};

// Records the run in one transaction, so a failure leaves nothing half-written; returns its id.
std::string record_plan(const PlanInputs& in, const PlanArgs& args, const PlanOutcome& out) {
    const TraceMeta& meta = in.loaded.trace.meta;
    Store store = Store::open(in.store_path);
    RunInfo info = make_run_info("plan", in.config, args.common);
    info.experiment = in.config.get_string("run.experiment");
    info.seed = in.config.get_int("run.seed");
    info.world_size = meta.num_devices;
    info.backend = "model";
    std::string run_id;
    const bool record_layers = in.config.get_bool("plan.record_layers");
    store.transaction([&] {
        run_id = store.begin_run(info);
        auto params = in.config.flat();
        params.emplace_back("input.trace", args.trace);
        params.emplace_back("input.cluster", args.cluster);
        params.emplace_back("trace.source", meta.source);
        store.put_params(run_id, params);
        if (in.config.get_bool("plan.save_trace") && !in.loaded.from_store) store.save_trace(in.loaded.trace, run_id);
        for (const PolicyModels& m : out.scores) plan::put_policy_results(store, run_id, m, record_layers);
        put_bound_metrics(store, run_id, out.bounds, out.times, meta.num_layers, meta.num_experts);
        store.finish_run(run_id, "finished", 0, "");
    });
    require_recorded(store, {run_id}, "run " + run_id);
    return run_id;
}

// --json: the whole run as one JSON document on stdout.
void print_plan_json(const PlanInputs& in, const PlanOutcome& out, const std::string& run_id) {
    const TraceMeta& meta = in.loaded.trace.meta;
    nlohmann::json j;
    j["schema_version"] = 1;
    j["run_id"] = run_id;
    j["trace"] = {{"source", meta.source},
                  {"iterations", meta.num_iterations},
                  {"layers", meta.num_layers},
                  {"devices", meta.num_devices},
                  {"experts", meta.num_experts},
                  {"top_k", meta.top_k},
                  {"tokens_per_iteration", meta.tokens_per_iteration},
                  {"js_divergence_mean", in.js_mean},
                  {"js_divergence_max", in.js_max}};
    j["cluster"] = in.cluster.name;
    // how the models price communication: the busiest link (topology) and the Trans/Agg collective
    j["pricing"] = {{"topology_aware", in.cost.topology_aware},
                    {"trans_broadcast", in.cost.topology_aware ? broadcast_name(in.cost) : "flat (Eqs 4-5)"}};
    j["models"] = {{"eq6", "Eq 6: Trans and Agg blocking (DeepSpeed, static EP, offline policies' systems)"},
                   {"eq8", "Eq 8: block-wise scheduler hides Trans/Agg as its whole-expert split allows"},
                   {"fastermoe_system", "FasterMoE: broadcast/reduce beside one all-to-all each"},
                   {"sim",
                    "trace-driven simulator: MoE time per block under the policy's system schedule "
                    "(blockwise for prophet/prophet-oracle on Eq-8 placements, fastermoe = "
                    "broadcast/reduce beside the dispatch all-to-alls for fastermoe, none = transfers "
                    "blocking for the rest, on Eq-6 placements), whole-expert split, no planning time"}};
    j["bound"] = bound_json(out.bounds, out.max_replicas);
    j["policies"] = nlohmann::json::array();
    for (size_t i = 0, t = 0; i < out.scores.size(); ++i) {
        j["policies"].push_back(score_json(out.scores[i], out.static_times));
        if (!out.scores[i].skipped())
            add_policy_bound_json(j["policies"].back(), out.times[t++], out.bounds, meta.num_experts);
    }
    j["locality"] = locality_json(in.loaded.trace, out.scores, out.static_times);
    j["regime"] = in.config.get_string("balance.regime");
    if (out.serving.enabled) j["serving"] = serving_json(out.serving);
    std::printf("%s\n", j.dump(2).c_str());
}

// The text tables on stdout.
void print_plan_text(const PlanInputs& in, const PlanOutcome& out, const std::string& run_id) {
    const TraceMeta& meta = in.loaded.trace.meta;
    std::printf(
        "# prophet plan | trace %s | cluster %s | run %s | regime %s | means over %d iterations x %d "
        "layers\n",
        meta.source.c_str(), in.cluster.name.c_str(), run_id.c_str(), in.config.get_string("balance.regime").c_str(),
        meta.num_iterations, meta.num_layers);
    print_table(out.scores, out.static_times);
    print_bound_tables(out.bounds, out.times, out.static_times.eq6_ms, meta.num_experts, out.max_replicas);
    if (out.serving.enabled) print_serving(out.serving);
}

}  // namespace

int run_plan(const PlanArgs& args) {
    if (args.common.help_config) {
        print_schema(plan_schema(), "plan");
        return kExitOk;
    }
    if (args.trace.empty() || args.cluster.empty())
        throw Error(kExitUsage,
                    "usage error: prophet plan needs --trace FILE and --cluster FILE (see prophet plan --help)");
    const PlanInputs in = load_plan_inputs(args);
    log_inputs(in);
    if (args.common.dry_run) {
        print_dry_run(in);
        return kExitOk;
    }

    const TraceView view = view_of(in.loaded.trace);
    const EvalSettings settings = eval_settings(in);
    const int64_t started = now_ns();
    PlanOutcome out;
    out.scores = evaluate_policies(in, args, view, settings);
    std::vector<std::string> served;
    for (const PolicyModels& m : out.scores)
        if (!m.skipped()) served.push_back(m.name());
    out.serving = evaluate_plan_serving(served, view, in.cost, settings, in.config);
    out.static_times = plan::static_times_of(out.scores, view, in.cost, settings);
    // the lower bound of every layer, and each policy's times beside it (plan_bound.h)
    out.max_replicas = settings.options.max_replicas_per_device;
    out.bounds = trace_bounds(view, in.cost, BoundBudget{out.max_replicas});
    out.times = policy_times(out.scores);

    const std::string run_id = record_plan(in, args, out);
    const double elapsed_s = (now_ns() - started) * 1e-9;
    if (args.common.json)
        print_plan_json(in, out, run_id);
    else
        print_plan_text(in, out, run_id);
    std::fprintf(stderr, "prophet plan: recorded run %s in %s (%.1f s)\n", run_id.c_str(), in.store_path.c_str(),
                 elapsed_s);
    return kExitOk;
}

}  // namespace prophet::cli
