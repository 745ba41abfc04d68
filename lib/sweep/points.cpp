// points.cpp: expansion of a SweepSpec into points, and a point's identity (its canonical parameter text and
// hash, by which a resumed sweep recognises finished points).
#include <algorithm>
#include <map>
#include <string>

#include "balance/cluster.h"
#include "balance/options.h"
#include "core/config.h"
#include "core/error.h"
#include "core/sha256.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"
#include "trace/trace.h"

namespace prophet::sweep {

using detail::file_sha256;
using detail::is_generator;
using detail::quoted;
using detail::resolve_path;
using detail::stem;

std::string canonical_text(KeyValues kv) {
    std::sort(kv.begin(), kv.end());
    std::string out;
    for (const auto& [k, v] : kv) out += k + "=" + v + "\n";
    return out;
}

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

// The version of the prophet that computes a point: part of its identity, so a new version reruns the points.
#ifndef PROPHET_VERSION
#define PROPHET_VERSION "unknown"
#endif
constexpr const char* kProphetVersion = PROPHET_VERSION;

// The SHA-256 of each input file of a sweep, read once per expansion (a recorded trace may be large).
class FileHashes {
  public:
    explicit FileHashes(const SweepSpec& spec) : spec_(spec) {}
    const std::string& of(const std::string& path) {
        auto it = hashes_.find(path);
        if (it == hashes_.end()) it = hashes_.emplace(path, file_sha256(resolve_path(spec_, path))).first;
        return it->second;
    }

