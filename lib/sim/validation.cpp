// validation.cpp: replays of recorded runs with modelled or recorded durations, and their statistics
// (see validation.h).
#include "sim/validation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace prophet::sim {

namespace {

double mean(const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double sd(const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double rel(double sim, double measured) { return measured > 0 ? (sim - measured) / measured : 0.0; }

// mean |e|, mean e, P90 |e|, max |e| of the points' median-vs-median errors
void error_stats(const std::vector<double>& e, double* mape, double* bias, double* p90, double* max_abs) {
    std::vector<double> a;
    for (double x : e) a.push_back(std::abs(x));
    *mape = mean(a);
    *bias = mean(e);
    *p90 = percentile(a, 0.9);
    *max_abs = a.empty() ? 0.0 : *std::max_element(a.begin(), a.end());
}

}  // namespace

std::string config_key(const RecordedRun& run) {
    std::string key;
    for (const char* k : {"V", "T", "C", "NH", "L", "E", "K", "F", "B"})
        key += std::string(key.empty() ? "" : " ") + k + "=" + run.param(std::string("model.") + k, "?");
    key += " D=" + std::to_string(run.num_ranks);
    return key + " link=" + run.param("comm.link_gbps", "0.0");
}

PointValidation validate_run(const RecordedRun& run, ReplaySource source, const OpTables* tables) {
    PROPHET_ASSERT(source == ReplaySource::kRecorded || tables != nullptr);
    PointValidation p;
    p.run_id = run.run_id;
    p.policy = run.param("balance.policy", "?");
    p.schedule = run.schedule;
    p.config = config_key(run);
    p.seed = std::stoll(run.param("run.seed", "0"));
    p.busy_machine = run.param("testbed.busy_machine") == "true";
    p.load1 = std::stod(run.param("testbed.load1", "-1"));
    // held out unless the tables were measured on this model shape and rank count (calibrated_on has no link)
    p.held_out = tables == nullptr || p.config.rfind(tables->calibrated_on + " link=", 0) != 0;
    const OpModelConfig config = source == ReplaySource::kOpModel ? op_model_config(run) : OpModelConfig{};
    std::vector<double> measured, simulated, step_errors;
    for (const RecordedStep& s : run.steps) {
        if (s.step == run.steps.front().step && run.steps.size() > 1) continue;  // the warm-up step
        const ReplayGraph g = build_replay_graph(s.ops, run.num_ranks, run.blockwise,
                                                 "run " + run.run_id + " step " + std::to_string(s.step));
        const ReplayDurations recorded = recorded_durations(g);
        ReplayDurations used = recorded;
        if (source == ReplaySource::kOpModel) {
            if (s.counts.empty())
                throw_input_error("run " + run.run_id, "step " + std::to_string(s.step) + " has no expert_load rows",
                                  "record runs with train.record_loads = true");
            used = predict_durations(*tables, config, s, g);
        }
        const ReplayTimes t = run_replay(g, used);
        measured.push_back(s.measured_ms);
        simulated.push_back(t.step_us * 1e-3);
        step_errors.push_back(std::abs(rel(t.step_us * 1e-3, s.measured_ms)));
        for (size_t i = 0; i < g.ops.size(); ++i) {
            const std::string kind = prophet::op_kind_name(g.ops[i].kind);
            p.residual_ms[kind] += (used.own_us[i] - recorded.own_us[i]) * 1e-3 / run.num_ranks;
            p.recorded_ms[kind] += recorded.own_us[i] * 1e-3 / run.num_ranks;
            p.residual_ms["lead"] += (used.lead_us[i] - recorded.lead_us[i]) * 1e-3 / run.num_ranks;
            p.recorded_ms["lead"] += recorded.lead_us[i] * 1e-3 / run.num_ranks;
        }
    }
    if (measured.empty())
        throw_input_error("run " + run.run_id, "has no step with a complete timeline", "record it with --timeline");
    p.steps = static_cast<int>(measured.size());
    p.max_step_error = *std::max_element(step_errors.begin(), step_errors.end());
    p.p90_step_error = percentile(step_errors, 0.9);
    p.step_mape = mean(step_errors);
    for (auto& [kind, ms] : p.residual_ms) ms /= p.steps;
    for (auto& [kind, ms] : p.recorded_ms) ms /= p.steps;
    p.measured_mean_ms = mean(measured);
    p.sim_mean_ms = mean(simulated);
    p.measured_median_ms = percentile(measured, 0.5);
    p.sim_median_ms = percentile(simulated, 0.5);
    p.measured_sd_ms = sd(measured);
    p.error_mean = rel(p.sim_mean_ms, p.measured_mean_ms);
    p.error_median = rel(p.sim_median_ms, p.measured_median_ms);
    return p;
}

ValidationSummary summarize_validation(std::vector<PointValidation> points) {
    ValidationSummary s;
    s.points = std::move(points);
    std::vector<double> all, held;
    for (const PointValidation& p : s.points) {
        all.push_back(p.error_median);
        if (p.held_out) held.push_back(p.error_median);
        for (const auto& [kind, ms] : p.residual_ms) s.residual_ms[kind] += ms / static_cast<double>(s.points.size());
        for (const auto& [kind, ms] : p.recorded_ms) s.recorded_ms[kind] += ms / static_cast<double>(s.points.size());
    }
    error_stats(all, &s.mape, &s.bias, &s.p90_abs, &s.max_abs);
    error_stats(held, &s.heldout_mape, &s.heldout_bias, &s.heldout_p90_abs, &s.heldout_max_abs);
    s.heldout_points = static_cast<int>(held.size());
    // the policy order per (config, schedule): per policy the seeds' measured and simulated means
    struct PolicyStats {
        std::vector<double> measured, simulated;
        double step_sd = 0;  // one seed only: its steps' spread / sqrt(steps) stands in for the seed spread
    };
    std::map<std::string, std::map<std::string, PolicyStats>> groups;
    for (const PointValidation& p : s.points) {
        PolicyStats& ps = groups[p.config + " " + p.schedule][p.policy];
        ps.measured.push_back(p.measured_mean_ms);
        ps.simulated.push_back(p.sim_mean_ms);
        ps.step_sd = p.measured_sd_ms / std::sqrt(std::max(1, p.steps));
    }
    int concordant = 0, discordant = 0;
    for (const auto& [key, policies] : groups) {
        std::vector<const PolicyStats*> list;
        for (const auto& [name, ps] : policies) list.push_back(&ps);
        for (size_t a = 0; a < list.size(); ++a)
            for (size_t b = a + 1; b < list.size(); ++b) {
                const auto spread = [](const PolicyStats* ps) {
                    return ps->measured.size() >= 2 ? sd(ps->measured) : ps->step_sd;
                };
                const double dm = mean(list[a]->measured) - mean(list[b]->measured);
                if (std::abs(dm) <= 2 * std::max(spread(list[a]), spread(list[b]))) continue;
                const double ds = mean(list[a]->simulated) - mean(list[b]->simulated);
                (dm * ds > 0 ? concordant : discordant)++;
            }
    }
    s.tau_pairs = concordant + discordant;
    s.kendall_tau = s.tau_pairs > 0 ? static_cast<double>(concordant - discordant) / s.tau_pairs : 0.0;
    return s;
}

}  // namespace prophet::sim
