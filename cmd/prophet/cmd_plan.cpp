#include "cmd_plan.h"
#include "plan_serving.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "balance/cluster.h"
#include "balance/evaluate.h"
#include "balance/moves.h"
#include "balance/options.h"
#include "balance/policy_registry.h"
#include "balance/regime.h"
#include "core/error.h"
#include "core/timer.h"
#include "plan_bound.h"
#include "sim/simulator.h"
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

// One policy under every system model. Planners with a cost objective (plans_with_cost_eq) plan once per
// equation when balance.cost_eq = 0 (auto), so each column is a policy planned and scored by one equation;
// the others (and any policy when cost_eq is set) plan once and are scored under every model.
struct SimColumn {
    std::string schedule;         // the policy's system schedule: blockwise (prophet, prophet-oracle), fastermoe
                                  // (fastermoe) or none
    double moe_ms = 0;            // mean over iterations and blocks of the simulated MoE time of a block
    double iteration_ms = 0;      // mean simulated iteration (every block, FNEC/BNEC included)
    double exposed_trans_ms = 0;  // per block, means like moe_ms
    double exposed_agg_ms = 0;
};

struct PolicyModels {
    PolicyScore eq6;  // planned for and scored by Eq 6 (transfers blocking)
    PolicyScore eq8;  // planned for and scored by Eq 8 (block-wise scheduler hides what its split can)
    SimColumn sim;    // the trace-driven simulator on the placements of the policy's own system (system())
    MoveCost moves;   // the system's owner moves over the trace: one-off, in no column (moves.h)
    const std::string& name() const { return eq6.name; }
    bool skipped() const { return eq6.skipped || eq8.skipped; }
    const std::string& note() const { return eq6.skipped ? eq6.note : eq8.note; }
    // the planning of the policy's own system: Eq 8's for prophet's scheduler, Eq 6's for the others
    const PolicyScore& system() const { return system_cost_eq(name()) == 8 ? eq8 : eq6; }
};

struct StaticTimes {
    double eq6_ms = 0, eq8_ms = 0, fastermoe_ms = 0, sim_ms = 0;
};

// The simulator column: the system's placements timed op by op under the system's schedule (sim::system_schedule)
// with the split rule `time` (whole experts, what the scheduler does) and no planning time (deterministic).
SimColumn simulate_column(const PolicyScore& score, const TraceView& view, const CostModel& cost,
                          const EvalSettings& settings) {
    sim::SimOptions o;
    o.schedule = sim::system_schedule(score.name);
    o.split_rule = sim::SplitRule::kTime;
    o.plan_s = 0;
    o.record_timeline = false;
    const sim::SimResult r = sim::simulate_score(score, view, cost, settings, o);
    SimColumn c;
    c.schedule = sim::schedule_kind_name(o.schedule);
    c.iteration_ms = r.mean_iteration_s * 1e3;
    double blocks = 0;
    for (const sim::IterationResult& it : r.iterations)
        for (const sim::BlockResult& b : it.blocks) {
            c.moe_ms += b.moe_s * 1e3;
            c.exposed_trans_ms += b.exposed_trans_s * 1e3;
            c.exposed_agg_ms += b.exposed_agg_s * 1e3;
            blocks += 1;
        }
    if (blocks > 0) c.moe_ms /= blocks, c.exposed_trans_ms /= blocks, c.exposed_agg_ms /= blocks;
    return c;
}

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
    const MoveCost& moves = m.moves;  // owner moves: one-off, in no column above
    j["one_off_moves"] = {{"experts", moves.experts}, {"bytes", moves.bytes}, {"ms", moves.seconds * 1e3}};
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
    std::printf("# one model per column, per MoE layer, means over iterations and layers: Eq6 = Trans/Agg blocking, "
                "planned with Eq 6; Eq8 = block-wise scheduler, planned with Eq 8; FasterMoE sys = broadcast/reduce "
                "beside one all-to-all each, Eq-6 placements; Sim sys = trace-driven simulator, MoE time per block under the "
                "policy's system schedule (blockwise for prophet and prophet-oracle on their Eq-8 placements, "
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
                "state), %.4g ms in all; not in the columns, which charge Trans/Agg to replicas only\n",
                m.name().c_str(), mv.experts, mv.bytes, mv.seconds * 1e3);
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

