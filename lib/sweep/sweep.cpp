// sweep.cpp: sweep file parsing and validation, grid expansion, point identity, and the resumable point loop.
#include "sweep/sweep.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/evaluate.h"
#include "balance/options.h"
#include "core/error.h"
#include "core/sha256.h"
#include "core/timer.h"
#include "sim/simulator.h"
#include "trace/trace.h"

namespace prophet::sweep {

namespace fs = std::filesystem;

namespace {

const char* kSweepKeys[] = {"name",  "engine", "clusters", "traces",       "policies",
                            "seeds", "store",  "grid",     "match_devices"};

std::string quoted(const std::string& s) { return value_to_toml(Value(s)); }

std::string node_text(const toml::node& node) {
    std::ostringstream out;
    node.visit([&](auto&& n) { out << n; });
    return out.str();
}

// A scalar TOML node as a Value; nullopt for tables, arrays and dates.
std::optional<Value> scalar_value(const toml::node& node) {
    if (auto v = node.as_integer()) return Value(static_cast<int64_t>(v->get()));
    if (auto v = node.as_floating_point()) return Value(v->get());
    if (auto v = node.as_boolean()) return Value(v->get());
    if (auto v = node.as_string()) return Value(v->get());
    return std::nullopt;
}

const toml::array& require_array(const toml::table& sweep, const std::string& key, const std::string& example) {
    const toml::node* node = sweep.get(key);
    if (!node)
        throw_config_error("sweep." + key, "(missing)", "the sweep file must list " + key,
                           "add `" + key + " = " + example + "` under [sweep]");
    const toml::array* array = node->as_array();
    if (!array)
        throw_config_error("sweep." + key, node_text(*node), "must be a list", "write `" + key + " = " + example + "`");
    if (array->empty())
        throw_config_error("sweep." + key, "[]", "must not be empty", "write `" + key + " = " + example + "`");
    return *array;
}

std::vector<std::string> string_list(const toml::table& sweep, const std::string& key, const std::string& example) {
    std::vector<std::string> out;
    for (const toml::node& item : require_array(sweep, key, example)) {
        const auto* s = item.as_string();
        if (!s || s->get().empty())
            throw_config_error("sweep." + key, node_text(item), "every entry must be a non-empty string",
                               "write `" + key + " = " + example + "`");
        out.push_back(s->get());
    }
    return out;
}

bool is_generator(const std::string& path) { return fs::path(path).extension() == ".toml"; }

std::string resolve_path(const SweepSpec& spec, const std::string& path) {
    std::error_code ec;
    if (fs::exists(path, ec) || fs::path(path).is_absolute()) return path;
    const fs::path alt = fs::path(spec.dir) / path;
    if (fs::exists(alt, ec)) return alt.string();
    return path;
}

void check_files(const SweepSpec& spec, const std::vector<std::string>& paths, const std::string& key) {
    for (const std::string& p : paths) {
        std::error_code ec;
        if (!fs::is_regular_file(resolve_path(spec, p), ec))
            throw_config_error("sweep." + key, quoted(p),
                               "no such file (relative paths resolve from the working "
                               "directory, then from the sweep file's directory)",
                               "fix the path or run prophet from the repository root");
    }
}

std::string stem(const std::string& path) { return fs::path(path).stem().string(); }

}  // namespace

const Schema& point_schema() {
    static const Schema schema = [] {
        Schema s;
        add_balance_keys(s, /*allow_all=*/false, "static");
        s.add_int("plan.repeats", 1, 1, 1000, "timing repeats per planning call (median reported)");
        s.add_bool("plan.topology_aware", false, "use the busiest-link cost model (per-pair and NIC bandwidth)");
        s.add_float("plan.compute_scale", 1.0, 0.0, 1e6,
                    "planner's belief about compute throughput x this factor (the simulated cluster stays fixed)",
                    true);
        s.add_float("plan.bandwidth_scale", 1.0, 0.0, 1e6,
                    "planner's belief about bandwidths x this factor (the simulated cluster stays fixed)", true);
        s.add_int("plan.d_model", 0, 0, 1 << 20, "C for bytes and FLOPs (0: from the trace)");
        s.add_int("plan.d_ffn", 0, 0, 1 << 22, "F, expert hidden size (0: from the trace)");
        s.add_int("plan.seq_len", 0, 0, 1 << 22, "T for the attention FLOPs of FNEC (0: from the trace)");
        s.add_int("plan.bytes_per_elem", 4, 1, 8, "bytes per activation/parameter element (4: fp32, 2: bf16)");
        return s;
    }();
    return schema;
}

std::string format_duration(double seconds) {
    if (seconds < 0) seconds = 0;
    const long s = static_cast<long>(seconds + 0.5);
    char buffer[64];
    if (s >= 3600)
        std::snprintf(buffer, sizeof buffer, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    else if (s >= 60)
        std::snprintf(buffer, sizeof buffer, "%ldm%02lds", s / 60, s % 60);
    else
        std::snprintf(buffer, sizeof buffer, "%lds", s);
    return buffer;
}

SweepSpec parse_sweep_string(const std::string& text, const std::string& origin, const std::string& dir) {
    toml::table root;
    try {
        root = toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        std::ostringstream where;
        where << e.source().begin;
        throw_input_error(origin,
                          std::string("TOML syntax error: ") + std::string(e.description()) + " at " + where.str(),
                          "fix the TOML syntax");
    }
    for (const auto& [key, node] : root)
        if (key.str() != "sweep")
            throw_config_error(std::string(key.str()), node_text(node), "a sweep file has only a [sweep] table",
                               "move the key under [sweep] or remove it");
    const toml::table* sweep = root["sweep"].as_table();
    if (!sweep)
        throw_config_error("sweep", "(missing)", "the file needs a [sweep] table", "start the file with [sweep]");
    for (const auto& [key, node] : *sweep) {
        const std::string k(key.str());
        if (std::find(std::begin(kSweepKeys), std::end(kSweepKeys), k) == std::end(kSweepKeys))
            throw_config_error(
                "sweep." + k, node_text(node), "unknown key",
                "use only name, engine, clusters, traces, policies, seeds, store, match_devices and [sweep.grid]");
    }
    SweepSpec spec;
    spec.origin = origin;
    spec.dir = dir;
    const auto name = (*sweep)["name"].value<std::string>();
    if (!name || name->empty())
        throw_config_error("sweep.name", "(missing)", "a sweep needs a non-empty name (the runs' experiment label)",
                           "add `name = \"my-sweep\"` under [sweep]");
    spec.name = *name;
    if (const toml::node* engine = sweep->get("engine")) {
        const auto* s = engine->as_string();
        if (!s || (s->get() != "sim" && s->get() != "model"))
            throw_config_error("sweep.engine", node_text(*engine), "must be \"sim\" or \"model\"",
                               "engine = \"sim\" (discrete-event simulator) or \"model\" (cost model means)");
        spec.engine = s->get();
    }
    if (const toml::node* store = sweep->get("store")) {
        const auto* s = store->as_string();
        if (!s || s->get().empty())
            throw_config_error("sweep.store", node_text(*store), "must be a non-empty path string",
                               "store = \"results/prophet.db\"");
        spec.store_path = s->get();
    }
    if (const toml::node* match = sweep->get("match_devices")) {
        const auto* b = match->as_boolean();
        if (!b)
            throw_config_error("sweep.match_devices", node_text(*match), "must be true or false",
                               "match_devices = true");
        spec.match_devices = b->get();
    }
    spec.clusters = string_list(*sweep, "clusters", "[\"experiments/clusters/hpwnv-16.toml\"]");
    spec.traces = string_list(*sweep, "traces", "[\"experiments/traces/zipf-e16-k2.toml\"]");
    spec.policies = string_list(*sweep, "policies", "[\"static\", \"prophet\"]");
    const auto& known = policy_names();
    for (const std::string& p : spec.policies)
        if (std::find(known.begin(), known.end(), p) == known.end()) {
            std::string list;
            for (const auto& n : known) list += (list.empty() ? "" : " ") + n;
            throw_config_error("sweep.policies", quoted(p), "unknown policy", "use one of: " + list);
        }
    for (const toml::node& item : require_array(*sweep, "seeds", "[1, 2, 3]")) {
        const auto* v = item.as_integer();
        if (!v || v->get() < 0)
            throw_config_error("sweep.seeds", node_text(item), "every seed must be a non-negative integer",
                               "seeds = [1, 2, 3]");
        spec.seeds.push_back(v->get());
    }
    if (const toml::node* grid_node = sweep->get("grid")) {
        const toml::table* grid = grid_node->as_table();
        if (!grid)
            throw_config_error("sweep.grid", node_text(*grid_node), "must be a table of key -> list of values",
                               "[sweep.grid]\n\"trace.drift_rate\" = [0.0, 0.05]");
        for (const auto& [key, node] : *grid) {
            const std::string k(key.str());
            const bool trace_key = k.rfind("trace.", 0) == 0;
            const Schema& schema = trace_key ? trace_generator_schema() : point_schema();
            if (!schema.find(k) || k == "balance.policy" || k == "trace.seed") {
                std::string fix = "a grid key is a trace generator key (trace.*) or a plan.* / balance.* key";
                if (k == "balance.policy") fix = "list policies in `policies`, not in the grid";
                if (k == "trace.seed") fix = "list seeds in `seeds`, not in the grid";
                const std::string near = schema.closest(k);
                if (!near.empty() && near != k) fix += "; did you mean \"" + near + "\"?";
                throw_config_error("sweep.grid." + k, node_text(node), "not a key a sweep grid may vary", fix);
            }
            const toml::array* values = node.as_array();
            if (!values || values->empty())
                throw_config_error("sweep.grid." + k, node_text(node), "must be a non-empty list of values",
                                   "\"" + k + "\" = [v1, v2]");
            GridAxis axis;
            axis.key = k;
            for (const toml::node& item : *values) {
                const std::optional<Value> v = scalar_value(item);
                if (!v)
                    throw_config_error("sweep.grid." + k, node_text(item),
                                       "every value must be a number, bool or string", "\"" + k + "\" = [v1, v2]");
                Config check(schema, "sweep grid of " + origin);
                check.apply_set(k + "=" + value_to_toml(*v));  // exit 3 on a wrong type or bound
                axis.values.push_back(value_to_toml(check.get(k)));
            }
            spec.grid.push_back(std::move(axis));
        }
        std::sort(spec.grid.begin(), spec.grid.end(),
                  [](const GridAxis& a, const GridAxis& b) { return a.key < b.key; });
    }
    check_files(spec, spec.clusters, "clusters");
    check_files(spec, spec.traces, "traces");
    return spec;
}

SweepSpec parse_sweep_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw_input_error(path, "cannot read the sweep file", "check the path (experiments/sweeps/)");
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string dir = fs::path(path).parent_path().string();
    return parse_sweep_string(buffer.str(), path, dir.empty() ? "." : dir);
}

std::string canonical_text(KeyValues kv) {
    std::sort(kv.begin(), kv.end());
    std::string out;
    for (const auto& [k, v] : kv) out += k + "=" + v + "\n";
    return out;
}

namespace {

Config point_config(const KeyValues& params) {
    Config config(point_schema(), "sweep point");
    for (const auto& [k, v] : params)
        if (point_schema().find(k)) config.apply_set(k + "=" + v);
    return config;
}

}  // namespace

namespace {

// D of a cluster file and of a generator trace (after the grid's trace.num_devices); -1 when not known here.
int cluster_devices(const SweepSpec& spec, const std::string& path) {
    return load_cluster_file(resolve_path(spec, path)).num_devices;
}

int generator_devices(const SweepSpec& spec, const std::string& path, const KeyValues& grid) {
    if (!is_generator(path)) return -1;
    for (const auto& [k, v] : grid)
        if (k == "trace.num_devices") return std::stoi(v);
    Config tc(trace_generator_schema(), "trace generator " + path);
    tc.merge_toml_file(resolve_path(spec, path));
    return tc.has("trace.num_devices") ? static_cast<int>(tc.get_int("trace.num_devices")) : -1;
}

}  // namespace

std::vector<SweepPoint> expand_points(const SweepSpec& spec) {
    size_t combos = 1;
    for (const GridAxis& axis : spec.grid) combos *= axis.values.size();
    std::vector<SweepPoint> points;
    for (const std::string& cluster : spec.clusters)
        for (const std::string& trace : spec.traces)
            for (int64_t seed : spec.seeds)
                for (size_t c = 0; c < combos; ++c)
                    for (const std::string& policy : spec.policies) {
                        SweepPoint p;
                        p.cluster = cluster;
                        p.trace = trace;
                        p.policy = policy;
                        p.seed = seed;
                        size_t rest = c;
                        for (size_t a = spec.grid.size(); a-- > 0;) {  // the last key varies fastest
                            const GridAxis& axis = spec.grid[a];
                            p.grid.emplace_back(axis.key, axis.values[rest % axis.values.size()]);
                            rest /= axis.values.size();
                        }
                        std::reverse(p.grid.begin(), p.grid.end());
                        if (spec.match_devices) {
                            const int td = generator_devices(spec, trace, p.grid);
                            if (td >= 0 && td != cluster_devices(spec, cluster)) continue;
                        }
                        Config config(point_schema(), "sweep point of " + spec.origin);
                        config.apply_set("balance.policy=" + quoted(policy));
                        KeyValues params;
                        for (const auto& [k, v] : p.grid) {
                            if (k.rfind("trace.", 0) == 0)
                                params.emplace_back(k, v);
                            else
                                config.apply_set(k + "=" + v);
                        }
                        for (auto& kv : config.flat()) params.push_back(std::move(kv));
                        params.emplace_back("point.engine", quoted(spec.engine));
                        params.emplace_back("point.cluster", quoted(cluster));
                        params.emplace_back("point.trace", quoted(trace));
                        params.emplace_back("point.seed", std::to_string(seed));
                        if (is_generator(trace)) params.emplace_back("trace.seed", std::to_string(seed));
                        std::sort(params.begin(), params.end());
                        p.params = params;
                        p.canonical = canonical_text(params);
                        p.hash = sha256_hex(p.canonical);
                        p.description =
                            policy + " " + stem(cluster) + " " + stem(trace) + " seed=" + std::to_string(seed);
                        for (const auto& [k, v] : p.grid) p.description += " " + k + "=" + v;
                        p.index = static_cast<int>(points.size());
                        points.push_back(std::move(p));
                    }
    return points;
}

namespace {

struct PointData {
    Trace trace;
    ClusterSpec cluster;
    CostModel truth, belief;
    EvalSettings settings;
};

PointData load_point(const SweepSpec& spec, const SweepPoint& p) {
    PointData d;
    const std::string cluster_path = resolve_path(spec, p.cluster);
    const std::string trace_path = resolve_path(spec, p.trace);
    d.cluster = load_cluster_file(cluster_path);
    if (is_generator(trace_path)) {
        Config tc(trace_generator_schema(), "trace generator " + trace_path);
        tc.merge_toml_file(trace_path);
        for (const auto& [k, v] : p.grid)
            if (k.rfind("trace.", 0) == 0) tc.apply_set(k + "=" + v);
        tc.apply_set("trace.seed=" + std::to_string(p.seed));
        tc.check_required();
        d.trace = generate_trace(tc, trace_path);
    } else {
        d.trace = load_trace(trace_path);
    }
    validate_trace(d.trace, trace_path);
    const TraceMeta& meta = d.trace.meta;
    if (d.cluster.num_devices != meta.num_devices)
        throw_input_error(p.trace,
                          "the trace has D = " + std::to_string(meta.num_devices) + " devices but the cluster " +
                              p.cluster + " has num_devices = " + std::to_string(d.cluster.num_devices),
                          "pair the trace with a cluster of num_devices = " + std::to_string(meta.num_devices));
    if (meta.num_experts % meta.num_devices != 0)
        throw_input_error(
            p.trace,
            "E = " + std::to_string(meta.num_experts) + " is not divisible by D = " + std::to_string(meta.num_devices),
            "use E a multiple of D");
    const Config pc = point_config(p.params);
    CostModel cost;
    cost.cluster = d.cluster;
    cost.model.d_model = pc.get_int("plan.d_model") > 0 ? static_cast<int>(pc.get_int("plan.d_model")) : meta.d_model;
    cost.model.d_ffn = pc.get_int("plan.d_ffn") > 0 ? static_cast<int>(pc.get_int("plan.d_ffn")) : meta.d_ffn;
    cost.model.seq_len = pc.get_int("plan.seq_len") > 0 ? static_cast<int>(pc.get_int("plan.seq_len")) : meta.seq_len;
    cost.model.tokens_per_device = meta.tokens_per_iteration / meta.num_devices;
    cost.model.bytes_per_elem = static_cast<int>(pc.get_int("plan.bytes_per_elem"));
    cost.topology_aware = pc.get_bool("plan.topology_aware");
    if (cost.model.d_model <= 0 || cost.model.d_ffn <= 0)
        throw_config_error("plan.d_model", std::to_string(cost.model.d_model),
                           "the trace carries no model dimensions and none were set",
                           "add \"plan.d_model\" and \"plan.d_ffn\" to [sweep.grid]");
    d.truth = cost;
    d.belief = cost;
    d.belief.compute_scale = pc.get_float("plan.compute_scale");
    d.belief.bandwidth_scale = pc.get_float("plan.bandwidth_scale");
    d.settings.options = balance_options_from(pc);
    d.settings.plan_repeats = static_cast<int>(pc.get_int("plan.repeats"));
    d.settings.profile_iterations = static_cast<int>(pc.get_int("balance.profile_iterations"));
    d.settings.num_nodes = std::max(1, d.cluster.num_devices / std::max(1, d.cluster.devices_per_node));
    return d;
}

TraceView view_of(const Trace& trace) {
    TraceView view;
    view.counts = trace.counts.data();
    view.transitions = trace.has_transitions() ? trace.transitions.data() : nullptr;
    view.num_iterations = trace.meta.num_iterations;
    view.num_layers = trace.meta.num_layers;
    view.num_devices = trace.meta.num_devices;
    view.num_experts = trace.meta.num_experts;
    return view;
}

// Plans with the belief cost model, simulates on the true one (equal unless plan.*_scale != 1).
sim::SimResult simulate_planned(const std::string& policy, const PointData& d, const TraceView& view,
                                const EvalSettings& settings) {
    PolicyScore s = evaluate_policy(policy, view, d.belief, settings, /*allow_skip=*/false);
    const int I = view.num_iterations, L = view.num_layers;
    std::vector<std::vector<Placement>> placements(I);
    std::vector<double> plan(static_cast<size_t>(I) * L, 0.0);
    const bool offline = policy == "eplb" || policy == "moetuner" || policy == "moetuner-joint";
    for (const LayerScore& ls : s.layers) {
        placements[ls.iteration].push_back(ls.placement);
        plan[static_cast<size_t>(ls.iteration) * L + ls.layer] = offline ? 0.0 : ls.plan_us * 1e-6;
    }
    sim::SimOptions o;
    o.schedule = sim::system_schedule(policy);
    o.route_rule = settings.options.route_rule;
    o.record_timeline = false;
    return sim::simulate(view, placements, d.truth, o, &plan);
}

struct Metric {
    std::string key;
    int64_t step;
    double value;
};

// Runs one point; returns its metrics and the headline number (ms) for the progress line.
std::vector<Metric> run_point(const PointData& d, const std::string& engine, const std::string& policy,
                              double* headline_ms) {
    const TraceView view = view_of(d.trace);
    std::vector<Metric> m;
    if (engine == "sim") {
        const sim::SimResult r = simulate_planned(policy, d, view, d.settings);
        double static_ms = r.mean_iteration_s * 1e3;
        if (policy != "static") {
            EvalSettings quick = d.settings;
            quick.plan_repeats = 1;
            static_ms = simulate_planned("static", d, view, quick).mean_iteration_s * 1e3;
        }
        for (const sim::IterationResult& it : r.iterations) {
            m.push_back({"iteration_ms", it.iteration, it.iteration_s * 1e3});
            m.push_back({"exposed_comm_ms", it.iteration, it.exposed_comm_s * 1e3});
            m.push_back({"max_mean_load", it.iteration, it.mean_max_mean_load});
        }
        const double mean_ms = r.mean_iteration_s * 1e3;
        m.push_back({"mean_iteration_ms", 0, mean_ms});
        m.push_back({"mean_exposed_comm_ms", 0, r.mean_exposed_comm_s * 1e3});
        m.push_back({"speedup_vs_static", 0, mean_ms > 0 ? static_ms / mean_ms : 0.0});
        *headline_ms = mean_ms;
    } else {
        const PolicyScore p = evaluate_policy(policy, view, d.belief, d.settings, /*allow_skip=*/false);
        m.push_back({"time_ms", 0, p.mean_system_ms});
        m.push_back({"eq6_ms", 0, p.mean_eq6_ms});
        m.push_back({"eq8_ms", 0, p.mean_eq8_ms});
        m.push_back({"max_mean_load", 0, p.mean_max_mean_load});
        m.push_back({"balance_std", 0, p.mean_balance_std});
        m.push_back({"rb_vs_static", 0, p.mean_rb});
        m.push_back({"plan_us", 0, p.median_plan_us});
        *headline_ms = p.mean_system_ms;
    }
    const std::vector<double> js = consecutive_js_divergence(d.trace);
    double js_mean = 0;
    for (double v : js) js_mean += v / static_cast<double>(js.size());
    m.push_back({"js_divergence_mean", 0, js_mean});
    return m;
}

}  // namespace

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options) {
    const std::vector<SweepPoint> points = expand_points(spec);
    SweepSummary summary;
    summary.points = static_cast<int>(points.size());
    auto log = [&](const std::string& line) {
        if (options.log) options.log(line);
    };

    std::set<std::string> done;
    std::error_code ec;
    const bool store_exists = fs::exists(options.store_path, ec);
    std::optional<Store> store;
    if (store_exists || !options.dry_run) {
        store.emplace(Store::open(options.store_path));
        for (const RunRow& row : store->list_runs(spec.name))
            if (row.info.command == "sweep" && row.status == "finished") done.insert(row.info.config_hash);
    }
    for (const SweepPoint& p : points)
        if (done.count(p.hash)) ++summary.already_done;
    if (options.dry_run) {
        for (const SweepPoint& p : points)
            log("[" + std::to_string(p.index + 1) + "/" + std::to_string(points.size()) + "] " + p.description +
                (done.count(p.hash) ? " (already done)" : ""));
        return summary;
    }

    const int n = summary.points;
    const int todo = n - summary.already_done;
    double run_seconds = 0;
    int ran_or_failed = 0;
    for (const SweepPoint& p : points) {
        const std::string prefix = "[" + std::to_string(p.index + 1) + "/" + std::to_string(n) + "] " + p.description;
        if (done.count(p.hash)) {
            ++summary.skipped;
            log(prefix + ": skipped: already done");
            continue;
        }
        if (options.max_points >= 0 && ran_or_failed >= options.max_points) break;
        const int64_t started = now_ns();
        RunInfo info = options.base;
        info.experiment = spec.name;
        info.command = "sweep";
        info.config_toml = p.canonical;
        info.config_hash = p.hash;
        info.seed = p.seed;
        info.backend = spec.engine == "sim" ? "sim" : "model";
        info.simulated = spec.engine == "sim";
        std::string run_id, status_text;
        try {
            const PointData d = load_point(spec, p);
            info.world_size = d.cluster.num_devices;
            double headline_ms = 0;
            const std::vector<Metric> metrics = run_point(d, spec.engine, p.policy, &headline_ms);
            store->transaction([&] {
                run_id = store->begin_run(info);
                store->put_params(run_id, p.params);
                for (const Metric& m : metrics) store->put_metric(run_id, m.key, m.step, m.value);
                store->finish_run(run_id, "finished", 0, "");
            });
            ++summary.ran;
            char buffer[64];
            std::snprintf(buffer, sizeof buffer, "%.4g ms", headline_ms);
            status_text = buffer;
        } catch (const Error& e) {
            if (e.exit_code() == kExitDatabase) throw;
            store->transaction([&] {
                run_id = store->begin_run(info);
                store->put_params(run_id, p.params);
                store->finish_run(run_id, "failed", e.exit_code(), e.what());
            });
            ++summary.failed;
            status_text = std::string("failed: ") + e.what();
        }
        summary.run_ids.push_back(run_id);
        ++ran_or_failed;
        run_seconds += (now_ns() - started) * 1e-9;
        const double eta = run_seconds / ran_or_failed * std::max(0, todo - ran_or_failed);
        log(prefix + ": " + status_text + " ETA " + format_duration(eta));
    }
    if (store) store->checkpoint();
    return summary;
}

}  // namespace prophet::sweep
