// gap_probe.cpp: how much of flow's gap to the lower bound is flow's (docs/bounds.md, "Where the gap comes
// from"). For sampled (iteration, layer)s of a trace it starts plan_search.h's local search from flow's placement,
// scored on that layer's own counts under Eq 6 and Eq 8 with flow's routing, and prints the bound, flow and the
// best placement found (ms per layer, means over the samples). With every layer searched (--samples 0) it also
// simulates the best Eq 8 placements: the Sim column.
//
//   ./build/bench/gap_probe --trace T --cluster C [--samples 12] [--iterations 2000] [--seed 1] [--set k=v ...]
//
// best - bound is at most the bound's looseness; flow - best is at least what flow leaves. Owner moves flow
// charges stay charged (the search keeps flow's owners). It also prints how much of flow's traffic crosses nodes
// and how unevenly the devices take it in (the all-to-all's node-level bound assumes them even).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "balance/bounds.h"
#include "balance/cluster.h"
#include "balance/options.h"
#include "balance/plan_search.h"
#include "core/config.h"
#include "core/error.h"
#include "plan/policy_models.h"
#include "sim/trace_view.h"
#include "trace/trace.h"

using namespace prophet;

namespace {

struct ProbeArgs {
    std::string trace, cluster;
    std::vector<std::string> sets;  // --set key=value, as prophet plan's (the real trace's d_model, d_ffn, seq_len)
    int samples = 12, iterations = 2000;
    uint64_t seed = 1;
};

bool parse_args(int argc, char** argv, ProbeArgs& a) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--trace")
            a.trace = v;
        else if (k == "--cluster")
            a.cluster = v;
        else if (k == "--samples")
            a.samples = std::atoi(v.c_str());
        else if (k == "--iterations")
            a.iterations = std::atoi(v.c_str());
        else if (k == "--seed")
            a.seed = std::strtoull(v.c_str(), nullptr, 10);
        else if (k == "--set")
            a.sets.push_back(v);
        else
            return false;
    }
    return argc % 2 == 1 && !a.trace.empty() && !a.cluster.empty() && a.samples >= 0 && a.iterations >= 0;
}

// indices into [I*L] (iteration-major): all when samples is 0 or >= I*L, else sample k at iteration k * I /
// samples and layer k % L (every layer position visited, not only layer 0; distinct because samples <= I*L)
std::vector<int> sample_layers(int iterations, int layers, int samples) {
    std::vector<int> out;
    const int total = iterations * layers;
    if (samples == 0 || samples >= total) {
        for (int i = 0; i < total; ++i) out.push_back(i);
        return out;
    }
    for (int k = 0; k < samples; ++k)
        out.push_back(static_cast<int>(static_cast<int64_t>(k) * iterations / samples) * layers + k % layers);
    return out;
}

// a layer time's parts: 4 x one all-to-all, 3 x FEC, and the transfers the model charges (Eq 6: Trans + Agg;
// Eq 8: the exposed parts), ms
struct Terms {
    double a2a4 = 0, fec3 = 0, transfers = 0;
    void add(const CostBreakdown& b, int cost_eq, double scale) {
        a2a4 += 4 * b.a2a_s * scale;
        fec3 += 3 * b.fec_s * scale;
        transfers += (cost_eq == 6 ? b.trans_s + b.agg_s : b.exposed_trans_s + b.exposed_agg_s) * scale;
    }
};

// a placement's tokens that cross nodes under flow's routing, and how evenly the NICs take them in: the
// all-to-all's node-level bound assumes every NIC's inter-node ingress equal (docs/bounds.md)
struct CrossNode {
    double share = 0;        // cross-node tokens / all tokens, summed over layers (the caller divides)
    double ingress_max = 0;  // busiest NIC's cross-node ingress / the NICs' mean, summed likewise
    void add(const LayerFlow& f, const ClusterSpec& cl) {
        const int D = f.num_devices;
        std::vector<double> ingress(static_cast<size_t>(cl.num_devices / cl.devices_per_node * cl.nics_per_node), 0.0);
        double cross = 0;
        for (int src = 0; src < D; ++src)
            for (int dst = 0; dst < D; ++dst)
                if (cl.node_of(src) != cl.node_of(dst)) {
                    const double t = static_cast<double>(f.route[static_cast<size_t>(src) * D + dst]);
                    ingress[static_cast<size_t>(cl.nic_of(dst))] += t, cross += t;
                }
        share += f.total_tokens > 0 ? cross / static_cast<double>(f.total_tokens) : 0.0;
        const double mean = cross / static_cast<double>(ingress.size());
        ingress_max += cross > 0 ? *std::max_element(ingress.begin(), ingress.end()) / mean : 0.0;
    }
};

struct Column {
    double bound = 0, flow = 0, best = 0;         // ms per layer
    double flow_replicas = 0, best_replicas = 0;  // extra copies per layer
    Terms flow_terms, best_terms;                 // ms per layer
    CrossNode flow_cross;                         // flow's placements, means over the layers
};

