// engine_sim.cpp: engines "sim" (the discrete-event simulator) and "model" (the cost model's means): one point's
// cluster and trace loaded, its policy planned with the belief cost model and simulated on the true one.
#include <algorithm>
#include <cmath>

#include "balance/bounds.h"
#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/evaluate.h"
#include "balance/moves.h"
#include "balance/options.h"
#include "balance/regime.h"
#include "core/config.h"
#include "core/error.h"
#include "sim/simulator.h"
#include "sim/trace_view.h"
#include "sim/truth_scale.h"
#include "sweep/sweep_internal.h"
#include "trace/trace.h"

namespace prophet::sweep::detail {

namespace {

Config point_config(const KeyValues& params) {
    Config config(point_schema(), "sweep point");
    for (const auto& [k, v] : params)
        if (point_schema().find(k)) config.apply_set(k + "=" + v);
    return config;
}

struct PointData {
    Trace trace;
    ClusterSpec cluster;
    CostModel truth, belief;
    EvalSettings settings;
    std::string schedule = "system";  // sim.schedule: system | none | blockwise | fastermoe
    bool measured_plan_time = true;   // sim.plan_time: measured (the layers' planning time) | none (0 s)
    sim::DenseOptions dense;          // sim.iteration full: the whole iteration
    std::string regime = "training";  // balance.regime resolved (auto: from the trace's source)
    RebalanceSettings rebalance;      // serving: balance.rebalance_every, balance.window
};

// serving points are timed by the cost model on the file's cluster: a perturbed truth would not be applied
void check_serving_truth(const Config& pc) {
    for (const char* name : {"compute", "bandwidth", "latency", "intra_bandwidth", "inter_bandwidth"}) {
        const std::string key = std::string("truth.") + name + "_scale";
        if (pc.get_float(key) != 1.0)
            throw_config_error(key, std::to_string(pc.get_float(key)),
                               "balance.regime = serving points are timed by the cost model on the cluster file",
                               "leave truth_scale / uncertainty out of a serving sweep");
    }
}

// A file trace, or its leading slice where the grid gives trace.num_iterations / trace.num_layers (docs/sweep.md:
// a smaller slice of a long recorded trace); the other trace.* keys only shape generated traces.
Trace load_file_trace(const std::string& path, const KeyValues& grid) {
    Trace trace = load_trace(path);
    Config slice(trace_generator_schema(), "sweep grid of trace " + path);
    bool sliced = false;
    for (const auto& [k, v] : grid)
        if (k == "trace.num_iterations" || k == "trace.num_layers") slice.apply_set(k + "=" + v), sliced = true;
    if (!sliced) return trace;
    auto count = [&](const char* key, int all) { return slice.has(key) ? static_cast<int>(slice.get_int(key)) : all; };
    return leading_slice(trace, count("trace.num_iterations", trace.meta.num_iterations),
                         count("trace.num_layers", trace.meta.num_layers), "sweep.grid.trace.num_iterations",
                         "sweep.grid.trace.num_layers");
}

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
        d.trace = load_file_trace(trace_path, p.grid);
    }
    validate_trace(d.trace, trace_path);
    const TraceMeta& meta = d.trace.meta;
    const Config pc = point_config(p.params);
    const TraceShape shape = shape_of(meta);
    CostModel cost = cost_model_for_trace(d.cluster, p.cluster, shape, p.trace, pc,
                                          "add \"plan.d_model\" and \"plan.d_ffn\" to [sweep.grid]");
    // the belief is the cluster file with the planner's plan.* scales; the truth is the file with the truth.*
    // scales (uncertainty.h: the simulated hardware may differ from what the file says)
    cost.compute_scale = 1.0;
    cost.bandwidth_scale = 1.0;
    d.belief = cost;
    d.truth = cost;
    sim::TruthScale truth;
    truth.compute = pc.get_float("truth.compute_scale");
    truth.bandwidth = pc.get_float("truth.bandwidth_scale");
    truth.latency = pc.get_float("truth.latency_scale");
    truth.intra_bandwidth = pc.get_float("truth.intra_bandwidth_scale");
    truth.inter_bandwidth = pc.get_float("truth.inter_bandwidth_scale");
    d.truth.cluster = sim::perturbed_cluster(d.cluster, truth);
    d.dense.enabled = pc.get_string("sim.iteration") == "full";
    d.dense.vocab = static_cast<int>(pc.get_int("sim.vocab"));
    d.dense.num_heads = static_cast<int>(pc.get_int("sim.num_heads"));
    d.dense.all_reduce = sim::parse_all_reduce_mode(pc.get_string("sim.allreduce"));
    d.dense.algorithm = sim::parse_all_reduce_algorithm(pc.get_string("sim.allreduce_algorithm"));
    d.dense.bucket_bytes = pc.get_float("sim.bucket_mb") * 1024 * 1024;
    d.belief.compute_scale = pc.get_float("plan.compute_scale");
    d.belief.bandwidth_scale = pc.get_float("plan.bandwidth_scale");
    d.settings.options = balance_options_from(pc);
    d.schedule = pc.get_string("sim.schedule");
    d.measured_plan_time = pc.get_string("sim.plan_time") == "measured";
    d.settings.plan_repeats = static_cast<int>(pc.get_int("plan.repeats"));
    d.settings.profile_iterations = static_cast<int>(pc.get_int("balance.profile_iterations"));
    d.settings.num_nodes = std::max(1, d.cluster.num_devices / std::max(1, d.cluster.devices_per_node));
    d.regime = resolve_regime(pc.get_string("balance.regime"), d.trace.meta.source);
    d.rebalance = rebalance_settings_from(pc);
    if (d.regime == "serving") check_serving_truth(pc);
    return d;
}

