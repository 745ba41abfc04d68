// spec.cpp: the sweep file: parsing and validation of [sweep] into a SweepSpec (docs/sweep.md), and the
// schema of the per-point keys a grid or a variant may set.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/options.h"
#include "balance/regime.h"
#include "core/closest_name.h"
#include "core/error.h"
#include "core/names.h"
#include "core/toml_text.h"
#include "serve/serve_config.h"
#include "sim/gemm_grid_passes.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"
#include "sweep/uncertainty.h"
#include "trace/trace.h"
#include "train/train_config.h"

namespace prophet::sweep {

namespace fs = std::filesystem;
using detail::quoted;
using detail::resolve_path;

namespace {

// The keys a [sweep] table may hold; `table`: the key holds a table of its own, written [sweep.<key>] in messages.
struct SweepKey {
    const char* name;
    bool table;
};
const SweepKey kSweepKeys[] = {{"name", false},
                               {"engine", false},
                               {"clusters", false},
                               {"traces", false},
                               {"policies", false},
                               {"seeds", false},
                               {"store", false},
                               {"match_devices", false},
                               {"train_config", false},
                               {"ranks", false},
                               {"grid", true},
                               {"set", true},
                               {"validate_cluster", false},
                               {"variants", true},
                               {"command", false},
                               {"time_limit_s", false},
                               {"validate_oversubscribed", false},
                               {"slurm", true},  // [sweep.slurm]: read by launch_slurm.cpp
                               {"calibrate_set", true},
                               {"calibrate_grid_passes", false},
                               {"truth_scale", false},
                               {"uncertainty", false}};  // uncertainty.cpp

// Train keys a real sweep sets itself: the sweep's own lists and the store/experiment the child must record into.
bool reserved_train_key(const std::string& k) {
    return k == "balance.policy" || k == "run.seed" || k == "run.experiment" || k == "store.path";
}

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
        add_regime_keys(s, "auto");  // balance.regime, rebalance_every, window (balance/regime.h)
        s.add_int("plan.repeats", 1, 1, 1000, "timing repeats per planning call (median reported)");
        add_cost_model_keys(s, " (the simulated cluster stays fixed)");
        s.add_string("sim.schedule", "system", {"system", "none", "blockwise", "fastermoe"},
                     "engine sim: the schedule the point is simulated under (system: the policy's own, blockwise for "
                     "prophet / prophet-oracle, fastermoe for fastermoe, none otherwise; fastermoe: Trans/Agg beside "
                     "the dispatch all-to-alls)");
        s.add_string("sim.plan_time", "measured", {"measured", "none"},
                     "engine sim: the Plan op of an online policy takes each layer's planning time measured on this "
                     "machine (measured) or no time (none: the point's times depend on no clock, the same every run)");
        // the whole iteration (sim/dense_ops.h): embedding, attention, LM head, dense all-reduce, optimizer
        s.add_string("sim.iteration", "moe", {"moe", "full"},
                     "engine sim: moe = the MoE blocks only (the paper's iteration), full = the whole iteration");
        s.add_int("sim.vocab", 50257, 1, 1 << 24, "sim.iteration full: V, vocabulary of the LM head (GPT-2's)");
        s.add_int("sim.num_heads", 16, 1, 4096, "sim.iteration full: NH, attention heads (softmax bytes)");
        s.add_string("sim.allreduce", "blocking", {"blocking", "bucketed"},
                     "sim.iteration full: dense all-reduce after the backward (blocking) or per bucket beside it "
                     "(bucketed, as PyTorch DDP)");
        s.add_float("sim.bucket_mb", 25.0, 0.0, 1e6, "sim.allreduce bucketed: bucket size, MiB (DDP's default 25)");
        s.add_string("sim.allreduce_algorithm", "auto", {"auto", "ring", "hierarchical"},
                     "dense all-reduce algorithm (auto: hierarchical on several nodes, ring on one)");
        // the simulated truth against the cluster file (uncertainty.h): the planner keeps the nominal cluster
        for (const char* name : {"compute", "bandwidth", "latency", "intra_bandwidth", "inter_bandwidth"})
            s.add_float(std::string("truth.") + name + "_scale", 1.0, 0.0, 1e6,
                        std::string("engine sim: the simulated cluster's ") + name +
                            " figures x this factor (the planner plans with the file's)",
                        true);
        return s;
    }();
    return schema;
}