PolicyModels evaluate_models(const std::string& name, const TraceView& view, const CostModel& cost,
                             const EvalSettings& settings, bool allow_skip) {
    PolicyModels m;
    if (settings.options.cost_eq_auto && plans_with_cost_eq(name)) {
        EvalSettings six = settings, eight = settings;
        six.options.cost_eq = 6;
        eight.options.cost_eq = 8;
        six.options.cost_eq_auto = eight.options.cost_eq_auto = false;
        m.eq6 = evaluate_policy(name, view, cost, six, allow_skip);
        m.eq8 = evaluate_policy(name, view, cost, eight, allow_skip);
    } else {
        m.eq6 = evaluate_policy(name, view, cost, settings, allow_skip);
        m.eq8 = m.eq6;
    }
    return m;
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
    const std::vector<std::string> listed =
        args.policy.empty() ? std::vector<std::string>{} : apply_policy_option(config, args.policy);
    const BalanceOptions options = balance_options_from(config);
    const std::string store_path = config.get_string("store.path");

    // ---- inputs, all validated before anything is written; the cheap checks before the trace is generated --
    const ClusterSpec cluster = load_cluster_file(args.cluster);
    if (const int declared = declared_generator_devices(args.trace); declared > 0)
        check_trace_devices(cluster, args.cluster, declared, args.trace);
    Loaded loaded = load_any_trace(args.trace, store_path);
    const Trace& trace = loaded.trace;
    resolve_regime_in(config, trace.meta.source);  // auto: serving for an inference engine's statistics
    const TraceMeta& meta = trace.meta;
    const TraceShape shape{meta.num_devices, meta.num_experts, meta.tokens_per_iteration,
                           meta.d_model,     meta.d_ffn,       meta.seq_len};
    const CostModel cost = cost_model_for_trace(cluster, args.cluster, shape, args.trace, config,
                                                "--set plan.d_model=1024 --set plan.d_ffn=2048");

    std::vector<std::string> policies;
    const std::string& chosen = config.get_string("balance.policy");
    const bool all = chosen == "all";
    if (all)
        policies = policies_for_all();
    else if (!listed.empty())
        policies = listed;
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
    const char* broadcast = cost.trans_broadcast == TransBroadcast::kChain ? "chain" : "star";
    std::fprintf(stderr, "prophet plan: cluster %s: D=%d, %d per node, %.3g TFLOP/s, FNEC %.3g ms%s%s\n",
                 cluster.name.c_str(), cluster.num_devices, cluster.devices_per_node, cluster.compute_flops / 1e12,
                 cost.fnec_s() * 1e3, cost.topology_aware ? ", topology-aware, Trans/Agg " : "",
                 cost.topology_aware ? broadcast : "");
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

    std::vector<PolicyModels> scores;
    const int64_t started = now_ns();
    try {
        for (size_t i = 0; i < policies.size(); ++i) {
            std::fprintf(stderr, "prophet plan: [%zu/%zu] %s ...\n", i + 1, policies.size(), policies[i].c_str());
            scores.push_back(evaluate_models(policies[i], view, cost, settings, /*allow_skip=*/all));
            PolicyModels& m = scores.back();
            if (!m.skipped()) m.sim = simulate_column(m.system(), view, cost, settings);
            if (!m.skipped()) m.moves = owner_moves_of(m.system(), cost, meta.num_layers, kTrainingStateCopies);
        }
    } catch (...) {  // e.g. an external policy's bad reply (3) or timeout (6): a failed run, nothing else of it
        const Error e = current_exception_as_error();
        record_failed_run(store_path, make_run_info("plan", config, args.common), e);
        throw e;
    }
    std::vector<std::string> served;
    for (const PolicyModels& m : scores)
        if (!m.skipped()) served.push_back(m.name());
    const PlanServing serving = evaluate_plan_serving(served, view, cost, settings, config);
    StaticTimes static_times;
    {
        const PolicyModels* fixed = nullptr;
        PolicyModels quick_static;
        for (const PolicyModels& m : scores)
            if (m.name() == "static") fixed = &m;
        if (!fixed) {  // a single policy: score static too, for the ratios
            EvalSettings quick = settings;
            quick.plan_repeats = 1;
            quick_static.eq6 = quick_static.eq8 = evaluate_policy("static", view, cost, quick, false);
            quick_static.sim = simulate_column(quick_static.eq6, view, cost, quick);
            fixed = &quick_static;
        }
        static_times = {fixed->eq6.mean_eq6_ms, fixed->eq6.mean_eq8_ms, fixed->eq6.mean_fastermoe_ms, fixed->sim.moe_ms};
    }

    // ---- the lower bound of every layer, and each policy's times beside it (plan_bound.h) ---------------------
    const int max_replicas = options.max_replicas_per_device;
    const TraceBounds bounds = trace_bounds(view, cost, BoundBudget{max_replicas});
    std::vector<PolicyTimes> times;
    for (const PolicyModels& m : scores)
        if (!m.skipped())
            times.push_back({m.name(), m.eq8.token_path == "layer_to_layer", m.eq6.mean_eq6_ms, m.eq8.mean_eq8_ms,
                             m.eq6.mean_fastermoe_ms, m.sim.moe_ms, &m.system()});

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
        for (const PolicyModels& m : scores) {
            const PolicyScore& p = m.eq8;
            if (m.skipped()) {
                store.put_event(run_id, 0, -1, "info", "policy_skipped", m.name() + ": " + m.note(), "");
                continue;
            }
            if (!p.solver_status.empty())
                store.put_event(run_id, 0, -1, "info", "solver_status", p.name + ": " + p.solver_status, "");
            // one model per metric: eq6_* from the Eq-6 planning, eq8_* from the Eq-8 planning
            const std::vector<std::pair<std::string, double>> metrics = {
                {"eq6_ms", m.eq6.mean_eq6_ms},
                {"eq8_ms", p.mean_eq8_ms},
                {"fastermoe_sys_ms", m.eq6.mean_fastermoe_ms},
                {"sim_ms", m.sim.moe_ms},
                {"sim_iteration_ms", m.sim.iteration_ms},
                {"eq6_max_mean_load", m.eq6.mean_max_mean_load},
                {"max_mean_load", p.mean_max_mean_load},
                {"balance_std", p.mean_balance_std},
                {"rb_vs_static", p.mean_rb},
                {"exposed_trans_ms", p.mean_exposed_trans_ms},
                {"exposed_agg_ms", p.mean_exposed_agg_ms},
                {"exposed_trans_chunked_ms", p.mean_exposed_trans_chunked_ms},
                {"exposed_agg_chunked_ms", p.mean_exposed_agg_chunked_ms},
                {"dropped_tokens", p.mean_dropped_tokens},
                {"plan_us", p.median_plan_us}};
            for (const auto& [key, v] : metrics) store.put_metric(run_id, "plan." + p.name + "." + key, 0, v);
            if (!record_layers) continue;
            for (size_t i = 0; i < p.layers.size(); ++i) {
                const LayerScore& s = p.layers[i];
                PlanResultRow row;
                row.run_id = run_id;
                row.policy = p.name;
                row.iteration = s.iteration;
                row.layer = s.layer;
                row.predicted_eq6_ms = m.eq6.layers[i].cost.eq6_s * 1e3;  // the Eq-6 planning's layer
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
        put_bound_metrics(store, run_id, bounds, times, meta.num_layers, meta.num_experts);
        store.finish_run(run_id, "finished", 0, "");
    });
    require_recorded(store, {run_id}, "run " + run_id);
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
        // how the models price communication: the busiest link (topology) and the Trans/Agg collective
        out["pricing"] = {{"topology_aware", cost.topology_aware},
                          {"trans_broadcast", cost.topology_aware ? broadcast : "flat (Eqs 4-5)"}};
        out["models"] = {{"eq6", "Eq 6: Trans and Agg blocking (DeepSpeed, static EP, offline policies' systems)"},
                         {"eq8", "Eq 8: block-wise scheduler hides Trans/Agg as its whole-expert split allows"},
                         {"fastermoe_system", "FasterMoE: broadcast/reduce beside one all-to-all each"},
                         {"sim", "trace-driven simulator: MoE time per block under the policy's system schedule "
                                 "(blockwise for prophet/prophet-oracle on Eq-8 placements, fastermoe = "
                                 "broadcast/reduce beside the dispatch all-to-alls for fastermoe, none = transfers "
                                 "blocking for the rest, on Eq-6 placements), whole-expert split, no planning time"}};
        out["bound"] = bound_json(bounds, max_replicas);
        out["policies"] = nlohmann::json::array();
        for (size_t i = 0, t = 0; i < scores.size(); ++i) {
            out["policies"].push_back(score_json(scores[i], static_times));
            if (!scores[i].skipped())
                add_policy_bound_json(out["policies"].back(), times[t++], bounds, meta.num_experts);
        }
        out["locality"] = locality_json(trace, scores, static_times);
        out["regime"] = config.get_string("balance.regime");
        if (serving.enabled) out["serving"] = serving_json(serving);
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf(
            "# prophet plan | trace %s | cluster %s | run %s | regime %s | means over %d iterations x %d "
            "layers\n",
            meta.source.c_str(), cluster.name.c_str(), run_id.c_str(), config.get_string("balance.regime").c_str(),
            meta.num_iterations, meta.num_layers);
        print_table(scores, static_times);
        print_bound_tables(bounds, times, static_times.eq6_ms, meta.num_experts, max_replicas);
        if (serving.enabled) print_serving(serving);
    }
    std::fprintf(stderr, "prophet plan: recorded run %s in %s (%.1f s)\n", run_id.c_str(), store_path.c_str(), elapsed_s);
    return kExitOk;
}

}  // namespace prophet::cli