// Plans with the belief cost model, simulates on the true one (equal unless plan.*_scale != 1).
// score: optional copy of the policy's PolicyScore (balance_std, rb_vs_static per iteration and layer).
// schedule: "system" (the policy's own, sim::system_schedule), "none", "blockwise" or "fastermoe".
sim::SimResult simulate_planned(const std::string& policy, const PointData& d, const TraceView& view,
                                const EvalSettings& settings, const std::string& schedule,
                                PolicyScore* score = nullptr) {
    PolicyScore s = evaluate_policy(policy, view, d.belief, settings, /*allow_skip=*/false);
    sim::SimOptions o;
    o.schedule = schedule == "system" ? sim::system_schedule(policy) : sim::parse_schedule_kind(schedule);
    o.dense = d.dense;
    o.record_timeline = false;
    // each layer's measured planning time (offline policies: none, they plan before the run), or none at all
    o.plan_s = d.measured_plan_time ? -1 : 0;
    // simulate_score routes by the policy's rule and simulates deepspeed's padded slots
    sim::SimResult r = sim::simulate_score(s, view, d.truth, settings, o);
    if (score) *score = std::move(s);
    return r;
}

// the practitioners' metrics of a policy's planning (docs/bounds.md), means over iterations and layers
void add_policy_metrics(std::vector<Metric>& m, const PolicyScore& p, int num_experts) {
    m.push_back({"balancedness", 0, p.mean_balancedness});
    m.push_back({"replicas", 0, p.mean_replicas});
    m.push_back({"slots_used", 0, num_experts + p.mean_replicas});
    m.push_back({"experts_moved", 0, p.mean_experts_moved});
    m.push_back({"bytes_moved", 0, p.mean_trans_bytes});
    m.push_back({"extra_memory_bytes_per_device", 0, p.extra_memory_bytes_per_device});
    m.push_back({"route_us", 0, p.median_route_us});
}

// training's one-off owner moves of the scored placements on `cost` (moves.h owner_moves_of: each layer against the
// previous iteration's placement, iteration 0 against the static layout): experts and bytes (weights + AdamW state)
// summed over the run, and owner_move_ms the charge per layer (mean over iterations and layers) that the engine's
// times include
void add_owner_move_metrics(std::vector<Metric>& m, const PolicyScore& p, const CostModel& cost, int num_layers) {
    const MoveCost moves = owner_moves_of(p, cost, num_layers, kTrainingStateCopies);
    const double blocks = static_cast<double>(std::max<size_t>(1, p.layers.size()));
    m.push_back({"owner_moves", 0, static_cast<double>(moves.experts)});
    m.push_back({"owner_move_bytes", 0, moves.bytes});
    m.push_back({"owner_move_ms", 0, moves.seconds * 1e3 / blocks});
}

// the kind breakdown (ops the schedule has; means over iterations): busy_ms.<kind> is the max over devices
// of the kind's summed op lengths, exposed_ms.<kind> a comm kind's time with no device computing
void add_kind_metrics(std::vector<Metric>& m, const sim::SimResult& r) {
    for (int k = 0; k < sim::kNumOpKinds; ++k) {
        const sim::OpKind kind = static_cast<sim::OpKind>(k);
        bool present = false;
        for (const sim::ScheduleOp& op : r.schedule.ops) present = present || op.kind == kind;
        if (!present) continue;
        double busy = 0, exposed = 0;
        for (const sim::IterationResult& it : r.iterations) {
            busy += it.kind_busy_s[k] * 1e3 / r.iterations.size();
            exposed += it.kind_exposed_s[k] * 1e3 / r.iterations.size();
        }
        m.push_back({std::string("busy_ms.") + sim::op_kind_name(kind), 0, busy});
        if (sim::is_comm_kind(kind)) m.push_back({std::string("exposed_ms.") + sim::op_kind_name(kind), 0, exposed});
    }
}