namespace {

toml::table parse_toml(const std::string& text, const std::string& origin) {
    try {
        return toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        std::ostringstream where;
        where << e.source().begin;
        throw_input_error(origin,
                          std::string("TOML syntax error: ") + std::string(e.description()) + " at " + where.str(),
                          "fix the TOML syntax");
    }
}

// sweep.<key> into `value` when the file sets it; a config error (exit 3) when it is not true or false.
void read_optional_bool(const toml::table& sweep, const char* key, const std::string& fix, bool& value) {
    if (const toml::node* node = sweep.get(key)) {
        const auto* b = node->as_boolean();
        if (!b) throw_config_error(std::string("sweep.") + key, toml_node_text(*node), "must be true or false", fix);
        value = b->get();
    }
}

// "name, engine, ..., [sweep.grid], ... and [sweep.slurm]": kSweepKeys for an unknown key's fix, the plain keys
// first, both in kSweepKeys' order, so a key added there is named here too.
std::string known_sweep_keys() {
    std::vector<std::string> words;
    for (const SweepKey& k : kSweepKeys)
        if (!k.table) words.emplace_back(k.name);
    for (const SweepKey& k : kSweepKeys)
        if (k.table) words.push_back(std::string("[sweep.") + k.name + "]");
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) out += (i == 0 ? "" : i + 1 == words.size() ? " and " : ", ") + words[i];
    return out;
}

// An unknown [sweep] key's fix: the key it is nearest, if any, and every known one.
std::string unknown_key_fix(const std::string& key) {
    std::vector<std::string> names;
    for (const SweepKey& k : kSweepKeys) names.emplace_back(k.name);
    const std::string near = closest_name(key, names);
    return (near.empty() ? "" : "did you mean \"" + near + "\"? ") + "use only " + known_sweep_keys();
}

// The file's [sweep] table, after checking that it is the only table and holds only known keys.
const toml::table& sweep_table(const toml::table& root) {
    for (const auto& [key, node] : root)
        if (key.str() != "sweep")
            throw_config_error(std::string(key.str()), toml_node_text(node), "a sweep file has only a [sweep] table",
                               "move the key under [sweep] or remove it");
    const toml::table* sweep = root["sweep"].as_table();
    if (!sweep)
        throw_config_error("sweep", "(missing)", "the file needs a [sweep] table", "start the file with [sweep]");
    for (const auto& [key, node] : *sweep) {
        const std::string k(key.str());
        if (std::none_of(std::begin(kSweepKeys), std::end(kSweepKeys),
                         [&](const SweepKey& known) { return k == known.name; }))
            throw_config_error("sweep." + k, toml_node_text(node), "unknown key", unknown_key_fix(k));
    }
    return *sweep;
}

// name, engine, store and match_devices: the keys of every engine.
void read_common_keys(const toml::table& sweep, SweepSpec& spec) {
    const auto name = sweep["name"].value<std::string>();
    if (!name || name->empty())
        throw_config_error("sweep.name", "(missing)", "a sweep needs a non-empty name (the runs' experiment label)",
                           "add `name = \"my-sweep\"` under [sweep]");
    check_file_name("sweep.name", *name);  // it names files: <name>-<stamp>.sbatch, clusters/<name>-<D>rank.toml
    spec.name = *name;
    if (const toml::node* engine = sweep.get("engine")) {
        const auto* s = engine->as_string();
        if (!s || (s->get() != "sim" && s->get() != "model" && s->get() != "real"))
            throw_config_error("sweep.engine", toml_node_text(*engine), "must be \"sim\", \"model\" or \"real\"",
                               "engine = \"sim\" (discrete-event simulator), \"model\" (cost model means) or "
                               "\"real\" (prophet train child processes)");
        spec.engine = s->get();
    }
    if (const toml::node* store = sweep.get("store")) {
        const auto* s = store->as_string();
        if (!s || s->get().empty())
            throw_config_error("sweep.store", toml_node_text(*store), "must be a non-empty path string",
                               "store = \"results/prophet.db\"");
        spec.store_path = s->get();
    }
    read_optional_bool(sweep, "match_devices", "match_devices = true", spec.match_devices);
}

