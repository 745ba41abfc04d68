// validate.cpp: simulator validation of a finished real point: its recorded expert loads replayed by the
// simulator on a cluster file and compared with its measured step times (docs/simulator.md "Validation").
#include <algorithm>
#include <map>
#include <optional>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/evaluate.h"
#include "balance/options.h"
#include "core/error.h"
#include "core/stats.h"
#include "sim/simulator.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"
#include "train/routing_trace.h"
#include "train/train_config.h"

namespace prophet::sweep {

using detail::view_of;

namespace {

// The run's train config from its params; exit 3 when it ran oversubscribed and those are left out.
Config recorded_config(Store& store, const std::string& run_id, bool include_oversubscribed) {
    Config config(train_schema(), "the params of run " + run_id);
    std::string oversubscribed, cores;  // testbed.* (docs/testbed.md); absent in runs recorded before them
    for (const auto& [k, v] : store.get_params(run_id)) {
        if (train_schema().find(k)) config.apply_set(k + "=" + v);
        if (k == "testbed.oversubscribed") oversubscribed = v;
        if (k == "testbed.cores") cores = v;
    }
    if (oversubscribed == "true" && !include_oversubscribed)
        throw_input_error("run " + run_id, "ran oversubscribed (more ranks than the " + cores + " online cores)",
                          "left out of validation: its step times measure the OS scheduler; set "
                          "validate_oversubscribed = true in [sweep] to include it");
    return config;
}

ModelConfig recorded_model(const Config& config) {
    ModelConfig m;
    read_model_dims(config, m);
    return m;
}

// step -> ms of the global step_ms rows: the recorded steps (the loads are recorded for the same steps); at least 2.
std::map<int64_t, double> recorded_step_ms(Store& store, const std::string& run_id) {
    std::map<int64_t, double> step_ms;
    for (const MetricRow& row : store.get_metrics(run_id, "step_ms"))
        if (row.layer == -1 && row.rank == -1) step_ms[row.step] = row.value;
    if (step_ms.size() < 2)
        throw_input_error("run " + run_id, "recorded " + std::to_string(step_ms.size()) + " steps",
                          "validation skips step 0 and needs at least 2 steps (train.steps >= 2)");
    return step_ms;
}

// The recorded expert loads of those steps as a trace of one iteration per step.
Trace recorded_loads(Store& store, const std::string& run_id, const ModelConfig& m, int D,
                     const std::map<int64_t, double>& step_ms) {
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
    return trace;
}

// The simulated mean step (steps 1.., step 0 is the warm-up) and its per-kind split against the measured median.
Validation compare_steps(const sim::SimResult& r, const std::map<int64_t, double>& step_ms, int D) {
    Validation v;
    const double iterations = static_cast<double>(r.iterations.size() - 1);
    for (size_t i = 1; i < r.iterations.size(); ++i) {
        v.sim_step_ms += r.iterations[i].iteration_s * 1e3 / iterations;
        for (const auto kind : {sim::OpKind::kTrans, sim::OpKind::kAgg})
            v.kind_ms[std::string(sim::op_kind_name(kind)) + "_exposed"] +=
                r.iterations[i].kind_exposed_s[static_cast<size_t>(kind)] * 1e3 / iterations;
    }
    for (const sim::TimelineEntry& e : r.timeline)
        if (e.iteration >= 1) v.kind_ms[sim::op_kind_name(e.kind)] += (e.end_s - e.start_s) * 1e3 / (iterations * D);
    std::vector<double> measured;
    for (const auto& [step, ms] : step_ms)
        if (step != step_ms.begin()->first) measured.push_back(ms);
    v.measured_step_ms = median(std::move(measured));
    v.sim_error = v.measured_step_ms > 0 ? (v.sim_step_ms - v.measured_step_ms) / v.measured_step_ms : 0.0;
    return v;
}

}  // namespace

Validation validate_run(Store& store, const std::string& run_id, const std::string& policy,
                        const std::string& cluster_path, bool include_oversubscribed) {
    const Config config = recorded_config(store, run_id, include_oversubscribed);
    const ModelConfig m = recorded_model(config);
    const RunRow run = store.get_run(run_id);
    const int D = run.info.world_size;
    const std::map<int64_t, double> step_ms = recorded_step_ms(store, run_id);
    const Trace trace = recorded_loads(store, run_id, m, D, step_ms);
    const CostModel cost = trainer_cost_model(load_cluster_file(cluster_path), m, D);
    const ClusterSpec& cluster = cost.cluster;
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
    o.record_timeline = true;  // the per-kind split of the simulated step (Validation::kind_ms)
    // the trainer moves no owner: an expert's home keeps its parameters and optimizer state, and an owner away from
    // home is served by Trans/Agg (moe/trans_agg.h), which the schedule already times
    o.charge_owner_moves = false;
    return compare_steps(sim::simulate_policy(policy, view_of(trace), cost, settings, o), step_ms, D);
}

}  // namespace prophet::sweep
