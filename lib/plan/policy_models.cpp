// policy_models.cpp: one policy planned and scored under every system model, and its rows in the store.
#include "plan/policy_models.h"

#include <utility>

#include "balance/flow_routing.h"
#include "balance/policies.h"
#include "sim/simulator.h"

namespace prophet::plan {

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
    // simulate_score charges the owner moves (moves.h), blocking: in each block's moe_s and in iteration_ms
    double blocks = 0;
    for (const sim::IterationResult& it : r.iterations)
        for (size_t l = 0; l < it.blocks.size(); ++l) {
            const sim::BlockResult& b = it.blocks[l];
            c.moe_ms += b.moe_s * 1e3;
            c.exposed_trans_ms += b.exposed_trans_s * 1e3;
            c.exposed_agg_ms += b.exposed_agg_s * 1e3;
            c.owner_move_ms += b.owner_move_s * 1e3;
            c.blocks.push_back({it.iteration, static_cast<int>(l), b.moe_s * 1e3});
            blocks += 1;
        }
    if (blocks > 0) c.moe_ms /= blocks, c.exposed_trans_ms /= blocks, c.exposed_agg_ms /= blocks;
    if (blocks > 0) c.owner_move_ms /= blocks;
    return c;
}

PolicyModels evaluate_models(const std::string& name, const TraceView& view, const CostModel& cost,
                             const EvalSettings& settings, bool allow_skip) {
    forget_routing_lps();  // warm starts from this policy's own LPs only: its routes do not depend on what ran before
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
    if (!m.skipped()) m.sim = simulate_column(m.system(), view, cost, settings);
    if (!m.skipped()) m.moves = owner_moves_of(m.system(), cost, view.num_layers, kTrainingStateCopies);
    return m;
}

StaticTimes static_times_of(const std::vector<PolicyModels>& scores, const TraceView& view, const CostModel& cost,
                            const EvalSettings& settings) {
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
    return {fixed->eq6.mean_eq6_ms, fixed->eq6.mean_eq8_ms, fixed->eq6.mean_fastermoe_ms, fixed->sim.moe_ms};
}

namespace {

// One plan_results row per (iteration, layer) of the policy's Eq-8 planning, with the Eq-6 planning's layer time.
void put_layer_rows(Store& store, const std::string& run_id, const PolicyModels& m) {
    const PolicyScore& p = m.eq8;
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
    // the Sim column per block, keyed as plan.bound.sim_ms holds the bound's (step = iteration, layer = block)
    for (const SimColumn::Block& b : m.sim.blocks)
        store.put_metric(run_id, "plan." + p.name + ".sim_ms", b.iteration, b.moe_ms, b.layer);
}

}  // namespace

void put_policy_results(Store& store, const std::string& run_id, const PolicyModels& m, bool record_layers) {
    const PolicyScore& p = m.eq8;
    if (m.skipped()) {
        store.put_event(run_id, 0, -1, "info", "policy_skipped", m.name() + ": " + m.note(), "");
        return;
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
    if (record_layers) put_layer_rows(store, run_id, m);
}

}  // namespace prophet::plan