// per layer (step 0, layer = block index), means over iterations: simulated MoE time of the block,
// population std of the per-device computed tokens H_i, and RB = std(static) / std(policy); then the lower bound
// of the simulated MoE time per block (balance/bounds.h), on the cluster simulated
void add_sim_layer_metrics(std::vector<Metric>& m, const PointData& d, const TraceView& view, const sim::SimResult& r,
                           const PolicyScore& score) {
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
    // the sweep charges measured planning time (plan_s < 0) and may simulate dense ops: compute beside the MoE ops
    // that can hide a transfer, which the tighter bound of `prophet plan` (none of it) does not allow for
    BoundBudget budget{d.settings.options.max_replicas_per_device};
    budget.sim_transfers_may_hide = true;
    const TraceBounds b = trace_bounds(view, d.truth, budget);
    double moe_mean = 0;
    for (int l = 0; l < L; ++l) moe_mean += (moe_n[l] ? moe_ms[l] / moe_n[l] : 0.0) / std::max(1, L);
    m.push_back({"bound_sim_ms", 0, b.mean.sim_s * 1e3});
    m.push_back({"gap_sim", 0, gap_to_bound(moe_mean, b.mean.sim_s * 1e3)});
}

// engine "sim": plans, simulates on the true cost model and compares with static in its own system
std::vector<Metric> sim_point_metrics(const PointData& d, const TraceView& view, const std::string& policy,
                                      double* headline_ms) {
    std::vector<Metric> m;
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
    add_kind_metrics(m, r);
    add_sim_layer_metrics(m, d, view, r, score);
    add_policy_metrics(m, score, view.num_experts);
    add_owner_move_metrics(m, score, d.truth, view.num_layers);  // simulate_score charged them on the truth
    *headline_ms = mean_ms;
    return m;
}

// engine "model": the planner's cost model only (Eq 6 / Eq 8), no simulation
std::vector<Metric> model_point_metrics(const PointData& d, const TraceView& view, const std::string& policy,
                                        double* headline_ms) {
    std::vector<Metric> m;
    const PolicyScore p = evaluate_policy(policy, view, d.belief, d.settings, /*allow_skip=*/false);
    m.push_back({"time_ms", 0, p.mean_system_ms});
    m.push_back({"eq6_ms", 0, p.mean_eq6_ms});
    m.push_back({"eq8_ms", 0, p.mean_eq8_ms});
    m.push_back({"max_mean_load", 0, p.mean_max_mean_load});
    m.push_back({"balance_std", 0, p.mean_balance_std});
    m.push_back({"rb_vs_static", 0, p.mean_rb});
    m.push_back({"plan_us", 0, p.median_plan_us});
    // the lower bounds of the planner's cost model (balance/bounds.h), on the policy's token path
    const TraceBounds b = trace_bounds(view, d.belief, BoundBudget{d.settings.options.max_replicas_per_device});
    const bool l2l = p.token_path == "layer_to_layer";
    const double eq6 = (l2l ? b.mean.eq6_l2l_s : b.mean.eq6_s) * 1e3,
                 eq8 = (l2l ? b.mean.eq8_l2l_s : b.mean.eq8_s) * 1e3;
    m.push_back({"bound_eq6_ms", 0, eq6});
    m.push_back({"bound_eq8_ms", 0, eq8});
    m.push_back({"gap_eq6", 0, gap_to_bound(p.mean_eq6_ms, eq6)});
    m.push_back({"gap_eq8", 0, gap_to_bound(p.mean_eq8_ms, eq8)});
    add_policy_metrics(m, p, view.num_experts);
    add_owner_move_metrics(m, p, d.belief, view.num_layers);  // evaluate_policy charged them on the belief
    *headline_ms = p.mean_system_ms;
    return m;
}

// Runs one point; returns its metrics and the headline number (ms) for the progress line.
std::vector<Metric> run_point(const PointData& d, const std::string& engine, const std::string& policy,
                              double* headline_ms) {
    const TraceView view = view_of(d.trace);
    std::vector<Metric> m;
    if (d.regime == "serving")
        m = serving_point_metrics({view, d.belief, d.settings, d.rebalance}, policy, headline_ms);
    else if (engine == "sim")
        m = sim_point_metrics(d, view, policy, headline_ms);
    else
        m = model_point_metrics(d, view, policy, headline_ms);
    const std::vector<double> js = consecutive_js_divergence(d.trace);
    double js_mean = 0;
    for (double v : js) js_mean += v / static_cast<double>(js.size());
    m.push_back({"js_divergence_mean", 0, js_mean});
    return m;
}

}  // namespace

SimulatedPoint run_simulated_point(const SweepSpec& spec, const SweepPoint& p) {
    const PointData d = load_point(spec, p);
    SimulatedPoint out;
    out.world_size = d.cluster.num_devices;
    out.metrics = run_point(d, spec.engine, p.policy, &out.headline_ms);
    return out;
}

}  // namespace prophet::sweep::detail
