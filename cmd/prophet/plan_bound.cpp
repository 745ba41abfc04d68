#include "plan_bound.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace prophet::cli {

ModelBounds bounds_for(const TraceBounds& b, bool layer_to_layer) {
    const LayerBound& m = b.mean;
    return {(layer_to_layer ? m.eq6_l2l_s : m.eq6_s) * 1e3, (layer_to_layer ? m.eq8_l2l_s : m.eq8_s) * 1e3,
            (layer_to_layer ? m.fastermoe_l2l_s : m.fastermoe_s) * 1e3, m.sim_s * 1e3};
}

namespace {

struct Gaps {
    double eq6, eq8, fastermoe, sim;
};

Gaps gaps_of(const PolicyTimes& p, const TraceBounds& bounds) {
    const ModelBounds b = bounds_for(bounds, p.layer_to_layer);
    return {gap_to_bound(p.eq6_ms, b.eq6_ms), gap_to_bound(p.eq8_ms, b.eq8_ms),
            gap_to_bound(p.fastermoe_ms, b.fastermoe_ms), gap_to_bound(p.sim_ms, b.sim_ms)};
}

// the practitioners' metrics of one policy (its own system's planning), by name
std::vector<std::pair<const char*, double>> practitioner_metrics(const PolicyScore& s, int num_experts) {
    return {{"balancedness", s.mean_balancedness},
            {"max_mean_load", s.mean_max_mean_load},
            {"replicas", s.mean_replicas},
            {"slots_used", num_experts + s.mean_replicas},
            {"experts_moved", s.mean_experts_moved},
            {"bytes_moved", s.mean_trans_bytes},
            {"extra_memory_bytes_per_device", s.extra_memory_bytes_per_device},
            {"plan_us", s.median_plan_us},
            {"route_us", s.median_route_us}};
}

}  // namespace

void print_bound_tables(const TraceBounds& bounds, const std::vector<PolicyTimes>& policies, double static_eq6_ms,
                        int num_experts, int max_replicas_per_device) {
    const ModelBounds home = bounds_for(bounds, false), l2l = bounds_for(bounds, true);
    std::printf(
        "  %-15s %9.3f %7s %9.3f %7s %9.3f %7s %9.3f   (lower bound: no placement or routing within the "
        "budget is faster; static/bound under Eq 6 %.3f)\n",
        "bound", home.eq6_ms, "", home.eq8_ms, "", home.fastermoe_ms, "", home.sim_ms,
        home.eq6_ms > 0 ? static_eq6_ms / home.eq6_ms : 0.0);
    bool any_l2l = false;
    for (const PolicyTimes& p : policies) any_l2l = any_l2l || p.layer_to_layer;
    if (any_l2l)
        std::printf("  %-15s %9.3f %7s %9.3f %7s %9.3f   (the layer_to_layer token path's bound)\n", "bound (l2l)",
                    l2l.eq6_ms, "", l2l.eq8_ms, "", l2l.fastermoe_ms);
    std::printf(
        "# bound: means over iterations and layers, replica budget %s per device, %.1f us per layer; "
        "compute >= %.0f tokens on the busiest device, one all-to-all >= %.4g ms, one replica's Trans >= "
        "%.4g ms (docs/bounds.md)\n",
        max_replicas_per_device > 0 ? std::to_string(max_replicas_per_device).c_str() : "unlimited", bounds.median_us,
        bounds.mean.compute_tokens, bounds.mean.a2a_s * 1e3, bounds.mean.one_transfer_s * 1e3);
    std::printf("# %-15s %7s %7s %7s %7s %8s %8s %7s %8s %10s %10s %9s %9s\n", "policy", "gapEq6", "gapEq8", "gapF",
                "gapSim", "balanced", "max/mean", "slots", "moved", "moved", "extra mem", "plan", "route");
    std::printf("# %-15s %7s %7s %7s %7s %8s %8s %7s %8s %10s %10s %9s %9s\n", "", "", "", "", "", "mean/max", "", "",
                "experts", "(MB)", "(MB/dev)", "(us)", "(us)");
    for (const PolicyTimes& p : policies) {
        const Gaps g = gaps_of(p, bounds);
        const auto m = practitioner_metrics(*p.score, num_experts);
        std::printf("  %-15s %7.3f %7.3f %7.3f %7.3f %8.3f %8.3f %7.1f %8.1f %10.2f %10.2f %9.1f %9.1f\n",
                    p.name.c_str(), g.eq6, g.eq8, g.fastermoe, g.sim, m[0].second, m[1].second, m[3].second,
                    m[4].second, m[5].second / 1e6, m[6].second / 1e6, m[7].second, m[8].second);
    }
    std::printf(
        "# gap* = predicted / bound - 1 under each model (layer_to_layer policies against that path's "
        "bound); balanced = mean/max device load (vLLM/SGLang), moved = expert copies and bytes Trans sends "
        "per layer, extra mem = replica weights + gradients on the fullest device per iteration, plan = median "
        "planning time per layer, route = median time to route one batch of a layer by the policy's rule (flow: "
        "the routing LP, max_flow: its max-flow splits; in no column's time); metrics of the policy's own "
        "system's planning\n");
}