// Engine real: train_config, command and ranks (a cluster or trace would be silently meaningless).
void read_real_run_keys(const toml::table& sweep, SweepSpec& spec) {
    for (const char* k : {"clusters", "traces", "match_devices"})
        if (const toml::node* node = sweep.get(k))
            throw_config_error(std::string("sweep.") + k, toml_node_text(*node),
                               "engine = \"real\" trains the model of train_config and takes no " + std::string(k),
                               "remove `" + std::string(k) + "` (vary the training run with [sweep.grid])");
    const toml::node* tc = sweep.get("train_config");
    const auto* tcs = tc ? tc->as_string() : nullptr;
    if (!tcs || tcs->get().empty())
        throw_config_error("sweep.train_config", tc ? toml_node_text(*tc) : "(missing)",
                           "engine = \"real\" needs the prophet train config file its points run",
                           "add `train_config = \"experiments/train/skewed-4rank.toml\"` under [sweep]");
    spec.train_config = tcs->get();
    if (const toml::node* command = sweep.get("command")) {
        const auto* c = command->as_string();
        if (!c || (c->get() != "train" && c->get() != "infer"))
            throw_config_error("sweep.command", toml_node_text(*command), "must be \"train\" or \"infer\"",
                               "command = \"infer\" runs prophet profile --inference per point (docs/serving.md)");
        spec.command = c->get();
    }
    if (!sweep.get("ranks")) {
        spec.ranks = {1};
        return;
    }
    for (const toml::node& item : require_array(sweep, "ranks", "[1, 4]")) {
        const auto* v = item.as_integer();
        if (!v || v->get() < 1 || v->get() > 4096)
            throw_config_error("sweep.ranks", toml_node_text(item), "every entry must be an integer in [1, 4096]",
                               "ranks = [1, 4] (1 runs without mpirun)");
        spec.ranks.push_back(static_cast<int>(v->get()));
    }
}

// Engine real: validate_cluster and validate_oversubscribed.
void read_real_validation_keys(const toml::table& sweep, SweepSpec& spec) {
    if (const toml::node* vc = sweep.get("validate_cluster")) {
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
                                   "but ranks has " +
                                       std::to_string(r),
                                   "ranks = [2] or more, or a cluster file measured elsewhere");
    read_optional_bool(sweep, "validate_oversubscribed",
                       "validate_oversubscribed = true (validate runs with more ranks than cores too)",
                       spec.validate_oversubscribed);
    if (const toml::node* passes = sweep.get("calibrate_grid_passes")) {
        const std::optional<int64_t> v = passes->is_integer() ? passes->value<int64_t>() : std::nullopt;
        if (!v || !sim::gemm_grid_passes_allowed(*v))
            throw_config_error("sweep.calibrate_grid_passes", toml_node_text(*passes), sim::gemm_grid_passes_rule(),
                               "calibrate_grid_passes = 1 (half the calibration's GEMM grid time)");
        if (spec.validate_cluster != kCalibrate)
            throw_config_error("sweep.calibrate_grid_passes", toml_node_text(*passes),
                               "is the calibration's, and only validate_cluster = \"calibrate\" calibrates",
                               "set validate_cluster = \"calibrate\" or remove calibrate_grid_passes");
        spec.calibrate_grid_passes = static_cast<int>(*v);
    }
}

// The keys of engine real, or (sim, model) clusters and traces and no real-only key.
void read_engine_keys(const toml::table& sweep, SweepSpec& spec) {
    if (spec.engine != "real") {
        for (const char* k : {"train_config", "ranks", "set", "validate_cluster", "validate_oversubscribed", "command",
                              "time_limit_s", "calibrate_set", "calibrate_grid_passes"})
            if (const toml::node* node = sweep.get(k))
                throw_config_error(std::string("sweep.") + k, toml_node_text(*node),
                                   "only engine = \"real\" takes " + std::string(k),
                                   "remove it, or set engine = \"real\"");
        spec.clusters = string_list(sweep, "clusters", "[\"experiments/clusters/hpwnv-16.toml\"]");
        spec.traces = string_list(sweep, "traces", "[\"experiments/traces/zipf-e16-k2.toml\"]");
        return;
    }
    read_real_run_keys(sweep, spec);
    read_real_validation_keys(sweep, spec);
    if (const toml::node* limit = sweep.get("time_limit_s")) {
        const std::optional<double> v = limit->is_number() ? limit->value<double>() : std::nullopt;
        if (!v || !(*v > 0) || *v > 1e7)
            throw_config_error("sweep.time_limit_s", toml_node_text(*limit), "must be a number of seconds in (0, 1e7]",
                               "time_limit_s = 3600 (each point's child is stopped after an hour)");
        spec.time_limit_s = *v;
    }
    if (spec.command == "infer" && !spec.validate_cluster.empty())
        throw_config_error("sweep.validate_cluster", "\"" + spec.validate_cluster + "\"",
                           "simulates training steps, and an infer point runs none",
                           "remove it (serve.sim_clusters replays an inference run on simulated nodes)");
}