// Searches every sampled layer of `score` (flow planned for cost_eq); replaces its placements with the best found.
Column search_column(PolicyScore& score, const TraceView& view, const CostModel& cost, const TraceBounds& bounds,
                     const std::vector<int>& picks, int cost_eq, const ProbeArgs& a) {
    Column c;
    for (int i : picks) {
        LayerScore& ls = score.layers[i];
        const CostModel m = model_for_layer(cost, ls.layer);
        PlanSearchOptions o;
        o.iterations = a.iterations;
        o.seed = a.seed + static_cast<uint64_t>(i);
        o.cost_eq = cost_eq;
        PlanSearchReport r;
        c.flow_replicas += ls.placement.num_replicas();
        c.flow_cross.add(compute_flow(view.layer(ls.iteration, ls.layer), view.num_devices, view.num_experts,
                                      ls.placement, RouteRule::kFlow, &m),
                         m.cluster);
        ls.placement = search_plan(view.layer(ls.iteration, ls.layer), m, ls.placement, o, &r);
        c.flow += layer_cost(ls.cost, cost_eq);
        c.best += r.best_s + ls.cost.owner_move_s;  // the same owners: the same moves charged
        c.best_replicas += ls.placement.num_replicas();
        const double per_layer_ms = 1e3 / static_cast<double>(picks.size());
        c.flow_terms.add(ls.cost, cost_eq, per_layer_ms);
        const int64_t* counts = view.layer(ls.iteration, ls.layer);
        const LayerFlow best_flow =
            compute_flow(counts, view.num_devices, view.num_experts, ls.placement, RouteRule::kFlow, &m);
        c.best_terms.add(predict_layer(m, best_flow, ls.placement), cost_eq, per_layer_ms);
        c.bound += cost_eq == 6 ? bounds.layers[i].eq6_s : bounds.layers[i].eq8_s;
    }
    const double n = static_cast<double>(picks.size()) / 1e3;  // means, in ms
    const double count = static_cast<double>(picks.size());
    c.bound /= n, c.flow /= n, c.best /= n, c.flow_replicas /= count, c.best_replicas /= count;
    c.flow_cross.share /= count, c.flow_cross.ingress_max /= count;
    return c;
}

int run(const ProbeArgs& a) {
    Schema schema;
    add_balance_keys(schema, /*allow_all=*/false, "flow");
    add_cost_model_keys(schema, "");
    Config config(schema);
    for (const std::string& assignment : a.sets) config.apply_set(assignment);
    const ClusterSpec cluster = load_cluster_file(a.cluster);
    const Trace trace = load_trace(a.trace);
    const TraceMeta& meta = trace.meta;
    const TraceShape shape = shape_of(meta);
    const CostModel cost = cost_model_for_trace(cluster, a.cluster, shape, a.trace, config, "");
    const TraceView view{trace.counts.data(), nullptr,          meta.num_iterations,
                         meta.num_layers,     meta.num_devices, meta.num_experts};
    EvalSettings settings;
    settings.options = balance_options_from(config);
    settings.plan_repeats = 1;
    settings.num_nodes = cluster.num_devices / cluster.devices_per_node;
    plan::PolicyModels flow = plan::evaluate_models("flow", view, cost, settings, /*allow_skip=*/false);
    const TraceBounds bounds = trace_bounds(view, cost, BoundBudget{settings.options.max_replicas_per_device});
    const std::vector<int> picks = sample_layers(view.num_iterations, view.num_layers, a.samples);
    const Column eq6 = search_column(flow.eq6, view, cost, bounds, picks, 6, a);
    const Column eq8 = search_column(flow.eq8, view, cost, bounds, picks, 8, a);
    std::printf("gap_probe: %zu of %d layers, %d proposals each, seed %llu (ms per layer, means)\n", picks.size(),
                view.num_iterations * view.num_layers, a.iterations, static_cast<unsigned long long>(a.seed));
    std::printf("%-6s %10s %10s %10s %12s %12s %9s %9s\n", "model", "bound", "flow", "best", "flow gap", "best gap",
                "flow rep", "best rep");
    for (const auto& [name, c] : {std::pair{"Eq 6", eq6}, std::pair{"Eq 8", eq8}})
        std::printf("%-6s %10.3f %10.3f %10.3f %+11.1f%% %+11.1f%% %9.2f %9.2f\n", name, c.bound, c.flow, c.best,
                    100 * gap_to_bound(c.flow, c.bound), 100 * gap_to_bound(c.best, c.bound), c.flow_replicas,
                    c.best_replicas);
    for (const auto& [name, c] : {std::pair{"Eq 6", eq6}, std::pair{"Eq 8", eq8}})
        std::printf("%-6s terms 4 A2A / 3 FEC / transfers: flow %.3f / %.3f / %.3f, best %.3f / %.3f / %.3f\n", name,
                    c.flow_terms.a2a4, c.flow_terms.fec3, c.flow_terms.transfers, c.best_terms.a2a4, c.best_terms.fec3,
                    c.best_terms.transfers);
    for (const auto& [name, c] : {std::pair{"Eq 6", eq6}, std::pair{"Eq 8", eq8}})
        std::printf("%-6s flow's cross-node tokens %.1f%% of all, busiest NIC's cross-node ingress %.2f x the mean\n",
                    name, 100 * c.flow_cross.share, c.flow_cross.ingress_max);
    if (picks.size() == flow.eq8.layers.size()) {
        const plan::SimColumn best_sim = plan::simulate_column(flow.system(), view, cost, settings);
        std::printf("%-6s %10.3f %10.3f %10.3f %+11.1f%% %+11.1f%%\n", "Sim", bounds.mean.sim_s * 1e3, flow.sim.moe_ms,
                    best_sim.moe_ms, 100 * gap_to_bound(flow.sim.moe_ms, bounds.mean.sim_s * 1e3),
                    100 * gap_to_bound(best_sim.moe_ms, bounds.mean.sim_s * 1e3));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    ProbeArgs a;
    if (!parse_args(argc, argv, a)) {
        std::fprintf(stderr,
                     "usage: gap_probe --trace FILE --cluster FILE [--samples N (0: all)] "
                     "[--iterations N] [--seed N] [--set plan.KEY=VALUE ...]\n");
        return kExitUsage;
    }
    try {
        return run(a);
    } catch (const Error& e) {
        std::fprintf(stderr, "gap_probe: %s\n", e.what());
        return e.exit_code();
    }
}