nlohmann::json bound_json(const TraceBounds& bounds, int max_replicas_per_device) {
    const ModelBounds home = bounds_for(bounds, false), l2l = bounds_for(bounds, true);
    nlohmann::json j;
    j["eq6_ms"] = home.eq6_ms;
    j["eq8_ms"] = home.eq8_ms;
    j["fastermoe_system_ms"] = home.fastermoe_ms;
    j["sim_ms"] = home.sim_ms;
    j["layer_to_layer"] = {{"eq6_ms", l2l.eq6_ms}, {"eq8_ms", l2l.eq8_ms}, {"fastermoe_system_ms", l2l.fastermoe_ms}};
    j["compute_tokens"] = bounds.mean.compute_tokens;
    j["a2a_ms"] = bounds.mean.a2a_s * 1e3;
    j["one_transfer_ms"] = bounds.mean.one_transfer_s * 1e3;
    j["plan_us"] = bounds.median_us;
    j["max_replicas_per_device"] = max_replicas_per_device;
    return j;
}

void add_policy_bound_json(nlohmann::json& policy, const PolicyTimes& times, const TraceBounds& bounds,
                           int num_experts) {
    const Gaps g = gaps_of(times, bounds);
    policy["eq6"]["gap_to_bound"] = g.eq6;
    policy["eq8"]["gap_to_bound"] = g.eq8;
    policy["fastermoe_system"]["gap_to_bound"] = g.fastermoe;
    policy["sim"]["gap_to_bound"] = g.sim;
    for (const auto& [key, v] : practitioner_metrics(*times.score, num_experts)) policy["metrics"][key] = v;
}

namespace {

// A bound recorded per model: its metric name after "plan.bound." and its field of LayerBound (seconds).
struct BoundKey {
    const char* key;
    double LayerBound::*field;
};
constexpr BoundKey kHomeBounds[] = {{"eq6_ms", &LayerBound::eq6_s},
                                    {"eq8_ms", &LayerBound::eq8_s},
                                    {"fastermoe_sys_ms", &LayerBound::fastermoe_s},
                                    {"sim_ms", &LayerBound::sim_s}};
constexpr BoundKey kLayerToLayerBounds[] = {{"eq6_l2l_ms", &LayerBound::eq6_l2l_s},
                                            {"eq8_l2l_ms", &LayerBound::eq8_l2l_s},
                                            {"fastermoe_sys_l2l_ms", &LayerBound::fastermoe_l2l_s}};

// plan.bound.<key> in ms: the mean (step 0, layer -1) and every layer's (step = iteration, layer = l)
void put_bound(Store& store, const std::string& run_id, const TraceBounds& bounds, int num_layers, const BoundKey& k) {
    const std::string key = std::string("plan.bound.") + k.key;
    store.put_metric(run_id, key, 0, bounds.mean.*k.field * 1e3);
    for (size_t i = 0; i < bounds.layers.size(); ++i)
        store.put_metric(run_id, key, static_cast<int64_t>(i) / num_layers, bounds.layers[i].*k.field * 1e3,
                         static_cast<int>(i % num_layers));
}

}  // namespace

void put_bound_metrics(Store& store, const std::string& run_id, const TraceBounds& bounds,
                       const std::vector<PolicyTimes>& policies, int num_layers, int num_experts) {
    for (const BoundKey& k : kHomeBounds) put_bound(store, run_id, bounds, num_layers, k);
    store.put_metric(run_id, "plan.bound.plan_us", 0, bounds.median_us);
    // the layer_to_layer path's bound, which those policies' gaps divide by (the Sim column's is the one above)
    if (std::any_of(policies.begin(), policies.end(), [](const PolicyTimes& p) { return p.layer_to_layer; }))
        for (const BoundKey& k : kLayerToLayerBounds) put_bound(store, run_id, bounds, num_layers, k);
    for (const PolicyTimes& p : policies) {
        const Gaps g = gaps_of(p, bounds);
        const std::string prefix = "plan." + p.name + ".";
        for (const auto& [key, v] : {std::pair<const char*, double>{"gap_eq6", g.eq6},
                                     {"gap_eq8", g.eq8},
                                     {"gap_fastermoe_sys", g.fastermoe},
                                     {"gap_sim", g.sim},
                                     {"layer_to_layer", p.layer_to_layer ? 1.0 : 0.0}})
            store.put_metric(run_id, prefix + key, 0, v);
        for (const auto& [key, v] : practitioner_metrics(*p.score, num_experts))
            if (std::string(key) != "max_mean_load" && std::string(key) != "plan_us")  // cmd_plan stores those
                store.put_metric(run_id, prefix + key, 0, v);
    }
}

}  // namespace prophet::cli