// policies (or [sweep.variants], which name theirs) and seeds.
void read_policies_and_seeds(const toml::table& sweep, SweepSpec& spec, const std::string& origin) {
    const auto& known = policy_names();
    if (const toml::node* variants_node = sweep.get("variants")) {
        if (sweep.get("policies"))
            throw_config_error("sweep.policies", toml_node_text(*sweep.get("policies")),
                               "a sweep with [sweep.variants] takes its policies from the variants",
                               "remove `policies` (each variant sets \"balance.policy\")");
        if (spec.engine == "real")
            throw_config_error("sweep.variants", toml_node_text(*variants_node),
                               "engine = \"real\" takes no variants", "use engine = \"sim\" (prophet ablate runs the "
                               "real variants)");
        spec.variants = parse_variants(*variants_node, origin);
        for (const Variant& v : spec.variants) spec.policies.push_back(v.policy);
    } else {
        spec.policies = string_list(sweep, "policies", "[\"static\", \"prophet\"]");
    }
    for (const std::string& p : spec.policies)
        if (std::find(known.begin(), known.end(), p) == known.end()) {
            std::string list;
            for (const auto& n : known) list += (list.empty() ? "" : " ") + n;
            throw_config_error("sweep.policies", quoted(p), "unknown policy", "use one of: " + list);
        }
    for (const toml::node& item : require_array(sweep, "seeds", "[1, 2, 3]")) {
        const auto* v = item.as_integer();
        if (!v || v->get() < 0)
            throw_config_error("sweep.seeds", toml_node_text(item), "every seed must be a non-negative integer",
                               "seeds = [1, 2, 3]");
        spec.seeds.push_back(v->get());
    }
}

