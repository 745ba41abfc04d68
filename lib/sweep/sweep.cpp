// sweep.cpp: sweep file parsing and validation, grid expansion, point identity, and the resumable point loop.
#include "sweep/sweep.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/evaluate.h"
#include "balance/options.h"
#include "core/error.h"
#include "core/process.h"
#include "core/sha256.h"
#include "core/toml_text.h"
#include "core/timer.h"
#include "sim/simulator.h"
#include "trace/trace.h"
#include "serve/serve_config.h"
#include "train/routing_trace.h"
#include "train/train_config.h"

namespace prophet::sweep {

namespace fs = std::filesystem;

namespace {

const char* kSweepKeys[] = {"name",  "engine",        "clusters",     "traces", "policies", "seeds",
                            "store", "match_devices", "train_config", "ranks",  "grid",     "set",
                            "validate_cluster", "variants", "command"};

// Train keys a real sweep sets itself: the sweep's own lists and the store/experiment the child must record into.
bool reserved_train_key(const std::string& k) {
    return k == "balance.policy" || k == "run.seed" || k == "run.experiment" || k == "store.path";
}

std::string quoted(const std::string& s) { return value_to_toml(Value(s)); }

// A scalar TOML node as a Value; nullopt for tables, arrays and dates.
std::optional<Value> scalar_value(const toml::node& node) {
    if (auto v = node.as_integer()) return Value(static_cast<int64_t>(v->get()));
    if (auto v = node.as_floating_point()) return Value(v->get());
    if (auto v = node.as_boolean()) return Value(v->get());
    if (auto v = node.as_string()) return Value(v->get());
    return std::nullopt;
}

// A grid or [sweep.set] value as TOML text: a scalar, or a list for list keys (serve.eval_mixture); nullopt for
// tables and dates.
std::optional<std::string> value_text(const toml::node& node) {
    if (const std::optional<Value> v = scalar_value(node)) return value_to_toml(*v);
    if (node.is_array()) return toml_node_text(node);
    return std::nullopt;
}

// The keys a real point's child accepts: prophet train's, or prophet profile --inference's (command = "infer").
const Schema& child_schema(const SweepSpec& spec) {
    return spec.command == "infer" ? serve::serve_schema() : train_schema();
}

const toml::array& require_array(const toml::table& sweep, const std::string& key, const std::string& example) {
    const toml::node* node = sweep.get(key);
    if (!node)
        throw_config_error("sweep." + key, "(missing)", "the sweep file must list " + key,
                           "add `" + key + " = " + example + "` under [sweep]");
    const toml::array* array = node->as_array();
    if (!array)
        throw_config_error("sweep." + key, toml_node_text(*node), "must be a list", "write `" + key + " = " + example + "`");
    if (array->empty())
        throw_config_error("sweep." + key, "[]", "must not be empty", "write `" + key + " = " + example + "`");
    return *array;
}

std::vector<std::string> string_list(const toml::table& sweep, const std::string& key, const std::string& example) {
    std::vector<std::string> out;
    for (const toml::node& item : require_array(sweep, key, example)) {
        const auto* s = item.as_string();
        if (!s || s->get().empty())
            throw_config_error("sweep." + key, toml_node_text(item), "every entry must be a non-empty string",
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

const char* kVariantExample = "[sweep.variants.planner]\n\"balance.policy\" = \"prophet\"\n\"sim.schedule\" = \"none\"";

// [sweep.variants]: name -> table of point keys; "balance.policy" is required, the other keys are point keys
// (balance.*, plan.*, sim.schedule), each checked against point_schema (type, bounds, choices).
std::vector<Variant> parse_variants(const toml::node& node, const std::string& origin) {
    const toml::table* table = node.as_table();
    if (!table || table->empty())
        throw_config_error("sweep.variants", toml_node_text(node), "must be a non-empty table of name -> table of keys",
                           kVariantExample);
    std::vector<Variant> variants;
    for (const auto& [name_key, body] : *table) {
        Variant v;
        v.name = std::string(name_key.str());
        const std::string where = "sweep.variants." + v.name;
        const toml::table* keys = body.as_table();
        if (v.name.empty() || !keys)
            throw_config_error(where, toml_node_text(body), "every variant must be a named table of point keys",
                               kVariantExample);
        Config check(point_schema(), "sweep variant " + v.name + " of " + origin);
        for (const auto& [key, value] : *keys) {
            const std::string k(key.str());
            if (!point_schema().find(k)) {
                std::string fix = "a variant sets balance.policy and balance.* / plan.* / sim.schedule keys";
                const std::string near = point_schema().closest(k);
                if (!near.empty()) fix += "; did you mean \"" + near + "\"?";
                throw_config_error(where + "." + k, toml_node_text(value), "not a key a variant may set", fix);
            }
            const std::optional<Value> sv = scalar_value(value);
            if (!sv)
                throw_config_error(where + "." + k, toml_node_text(value), "must be a number, bool or string",
                                   kVariantExample);
            check.apply_set(k + "=" + value_to_toml(*sv));  // exit 3 on a wrong type, bound or choice
            if (k == "balance.policy")
                v.policy = check.get_string(k);
            else
                v.set.emplace_back(k, value_to_toml(check.get(k)));
        }
        if (v.policy.empty())
            throw_config_error(where + ".balance.policy", "(missing)", "every variant names its policy",
                               "add \"balance.policy\" = \"prophet\" to [" + where + "]");
        std::sort(v.set.begin(), v.set.end());
        variants.push_back(std::move(v));
    }
    return variants;
}

}  // namespace

const Schema& point_schema() {
    static const Schema schema = [] {
        Schema s;
        add_balance_keys(s, /*allow_all=*/false, "static");
        s.add_int("plan.repeats", 1, 1, 1000, "timing repeats per planning call (median reported)");
        add_cost_model_keys(s, " (the simulated cluster stays fixed)");
        s.add_string("sim.schedule", "system", {"system", "none", "blockwise"},
                     "engine sim: the schedule the point is simulated under (system: the policy's own, blockwise for "
                     "prophet / prophet-oracle, none otherwise)");
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
            throw_config_error(std::string(key.str()), toml_node_text(node), "a sweep file has only a [sweep] table",
                               "move the key under [sweep] or remove it");
    const toml::table* sweep = root["sweep"].as_table();
    if (!sweep)
        throw_config_error("sweep", "(missing)", "the file needs a [sweep] table", "start the file with [sweep]");
    for (const auto& [key, node] : *sweep) {
        const std::string k(key.str());
        if (std::find(std::begin(kSweepKeys), std::end(kSweepKeys), k) == std::end(kSweepKeys))
            throw_config_error(
                "sweep." + k, toml_node_text(node), "unknown key",
                "use only name, engine, clusters, traces, policies, seeds, store, match_devices, train_config, ranks, "
                "validate_cluster, command, [sweep.grid], [sweep.set] and [sweep.variants]");
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
        if (!s || (s->get() != "sim" && s->get() != "model" && s->get() != "real"))
            throw_config_error("sweep.engine", toml_node_text(*engine), "must be \"sim\", \"model\" or \"real\"",
                               "engine = \"sim\" (discrete-event simulator), \"model\" (cost model means) or "
                               "\"real\" (prophet train child processes)");
        spec.engine = s->get();
    }
    if (const toml::node* store = sweep->get("store")) {
        const auto* s = store->as_string();
        if (!s || s->get().empty())
            throw_config_error("sweep.store", toml_node_text(*store), "must be a non-empty path string",
                               "store = \"results/prophet.db\"");
        spec.store_path = s->get();
    }
    if (const toml::node* match = sweep->get("match_devices")) {
        const auto* b = match->as_boolean();
        if (!b)
            throw_config_error("sweep.match_devices", toml_node_text(*match), "must be true or false",
                               "match_devices = true");
        spec.match_devices = b->get();
    }
    const bool real = spec.engine == "real";
    if (real) {
        // a real point trains the model of train_config; a cluster or trace would be silently meaningless
        for (const char* k : {"clusters", "traces", "match_devices"})
            if (const toml::node* node = sweep->get(k))
                throw_config_error(std::string("sweep.") + k, toml_node_text(*node),
                                   "engine = \"real\" trains the model of train_config and takes no " +
                                       std::string(k),
                                   "remove `" + std::string(k) + "` (vary the training run with [sweep.grid])");
        const toml::node* tc = sweep->get("train_config");
        const auto* tcs = tc ? tc->as_string() : nullptr;
        if (!tcs || tcs->get().empty())
            throw_config_error("sweep.train_config", tc ? toml_node_text(*tc) : "(missing)",
                               "engine = \"real\" needs the prophet train config file its points run",
                               "add `train_config = \"experiments/train/skewed-4rank.toml\"` under [sweep]");
        spec.train_config = tcs->get();
        if (const toml::node* command = sweep->get("command")) {
            const auto* c = command->as_string();
            if (!c || (c->get() != "train" && c->get() != "infer"))
                throw_config_error("sweep.command", toml_node_text(*command), "must be \"train\" or \"infer\"",
                                   "command = \"infer\" runs prophet profile --inference per point (docs/serving.md)");
            spec.command = c->get();
        }
        if (sweep->get("ranks")) {
            for (const toml::node& item : require_array(*sweep, "ranks", "[1, 4]")) {
                const auto* v = item.as_integer();
                if (!v || v->get() < 1 || v->get() > 4096)
                    throw_config_error("sweep.ranks", toml_node_text(item), "every entry must be an integer in [1, 4096]",
                                       "ranks = [1, 4] (1 runs without mpirun)");
                spec.ranks.push_back(static_cast<int>(v->get()));
            }
        } else {
            spec.ranks = {1};
        }
        if (const toml::node* vc = sweep->get("validate_cluster")) {
            const auto* vcs = vc->as_string();
            if (!vcs || vcs->get().empty())
                throw_config_error("sweep.validate_cluster", toml_node_text(*vc),
                                   "must be a non-empty path string, or \"calibrate\"",
                                   "validate_cluster = \"calibrate\" (measure the ranks at hand first)");
            spec.validate_cluster = vcs->get();
        }
        if (spec.validate_cluster == kCalibrate)
            for (int r : spec.ranks)
                if (r < 2)
                    throw_config_error("sweep.validate_cluster", "\"calibrate\"",
                                       "needs every entry of sweep.ranks >= 2 (a calibration measures communication), "
                                       "but ranks has " + std::to_string(r),
                                       "ranks = [2] or more, or a cluster file measured elsewhere");
        if (spec.command == "infer" && !spec.validate_cluster.empty())
            throw_config_error("sweep.validate_cluster", "\"" + spec.validate_cluster + "\"",
                               "simulates training steps, and an infer point runs none",
                               "remove it (serve.sim_clusters replays an inference run on simulated nodes)");
    } else {
        for (const char* k : {"train_config", "ranks", "set", "validate_cluster", "command"})
            if (const toml::node* node = sweep->get(k))
                throw_config_error(std::string("sweep.") + k, toml_node_text(*node),
                                   "only engine = \"real\" takes " + std::string(k),
                                   "remove it, or set engine = \"real\"");
        spec.clusters = string_list(*sweep, "clusters", "[\"experiments/clusters/hpwnv-16.toml\"]");
        spec.traces = string_list(*sweep, "traces", "[\"experiments/traces/zipf-e16-k2.toml\"]");
    }
    const auto& known = policy_names();
    if (const toml::node* variants_node = sweep->get("variants")) {
        if (sweep->get("policies"))
            throw_config_error("sweep.policies", toml_node_text(*sweep->get("policies")),
                               "a sweep with [sweep.variants] takes its policies from the variants",
                               "remove `policies` (each variant sets \"balance.policy\")");
        if (real)
            throw_config_error("sweep.variants", toml_node_text(*variants_node),
                               "engine = \"real\" takes no variants", "use engine = \"sim\" (prophet ablate runs the "
                               "real variants)");
        spec.variants = parse_variants(*variants_node, origin);
        for (const Variant& v : spec.variants) spec.policies.push_back(v.policy);
    } else {
        spec.policies = string_list(*sweep, "policies", "[\"static\", \"prophet\"]");
    }
    for (const std::string& p : spec.policies)
        if (std::find(known.begin(), known.end(), p) == known.end()) {
            std::string list;
            for (const auto& n : known) list += (list.empty() ? "" : " ") + n;
            throw_config_error("sweep.policies", quoted(p), "unknown policy", "use one of: " + list);
        }
    for (const toml::node& item : require_array(*sweep, "seeds", "[1, 2, 3]")) {
        const auto* v = item.as_integer();
        if (!v || v->get() < 0)
            throw_config_error("sweep.seeds", toml_node_text(item), "every seed must be a non-negative integer",
                               "seeds = [1, 2, 3]");
        spec.seeds.push_back(v->get());
    }
    if (const toml::node* grid_node = sweep->get("grid")) {
        const toml::table* grid = grid_node->as_table();
        if (!grid)
            throw_config_error("sweep.grid", toml_node_text(*grid_node), "must be a table of key -> list of values",
                               "[sweep.grid]\n\"trace.drift_rate\" = [0.0, 0.05]");
        for (const auto& [key, node] : *grid) {
            const std::string k(key.str());
            const bool trace_key = k.rfind("trace.", 0) == 0;
            const Schema& schema = real ? child_schema(spec) : trace_key ? trace_generator_schema() : point_schema();
            if (real && (!schema.find(k) || reserved_train_key(k))) {
                std::string fix = "a real sweep's grid key is a prophet train key (prophet train --help-config)";
                if (k == "balance.policy") fix = "list policies in `policies`, not in the grid";
                if (k == "run.seed") fix = "list seeds in `seeds`, not in the grid";
                if (k == "run.experiment" || k == "store.path")
                    fix = "the sweep sets it (the sweep name / the sweep's store)";
                const std::string near = schema.closest(k);
                if (!near.empty() && near != k) fix += "; did you mean \"" + near + "\"?";
                throw_config_error("sweep.grid." + k, toml_node_text(node), "not a key a real sweep grid may vary", fix);
            }
            if (!real && (!schema.find(k) || k == "balance.policy" || k == "trace.seed")) {
                std::string fix = "a grid key is a trace generator key (trace.*) or a plan.* / balance.* key";
                if (k == "balance.policy") fix = "list policies in `policies`, not in the grid";
                if (k == "trace.seed") fix = "list seeds in `seeds`, not in the grid";
                const std::string near = schema.closest(k);
                if (!near.empty() && near != k) fix += "; did you mean \"" + near + "\"?";
                throw_config_error("sweep.grid." + k, toml_node_text(node), "not a key a sweep grid may vary", fix);
            }
            const toml::array* values = node.as_array();
            if (!values || values->empty())
                throw_config_error("sweep.grid." + k, toml_node_text(node), "must be a non-empty list of values",
                                   "\"" + k + "\" = [v1, v2]");
            GridAxis axis;
            axis.key = k;
            for (const toml::node& item : *values) {
                const std::optional<std::string> v = value_text(item);
                if (!v)
                    throw_config_error("sweep.grid." + k, toml_node_text(item),
                                       "every value must be a number, bool, string or list", "\"" + k + "\" = [v1, v2]");
                Config check(schema, "sweep grid of " + origin);
                check.apply_set(k + "=" + *v);  // exit 3 on a wrong type or bound
                axis.values.push_back(value_to_toml(check.get(k)));
            }
            spec.grid.push_back(std::move(axis));
        }
        std::sort(spec.grid.begin(), spec.grid.end(),
                  [](const GridAxis& a, const GridAxis& b) { return a.key < b.key; });
    }
    if (const toml::node* set_node = real ? sweep->get("set") : nullptr) {
        const toml::table* set = set_node->as_table();
        if (!set)
            throw_config_error("sweep.set", toml_node_text(*set_node), "must be a table of train key -> value",
                               "[sweep.set]\n\"train.steps\" = 6");
        for (const auto& [key, node] : *set) {
            const std::string k(key.str());
            if (!child_schema(spec).find(k) || reserved_train_key(k)) {
                std::string fix = "use a prophet train key (prophet train --help-config) other than balance.policy, "
                                  "run.seed, run.experiment and store.path";
                const std::string near = child_schema(spec).closest(k);
                if (!near.empty() && near != k) fix += "; did you mean \"" + near + "\"?";
                throw_config_error("sweep.set." + k, toml_node_text(node), "not a key a real sweep may set", fix);
            }
            for (const GridAxis& axis : spec.grid)
                if (axis.key == k)
                    throw_config_error("sweep.set." + k, toml_node_text(node), "the key is also in [sweep.grid]",
                                       "keep it in one of [sweep.set] and [sweep.grid]");
            const std::optional<std::string> v = value_text(node);
            if (!v)
                throw_config_error("sweep.set." + k, toml_node_text(node), "must be a number, bool, string or list",
                                   "\"" + k + "\" = 6");
            Config check(child_schema(spec), "sweep set of " + origin);
            check.apply_set(k + "=" + *v);  // exit 3 on a wrong type or bound
            spec.set.emplace_back(k, value_to_toml(check.get(k)));
        }
        std::sort(spec.set.begin(), spec.set.end());
    }
    for (const Variant& v : spec.variants)
        for (const auto& kv : v.set)
            for (const GridAxis& axis : spec.grid)
                if (axis.key == kv.first)
                    throw_config_error("sweep.variants." + v.name + "." + kv.first, kv.second,
                                       "the key is also in [sweep.grid]",
                                       "keep it in one of [sweep.grid] and the variants");
    if (real) check_files(spec, {spec.train_config}, "train_config");
    if (!spec.validate_cluster.empty() && spec.validate_cluster != kCalibrate) {
        check_files(spec, {spec.validate_cluster}, "validate_cluster");
        load_cluster_file(resolve_path(spec, spec.validate_cluster));  // exit 3 on a defective cluster file now
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

namespace {

// The grid values of combination c (the last key varies fastest), in key order.
KeyValues grid_combination(const SweepSpec& spec, size_t c) {
    KeyValues grid;
    for (size_t a = spec.grid.size(); a-- > 0;) {
        const GridAxis& axis = spec.grid[a];
        grid.emplace_back(axis.key, axis.values[c % axis.values.size()]);
        c /= axis.values.size();
    }
    std::reverse(grid.begin(), grid.end());
    return grid;
}

std::string file_sha256(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return sha256_hex(buffer.str());
}

// engine "real": ranks x seeds x grid x policies. The point config is the train overrides the child gets plus the
// point.* coordinates; the train config file's SHA-256 is part of it, so editing the file reruns the points.
std::vector<SweepPoint> expand_real_points(const SweepSpec& spec, size_t combos) {
    const std::string config_sha = file_sha256(resolve_path(spec, spec.train_config));
    std::vector<SweepPoint> points;
    for (int ranks : spec.ranks)
        for (int64_t seed : spec.seeds)
            for (size_t c = 0; c < combos; ++c)
                for (const std::string& policy : spec.policies) {
                    SweepPoint p;
                    p.policy = policy;
                    p.seed = seed;
                    p.ranks = ranks;
                    p.grid = grid_combination(spec, c);
                    KeyValues params = spec.set;
                    for (const auto& kv : p.grid) params.push_back(kv);
                    params.emplace_back("balance.policy", quoted(policy));
                    params.emplace_back("run.seed", std::to_string(seed));
                    params.emplace_back("point.engine", quoted(spec.engine));
                    params.emplace_back("point.train_config", quoted(spec.train_config));
                    if (spec.command == "infer") params.emplace_back("point.command", quoted(spec.command));
                    params.emplace_back("point.train_config_sha256", quoted(config_sha));
                    params.emplace_back("point.ranks", std::to_string(ranks));
                    params.emplace_back("point.seed", std::to_string(seed));
                    std::sort(params.begin(), params.end());
                    p.params = params;
                    p.canonical = canonical_text(params);
                    p.hash = sha256_hex(p.canonical);
                    p.description = policy + " " + stem(spec.train_config) + " D=" + std::to_string(ranks) +
                                    " seed=" + std::to_string(seed);
                    for (const auto& [k, v] : p.grid) p.description += " " + k + "=" + v;
                    p.index = static_cast<int>(points.size());
                    points.push_back(std::move(p));
                }
    return points;
}

}  // namespace

std::string coordinates_key(const SweepPoint& p) {
    KeyValues rest;
    for (const auto& kv : p.params)
        if (kv.first != "balance.policy") rest.push_back(kv);
    return canonical_text(rest);
}

std::vector<SweepPoint> expand_points(const SweepSpec& spec) {
    size_t combos = 1;
    for (const GridAxis& axis : spec.grid) combos *= axis.values.size();
    if (spec.engine == "real") return expand_real_points(spec, combos);
    // the innermost axis: the policies, or the variants (a policy with fixed keys)
    std::vector<Variant> arms = spec.variants;
    if (arms.empty())
        for (const std::string& policy : spec.policies) arms.push_back({"", policy, {}});
    std::vector<SweepPoint> points;
    for (const std::string& cluster : spec.clusters)
        for (const std::string& trace : spec.traces)
            for (int64_t seed : spec.seeds)
                for (size_t c = 0; c < combos; ++c)
                    for (const Variant& arm : arms) {
                        const std::string& policy = arm.policy;
                        SweepPoint p;
                        p.cluster = cluster;
                        p.trace = trace;
                        p.policy = policy;
                        p.variant = arm.name;
                        p.seed = seed;
                        p.grid = grid_combination(spec, c);
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
                        for (const auto& [k, v] : arm.set) config.apply_set(k + "=" + v);
                        if (spec.engine == "model" && config.get_string("sim.schedule") != "system")
                            throw_config_error("sim.schedule", quoted(config.get_string("sim.schedule")),
                                               "engine = \"model\" simulates no schedule (it reports Eq 6 or Eq 8 "
                                               "by the policy's system)",
                                               "use engine = \"sim\", or leave sim.schedule out");
                        for (auto& kv : config.flat()) params.push_back(std::move(kv));
                        if (!arm.name.empty()) params.emplace_back("ablate.variant", quoted(arm.name));
                        params.emplace_back("point.engine", quoted(spec.engine));
                        params.emplace_back("point.cluster", quoted(cluster));
                        params.emplace_back("point.trace", quoted(trace));
                        params.emplace_back("point.seed", std::to_string(seed));
                        if (is_generator(trace)) params.emplace_back("trace.seed", std::to_string(seed));
                        std::sort(params.begin(), params.end());
                        p.params = params;
                        p.canonical = canonical_text(params);
                        p.hash = sha256_hex(p.canonical);
                        p.description = (arm.name.empty() ? policy : arm.name + " (" + policy + ")") + " " +
                                        stem(cluster) + " " + stem(trace) + " seed=" + std::to_string(seed);
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
    std::string schedule = "system";  // sim.schedule: system | none | blockwise
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
    const Config pc = point_config(p.params);
    const TraceShape shape{meta.num_devices, meta.num_experts, meta.tokens_per_iteration,
                           meta.d_model,     meta.d_ffn,       meta.seq_len};
    CostModel cost = cost_model_for_trace(d.cluster, p.cluster, shape, p.trace, pc,
                                          "add \"plan.d_model\" and \"plan.d_ffn\" to [sweep.grid]");
    // the truth is the cluster as it is; only the planner's belief is scaled (below)
    cost.compute_scale = 1.0;
    cost.bandwidth_scale = 1.0;
    d.truth = cost;
    d.belief = cost;
    d.belief.compute_scale = pc.get_float("plan.compute_scale");
    d.belief.bandwidth_scale = pc.get_float("plan.bandwidth_scale");
    d.settings.options = balance_options_from(pc);
    d.schedule = pc.get_string("sim.schedule");
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
// score: optional copy of the policy's PolicyScore (balance_std, rb_vs_static per iteration and layer).
// schedule: "system" (the policy's own, sim::system_schedule), "none" or "blockwise".
sim::SimResult simulate_planned(const std::string& policy, const PointData& d, const TraceView& view,
                                const EvalSettings& settings, const std::string& schedule,
                                PolicyScore* score = nullptr) {
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
    o.schedule = schedule == "system"   ? sim::system_schedule(policy)
                 : schedule == "none"   ? sim::ScheduleKind::kNone
                                        : sim::ScheduleKind::kBlockwise;
    o.route_rule = effective_route_rule(policy, settings.options);
    o.record_timeline = false;
    std::vector<int64_t> padded;  // deepspeed simulates its padded slots
    sim::SimResult r = sim::simulate(sim::dispatched_view(policy, view, settings.options, &padded), placements,
                                     d.truth, o, &plan);
    if (score) *score = std::move(s);
    return r;
}

struct Metric {
    std::string key;
    int64_t step;
    double value;
    int layer = -1;  // >= 0: a per-layer metric (step 0)
};

// Runs one point; returns its metrics and the headline number (ms) for the progress line.
std::vector<Metric> run_point(const PointData& d, const std::string& engine, const std::string& policy,
                              double* headline_ms) {
    const TraceView view = view_of(d.trace);
    std::vector<Metric> m;
    if (engine == "sim") {
        PolicyScore score;
        const sim::SimResult r = simulate_planned(policy, d, view, d.settings, d.schedule, &score);
        double static_ms = r.mean_iteration_s * 1e3;
        if (policy != "static" || d.schedule != "system") {
            EvalSettings quick = d.settings;
            quick.plan_repeats = 1;
            // the reference is static in its own system (schedule none), whatever this point's schedule
            static_ms = simulate_planned("static", d, view, quick, "system").mean_iteration_s * 1e3;
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
        // per layer (step 0, layer = block index), means over iterations: simulated MoE time of the block,
        // population std of the per-device computed tokens H_i, and RB = std(static) / std(policy)
        const int L = view.num_layers;
        std::vector<double> moe_ms(L, 0.0), bal_std(L, 0.0), rb(L, 0.0);
        std::vector<int> moe_n(L, 0), score_n(L, 0), rb_n(L, 0);
        for (const sim::IterationResult& it : r.iterations)
            for (int l = 0; l < L && l < static_cast<int>(it.blocks.size()); ++l) {
                moe_ms[l] += it.blocks[l].moe_s * 1e3;
                ++moe_n[l];
            }
        for (const LayerScore& ls : score.layers) {
            if (ls.layer < 0 || ls.layer >= L) continue;
            bal_std[ls.layer] += ls.balance_std;
            ++score_n[ls.layer];
            if (std::isfinite(ls.rb_vs_static)) {  // infinite (policy std 0, static's not): left out of the mean
                rb[ls.layer] += ls.rb_vs_static;
                ++rb_n[ls.layer];
            }
        }
        double rb_sum = 0;
        for (int l = 0; l < L; ++l) {
            const double mm = moe_n[l] ? moe_ms[l] / moe_n[l] : 0.0;
            const double sd = score_n[l] ? bal_std[l] / score_n[l] : 0.0;
            const double rl = rb_n[l] ? rb[l] / rb_n[l] : 0.0;
            m.push_back({"layer_moe_ms", 0, mm, l});
            m.push_back({"layer_balance_std", 0, sd, l});
            m.push_back({"layer_rb_vs_static", 0, rl, l});
            rb_sum += rl;
        }
        m.push_back({"mean_rb_vs_static", 0, L > 0 ? rb_sum / L : 0.0});
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

// The start of a child's command line: mpirun for several ranks, then the prophet binary.
std::vector<std::string> child_launcher(int ranks, const SweepOptions& options) {
    std::vector<std::string> cmd;
    if (ranks > 1)  // as root OpenMPI needs --allow-run-as-root; more ranks than cores need --oversubscribe
        cmd = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
    cmd.push_back(options.prophet_binary.empty() ? self_binary() : options.prophet_binary);
    return cmd;
}

std::vector<std::string> child_command(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options) {
    std::vector<std::string> cmd = child_launcher(p.ranks, options);
    const std::vector<const char*> sub = spec.command == "infer"
                                             ? std::vector<const char*>{"profile", "--inference", "--config"}
                                             : std::vector<const char*>{"train", "--config"};
    for (const char* a : sub) cmd.push_back(a);
    cmd.push_back(resolve_path(spec, spec.train_config));
    cmd.push_back("--json");
    auto set = [&](const std::string& kv) {
        cmd.push_back("--set");
        cmd.push_back(kv);
    };
    set("store.path=" + options.store_path);
    set("run.experiment=" + spec.name);
    set("run.seed=" + std::to_string(p.seed));
    set("balance.policy=" + p.policy);
    for (const auto& [k, v] : spec.set) set(k + "=" + v);
    for (const auto& [k, v] : p.grid) set(k + "=" + v);
    return cmd;
}

// validate_cluster = "calibrate": `prophet profile --calibrate` on the point's ranks, with the sweep's and the
// point's grid keys (they may change the model's shapes), writing `out`; the profile run is recorded in the store
// under the sweep's name. Throws prophet::Error with the child's last stderr line when it fails.
void calibrate_cluster(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options, const std::string& out) {
    std::vector<std::string> cmd = child_launcher(p.ranks, options);
    for (const std::string& a : {std::string("profile"), std::string("--config"), resolve_path(spec, spec.train_config),
                                 std::string("--calibrate"), std::string("--cluster-out"), out})
        cmd.push_back(a);
    std::vector<std::string> sets = {"store.path=" + options.store_path, "run.experiment=" + spec.name,
                                     "run.seed=" + std::to_string(p.seed)};
    for (const auto& [k, v] : spec.set) sets.push_back(k + "=" + v);
    for (const auto& [k, v] : p.grid) sets.push_back(k + "=" + v);
    for (const std::string& kv : sets) {
        cmd.push_back("--set");
        cmd.push_back(kv);
    }
    const ChildResult child = run_child(cmd);
    if (child.exit_code != 0) {
        const std::string line = last_line(child.err);
        throw Error(child.exit_code, "prophet profile --calibrate exited with code " +
                                         std::to_string(child.exit_code) + (line.empty() ? "" : ": " + line));
    }
}

// The child's final {"summary": true, ...} line of stdout; throws when there is none.
nlohmann::json child_summary(const std::string& out) {
    std::istringstream lines(out);
    std::string line;
    nlohmann::json summary;
    while (std::getline(lines, line)) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.value("summary", false)) summary = std::move(j);
    }
    if (summary.is_null())
        throw Error(kExitRunFailed, "run failed: the prophet train child exited 0 but printed no summary line");
    return summary;
}

}  // namespace

Validation validate_run(Store& store, const std::string& run_id, const std::string& policy,
                        const std::string& cluster_path) {
    Config config(train_schema(), "the params of run " + run_id);
    for (const auto& [k, v] : store.get_params(run_id))
        if (train_schema().find(k)) config.apply_set(k + "=" + v);
    ModelConfig m;
    m.T = static_cast<int>(config.get_int("model.T"));
    m.C = static_cast<int>(config.get_int("model.C"));
    m.L = static_cast<int>(config.get_int("model.L"));
    m.E = static_cast<int>(config.get_int("model.E"));
    m.K = static_cast<int>(config.get_int("model.K"));
    m.F = static_cast<int>(config.get_int("model.F"));
    m.B = static_cast<int>(config.get_int("model.B"));
    const RunRow run = store.get_run(run_id);
    const int D = run.info.world_size;
    // the global step_ms rows give the recorded steps (the loads are recorded for the same steps)
    std::map<int64_t, double> step_ms;
    for (const MetricRow& row : store.get_metrics(run_id, "step_ms"))
        if (row.layer == -1 && row.rank == -1) step_ms[row.step] = row.value;
    if (step_ms.size() < 2)
        throw_input_error("run " + run_id, "recorded " + std::to_string(step_ms.size()) + " steps",
                          "validation skips step 0 and needs at least 2 steps (train.steps >= 2)");
    Trace trace;
    trace.meta = routing_trace_meta(m, D, static_cast<int>(step_ms.size()), "profile:" + run_id);
    for (const auto& [step, ms] : step_ms)
        for (int l = 0; l < m.L; ++l) {
            const std::optional<ExpertLoadRow> load = store.get_expert_load(run_id, step, l);
            if (!load || load->num_devices != D || load->num_experts != m.E)
                throw_input_error("run " + run_id,
                                  "no expert_load row of D = " + std::to_string(D) + " by E = " + std::to_string(m.E) +
                                      " for step " + std::to_string(step) + ", layer " + std::to_string(l),
                                  "keep train.record_loads = true in the train config");
            trace.counts.insert(trace.counts.end(), load->tokens.begin(), load->tokens.end());
        }
    ClusterSpec cluster = load_cluster_file(cluster_path);
    cluster.num_devices = D;
    if (cluster.devices_per_node > D || D % cluster.devices_per_node != 0) cluster.devices_per_node = D;
    CostModel cost;
    cost.cluster = cluster;
    cost.model.d_model = m.C;
    cost.model.d_ffn = m.hidden_size();
    cost.model.seq_len = m.T;
    cost.model.bytes_per_elem = 4;
    cost.model.tokens_per_device = static_cast<int64_t>(m.B / D) * m.T;
    EvalSettings settings;
    settings.options = balance_options_from(config);
    settings.plan_repeats = 1;
    settings.profile_iterations =
        static_cast<int>(std::max<int64_t>(1, config.get_int("balance.profile_iterations")));
    settings.num_nodes = std::max(1, D / std::max(1, cluster.devices_per_node));
    sim::SimOptions o;
    o.schedule = sim::parse_schedule_kind(config.get_string("schedule.mode"));  // the child's own schedule
    o.plan_s = -1;  // the policy's measured planning time, as the trainer plans in-step
    // the step's tail after the last backward block (dense all-reduce, norm, AdamW), when the cluster measured it
    o.include_optimizer = cluster.step_tail_s >= 0;
    o.optimizer_s = std::max(0.0, cluster.step_tail_s);
    o.record_timeline = false;
    const sim::SimResult r = sim::simulate_policy(policy, view_of(trace), cost, settings, o);
    Validation v;
    for (size_t i = 1; i < r.iterations.size(); ++i)
        v.sim_step_ms += r.iterations[i].iteration_s * 1e3 / static_cast<double>(r.iterations.size() - 1);
    std::vector<double> measured;
    for (const auto& [step, ms] : step_ms)
        if (step != step_ms.begin()->first) measured.push_back(ms);
    std::sort(measured.begin(), measured.end());
    const size_t n = measured.size();
    v.measured_step_ms = n % 2 ? measured[n / 2] : 0.5 * (measured[n / 2 - 1] + measured[n / 2]);
    v.sim_error = v.measured_step_ms > 0 ? (v.sim_step_ms - v.measured_step_ms) / v.measured_step_ms : 0.0;
    return v;
}

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options) {
    const std::vector<SweepPoint> points = expand_points(spec);
    SweepSummary summary;
    summary.points = static_cast<int>(points.size());
    auto log = [&](const std::string& line) {
        if (options.log) options.log(line);
    };

    const bool real = spec.engine == "real";
    std::set<std::string> done;
    std::map<std::string, double> static_ms;  // engine real: coordinates_key -> the static point's median_step_ms
    std::error_code ec;
    const bool store_exists = fs::exists(options.store_path, ec);
    std::optional<Store> store;
    if (store_exists || !options.dry_run) {
        store.emplace(Store::open(options.store_path));
        std::map<std::string, std::string> done_runs;  // config_hash -> run_id
        for (const RunRow& row : store->list_runs(spec.name))
            if (row.info.command == "sweep" && row.status == "finished") {
                done.insert(row.info.config_hash);
                done_runs.emplace(row.info.config_hash, row.run_id);
            }
        // a resumed sweep still pairs new points with the static points an earlier invocation finished
        if (real)
            for (const SweepPoint& p : points)
                if (p.policy == "static" && done_runs.count(p.hash))
                    for (const MetricRow& m : store->get_metrics(done_runs[p.hash], "median_step_ms"))
                        static_ms[coordinates_key(p)] = m.value;
    }
    for (const SweepPoint& p : points)
        if (done.count(p.hash)) ++summary.already_done;
    if (options.dry_run) {
        for (const SweepPoint& p : points)
            log("[" + std::to_string(p.index + 1) + "/" + std::to_string(points.size()) + "] " + p.description +
                (done.count(p.hash) ? " (already done)" : ""));
        return summary;
    }

    // validate_cluster = "calibrate": one calibration per (ranks, grid values), made before the first such point
    struct Calibrated {
        std::string path, error;
    };
    std::map<std::string, Calibrated> calibrated;
    const fs::path store_dir = fs::path(options.store_path).parent_path();
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
        info.backend = spec.engine == "sim" ? "sim" : spec.engine == "model" ? "model" : "real";
        info.simulated = spec.engine == "sim";
        std::string run_id, status_text;
        if (real) {
            info.world_size = p.ranks;
            // the child records its own run: hold no connection to the store while it writes
            store.reset();
            std::string validate_path = spec.validate_cluster.empty() ? "" : resolve_path(spec, spec.validate_cluster);
            std::string calibration_error;
            if (spec.validate_cluster == kCalibrate) {
                const std::string key = std::to_string(p.ranks) + "\n" + canonical_text(p.grid);
                if (!calibrated.count(key)) {
                    Calibrated c;
                    c.path = (store_dir / "clusters" /
                              (spec.name + "-" + std::to_string(p.ranks) + "rank" +
                               (p.grid.empty() ? "" : "-" + sha256_hex(key).substr(0, 8)) + ".toml"))
                                 .string();
                    try {
                        calibrate_cluster(spec, p, options, c.path);
                        log("calibrated " + std::to_string(p.ranks) + " rank(s) for validation: " + c.path);
                    } catch (const Error& e) {
                        c.error = std::string("calibration failed: ") + e.what();
                        log(c.error);
                    }
                    calibrated.emplace(key, c);
                }
                validate_path = calibrated[key].path;
                calibration_error = calibrated[key].error;
            }
            const ChildResult child = run_child(child_command(spec, p, options));
            store.emplace(Store::open(options.store_path));
            std::string error;
            int exit_code = child.exit_code;
            nlohmann::json s;
            if (child.exit_code == 0) {
                try {
                    s = child_summary(child.out);
                } catch (const Error& e) {
                    error = e.what();
                    exit_code = e.exit_code();
                }
            } else {
                const std::string line = last_line(child.err);
                error = "prophet train exited with code " + std::to_string(child.exit_code) +
                        (line.empty() ? "" : ": " + line);
            }
            if (error.empty()) {
                const double step_ms = s.value("median_step_ms", 0.0);
                const std::string key = coordinates_key(p);
                if (p.policy == "static") static_ms[key] = step_ms;
                KeyValues params = p.params;
                const std::string child_id = s.value("run_id", std::string());
                params.emplace_back("child_run_id", quoted(child_id));
                std::optional<Validation> validation;
                std::string validation_error = calibration_error;
                if (!spec.validate_cluster.empty() && validation_error.empty()) {
                    params.emplace_back("validate_cluster", quoted(std::as_const(validate_path)));
                    try {
                        validation = validate_run(*store, child_id, p.policy, validate_path);
                    } catch (const Error& e) {
                        if (e.exit_code() == kExitDatabase) throw;
                        validation_error = e.what();
                    }
                }
                store->transaction([&] {
                    run_id = store->begin_run(info);
                    store->put_params(run_id, params);
                    for (const char* k : {"median_step_ms", "median_tokens_per_s", "median_max_mean_load",
                                          "final_loss"})
                        store->put_metric(run_id, k, 0, s.value(k, 0.0));
                    if (static_ms.count(key) && step_ms > 0)
                        store->put_metric(run_id, "speedup_vs_static", 0, static_ms[key] / step_ms);
                    if (validation) {
                        store->put_metric(run_id, "sim_step_ms", 0, validation->sim_step_ms);
                        store->put_metric(run_id, "measured_step_ms", 0, validation->measured_step_ms);
                        store->put_metric(run_id, "sim_error", 0, validation->sim_error);
                    }
                    store->finish_run(run_id, "finished", 0, "");
                });
                ++summary.ran;
                char buffer[64];
                std::snprintf(buffer, sizeof buffer, "%.4g ms", step_ms);
                status_text = buffer;
                if (validation) {
                    std::snprintf(buffer, sizeof buffer, " (sim %.4g ms vs measured %.4g ms: %+.1f%%)",
                                  validation->sim_step_ms, validation->measured_step_ms,
                                  validation->sim_error * 100);
                    status_text += buffer;
                } else if (!validation_error.empty()) {
                    status_text += " (validation skipped: " + validation_error + ")";
                }
            } else {
                store->transaction([&] {
                    run_id = store->begin_run(info);
                    store->put_params(run_id, p.params);
                    store->finish_run(run_id, "failed", exit_code, error);
                });
                ++summary.failed;
                status_text = "failed: " + error;
            }
        } else {
            try {
                const PointData d = load_point(spec, p);
                info.world_size = d.cluster.num_devices;
                double headline_ms = 0;
                const std::vector<Metric> metrics = run_point(d, spec.engine, p.policy, &headline_ms);
                store->transaction([&] {
                    run_id = store->begin_run(info);
                    store->put_params(run_id, p.params);
                    for (const Metric& m : metrics) store->put_metric(run_id, m.key, m.step, m.value, m.layer);
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