  private:
    const SweepSpec& spec_;
    std::map<std::string, std::string> hashes_;
};

// engine "real": ranks x seeds x grid x policies. The point config is the train overrides the child gets plus the
// point.* coordinates; the SHA-256 of the train config file (and of validate_cluster's file) and the prophet
// version are part of it, so editing a file or upgrading prophet reruns the points.
std::vector<SweepPoint> expand_real_points(const SweepSpec& spec, size_t combos) {
    const std::string config_sha = file_sha256(resolve_path(spec, spec.train_config));
    const std::string validate_sha = spec.validate_cluster.empty() || spec.validate_cluster == kCalibrate
                                         ? ""
                                         : file_sha256(resolve_path(spec, spec.validate_cluster));
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
                    if (!validate_sha.empty())
                        params.emplace_back("point.validate_cluster_sha256", quoted(validate_sha));
                    params.emplace_back("point.prophet_version", quoted(kProphetVersion));
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

namespace {

// engine "model" simulates no schedule, no truth and only the MoE blocks: exit 3 on a point config that asks it to.
void check_model_engine_config(const Config& config) {
    if (config.get_string("sim.schedule") != "system")
        throw_config_error("sim.schedule", quoted(config.get_string("sim.schedule")),
                           "engine = \"model\" simulates no schedule (it reports Eq 6 or Eq 8 by the policy's system)",
                           "use engine = \"sim\", or leave sim.schedule out");
    for (const char* k : {"truth.compute_scale", "truth.bandwidth_scale", "truth.latency_scale",
                          "truth.intra_bandwidth_scale", "truth.inter_bandwidth_scale"})
        if (config.get_float(k) != 1.0)
            throw_config_error(k, value_to_toml(config.get(k)), "engine = \"model\" has no simulated truth to perturb",
                               "use engine = \"sim\"");
    if (config.get_string("sim.iteration") != "moe")
        throw_config_error("sim.iteration", quoted(config.get_string("sim.iteration")),
                           "engine = \"model\" reports Eq 6 / Eq 8 of the MoE blocks only",
                           "use engine = \"sim\", or leave sim.iteration out");
    if (config.get_string("sim.plan_time") != "measured")
        throw_config_error("sim.plan_time", quoted(config.get_string("sim.plan_time")),
                           "engine = \"model\" simulates no Plan op (plan_us is measured either way)",
                           "use engine = \"sim\", or leave sim.plan_time out");
}

// The cost-model keys whose default is the cluster file's (balance/options.h planning_*), set to the values the
// point runs. The point's parameters list every key with its value and the engines apply them all, so a schema
// default recorded here would override the file (every sweep ran flat, with a star broadcast, whatever its
// cluster files said, until 2026-12-04).
void resolve_cluster_defaults(Config& config, const ClusterSpec& cluster) {
    const bool topology = planning_topology_aware(config, cluster), chain = planning_chain_broadcast(config, cluster);
    config.apply_set(std::string("plan.topology_aware=") + (topology ? "true" : "false"));
    config.apply_set(std::string("plan.trans_broadcast=") + (chain ? "\"chain\"" : "\"star\""));
}

// A sim / model point's parameters, sorted: the point config (policy, grid, the arm's keys) and the point.*
// coordinates, with the files' contents, not only their paths, so an edited file reruns the point.
KeyValues sim_point_params(const SweepSpec& spec, const SweepPoint& p, const Variant& arm, FileHashes& hashes) {
    Config config(point_schema(), "sweep point of " + spec.origin);
    config.apply_set("balance.policy=" + quoted(p.policy));
    KeyValues params;
    for (const auto& [k, v] : p.grid) {
        if (k.rfind("trace.", 0) == 0)
            params.emplace_back(k, v);
        else
            config.apply_set(k + "=" + v);
    }
    for (const auto& [k, v] : arm.set) config.apply_set(k + "=" + v);
    if (spec.engine == "model") check_model_engine_config(config);
    resolve_cluster_defaults(config, load_cluster_file(resolve_path(spec, p.cluster)));
    for (auto& kv : config.flat()) params.push_back(std::move(kv));
    if (!arm.name.empty()) params.emplace_back("ablate.variant", quoted(arm.name));
    params.emplace_back("point.engine", quoted(spec.engine));
    params.emplace_back("point.cluster", quoted(p.cluster));
    params.emplace_back("point.trace", quoted(p.trace));
    params.emplace_back("point.cluster_sha256", quoted(hashes.of(p.cluster)));
    params.emplace_back("point.trace_sha256", quoted(hashes.of(p.trace)));
    params.emplace_back("point.prophet_version", quoted(kProphetVersion));
    params.emplace_back("point.seed", std::to_string(p.seed));
    if (is_generator(p.trace)) params.emplace_back("trace.seed", std::to_string(p.seed));
    std::sort(params.begin(), params.end());
    return params;
}

// "variant (policy) cluster trace seed=N key=value ..."
std::string sim_point_description(const SweepPoint& p) {
    std::string text = (p.variant.empty() ? p.policy : p.variant + " (" + p.policy + ")") + " " + stem(p.cluster) +
                       " " + stem(p.trace) + " seed=" + std::to_string(p.seed);
    for (const auto& [k, v] : p.grid) text += " " + k + "=" + v;
    return text;
}

}  // namespace

std::vector<SweepPoint> expand_points(const SweepSpec& spec) {
    size_t combos = 1;
    for (const GridAxis& axis : spec.grid) combos *= axis.values.size();
    if (spec.engine == "real") return expand_real_points(spec, combos);
    // the innermost axis: the policies, or the variants (a policy with fixed keys)
    std::vector<Variant> arms = spec.variants;
    if (arms.empty())
        for (const std::string& policy : spec.policies) arms.push_back({"", policy, {}});
    FileHashes hashes(spec);
    std::vector<SweepPoint> points;
    for (const std::string& cluster : spec.clusters)
        for (const std::string& trace : spec.traces)
            for (int64_t seed : spec.seeds)
                for (size_t c = 0; c < combos; ++c)
                    for (const Variant& arm : arms) {
                        SweepPoint p;
                        p.cluster = cluster;
                        p.trace = trace;
                        p.policy = arm.policy;
                        p.variant = arm.name;
                        p.seed = seed;
                        p.grid = grid_combination(spec, c);
                        if (spec.match_devices) {
                            const int td = generator_devices(spec, trace, p.grid);
                            if (td >= 0 && td != cluster_devices(spec, cluster)) continue;
                        }
                        p.params = sim_point_params(spec, p, arm, hashes);
                        p.canonical = canonical_text(p.params);
                        p.hash = sha256_hex(p.canonical);
                        p.description = sim_point_description(p);
                        p.index = static_cast<int>(points.size());
                        points.push_back(std::move(p));
                    }
    return points;
}

}  // namespace prophet::sweep