// Exit 3 unless a grid may vary key k under `schema`: a prophet train key (engine real), else a trace generator
// or plan.* / balance.* key; never the policy or the seed, which have their own lists.
void check_grid_key(const Schema& schema, bool real, const std::string& k, const toml::node& node) {
    if (real && (!schema.find(k) || reserved_train_key(k))) {
        std::string fix = "a real sweep's grid key is a prophet train key (prophet train --help-config)";
        if (k == "balance.policy") fix = "list policies in `policies`, not in the grid";
        if (k == "run.seed") fix = "list seeds in `seeds`, not in the grid";
        if (k == "run.experiment" || k == "store.path") fix = "the sweep sets it (the sweep name / the sweep's store)";
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
}

// One [sweep.grid] entry: its values, each checked against the key's type and bounds and written canonically.
GridAxis grid_axis(const Schema& schema, const std::string& k, const toml::node& node, const std::string& origin) {
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
    return axis;
}

// [sweep.grid], then the axes truth_scale / uncertainty add, sorted by key.
void read_grid(const toml::table& sweep, SweepSpec& spec, const std::string& origin) {
    const bool real = spec.engine == "real";
    if (const toml::node* grid_node = sweep.get("grid")) {
        const toml::table* grid = grid_node->as_table();
        if (!grid)
            throw_config_error("sweep.grid", toml_node_text(*grid_node), "must be a table of key -> list of values",
                               "[sweep.grid]\n\"trace.drift_rate\" = [0.0, 0.05]");
        for (const auto& [key, node] : *grid) {
            const std::string k(key.str());
            const bool trace_key = k.rfind("trace.", 0) == 0;
            const Schema& schema = real ? child_schema(spec) : trace_key ? trace_generator_schema() : point_schema();
            check_grid_key(schema, real, k, node);
            spec.grid.push_back(grid_axis(schema, k, node, origin));
        }
    }
    for (GridAxis& axis : detail::truth_axes(sweep, spec.engine)) {
        for (const GridAxis& existing : spec.grid)
            if (existing.key == axis.key)
                throw_config_error("sweep.grid." + axis.key, "(" + std::to_string(existing.values.size()) + " values)",
                                   "is also set by truth_scale / uncertainty", "keep it in one of them");
        spec.grid.push_back(std::move(axis));
    }
    std::sort(spec.grid.begin(), spec.grid.end(), [](const GridAxis& a, const GridAxis& b) { return a.key < b.key; });
}

// One of [sweep.set] (every point's train overrides) and [sweep.calibrate_set] (the calibration run's, held out)
// into `target`, sorted by key.
void read_set_table(const toml::node& set_node, const std::string& table_name, const SweepSpec& spec,
                    const std::string& origin, KeyValues& target) {
    const toml::table* set = set_node.as_table();
    if (!set)
        throw_config_error("sweep." + table_name, toml_node_text(set_node), "must be a table of train key -> value",
                           "[sweep." + table_name + "]\n\"train.steps\" = 6");
    for (const auto& [key, node] : *set) {
        const std::string k(key.str());
        if (!child_schema(spec).find(k) || reserved_train_key(k)) {
            std::string fix =
                "use a prophet train key (prophet train --help-config) other than balance.policy, "
                "run.seed, run.experiment and store.path";
            const std::string near = child_schema(spec).closest(k);
            if (!near.empty() && near != k) fix += "; did you mean \"" + near + "\"?";
            throw_config_error("sweep." + table_name + "." + k, toml_node_text(node), "not a key a real sweep may set",
                               fix);
        }
        for (const GridAxis& axis : spec.grid)
            if (axis.key == k && table_name == "set")
                throw_config_error("sweep.set." + k, toml_node_text(node), "the key is also in [sweep.grid]",
                                   "keep it in one of [sweep.set] and [sweep.grid]");
        const std::optional<std::string> v = value_text(node);
        if (!v)
            throw_config_error("sweep." + table_name + "." + k, toml_node_text(node),
                               "must be a number, bool, string or list", "\"" + k + "\" = 6");
        Config check(child_schema(spec), "sweep " + table_name + " of " + origin);
        check.apply_set(k + "=" + *v);  // exit 3 on a wrong type or bound
        target.emplace_back(k, value_to_toml(check.get(k)));
    }
    std::sort(target.begin(), target.end());
}

// The checks across sections (calibrate_set needs calibration, a key in one of the grid and the variants), then
// that every file named exists (and a validation cluster file loads).
void check_cross_references(const SweepSpec& spec) {
    if (!spec.calibrate_set.empty() && spec.validate_cluster != kCalibrate)
        throw_config_error("sweep.calibrate_set", "(" + std::to_string(spec.calibrate_set.size()) + " keys)",
                           "is the calibration run's config, and only validate_cluster = \"calibrate\" calibrates",
                           "set validate_cluster = \"calibrate\" or remove [sweep.calibrate_set]");
    for (const Variant& v : spec.variants)
        for (const auto& kv : v.set)
            for (const GridAxis& axis : spec.grid)
                if (axis.key == kv.first)
                    throw_config_error("sweep.variants." + v.name + "." + kv.first, kv.second,
                                       "the key is also in [sweep.grid]",
                                       "keep it in one of [sweep.grid] and the variants");
    if (spec.engine == "real") check_files(spec, {spec.train_config}, "train_config");
    if (!spec.validate_cluster.empty() && spec.validate_cluster != kCalibrate) {
        check_files(spec, {spec.validate_cluster}, "validate_cluster");
        load_cluster_file(resolve_path(spec, spec.validate_cluster));  // exit 3 on a defective cluster file now
    }
    check_files(spec, spec.clusters, "clusters");
    check_files(spec, spec.traces, "traces");
}

}  // namespace

SweepSpec parse_sweep_string(const std::string& text, const std::string& origin, const std::string& dir) {
    const toml::table root = parse_toml(text, origin);
    const toml::table& sweep = sweep_table(root);
    SweepSpec spec;
    spec.origin = origin;
    spec.dir = dir;
    read_common_keys(sweep, spec);
    read_engine_keys(sweep, spec);
    read_policies_and_seeds(sweep, spec, origin);
    read_grid(sweep, spec, origin);
    if (spec.engine == "real") {
        if (const toml::node* set = sweep.get("set")) read_set_table(*set, "set", spec, origin, spec.set);
        if (const toml::node* set = sweep.get("calibrate_set"))
            read_set_table(*set, "calibrate_set", spec, origin, spec.calibrate_set);
    }
    check_cross_references(spec);
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

}  // namespace prophet::sweep
