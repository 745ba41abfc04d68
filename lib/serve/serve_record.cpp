#include "serve/serve_record.h"

#include <algorithm>

#include "balance/device_load.h"
#include "core/error.h"
#include "train/routing_trace.h"

namespace prophet::serve {

namespace {

// the measured batches' [I][L][D] times of one kind
std::vector<double> stack(const ServeRun& run, std::vector<double> BatchResult::*field) {
    std::vector<double> out;
    for (const BatchResult& b : run.measured) out.insert(out.end(), (b.*field).begin(), (b.*field).end());
    return out;
}

void put_tail(Store& store, const std::string& run_id, const std::string& kind, const TailSummary& t, int layer) {
    const std::pair<const char*, double> stats[] = {
        {"p50", t.p50}, {"p95", t.p95}, {"p99", t.p99}, {"mean_of_max", t.mean_of_max}, {"max", t.max}};
    for (const auto& [name, value] : stats) store.put_metric(run_id, "tail." + kind + "." + name, 0, value, layer);
}

double max_mean_rows(const BatchResult& b, int L, int D) {
    double sum = 0;
    for (int l = 0; l < L; ++l) sum += max_mean_load(b.rows_computed.data() + static_cast<size_t>(l) * D, D);
    return sum / L;
}

}  // namespace

RunTails run_tails(const ServeRun& run) {
    PROPHET_ASSERT(!run.measured.empty());
    const int I = static_cast<int>(run.measured.size()), L = run.profile.L, D = run.profile.D;
    RunTails t;
    const std::vector<double> expert = stack(run, &BatchResult::expert_ms), a2a = stack(run, &BatchResult::a2a_ms),
                              layer = stack(run, &BatchResult::layer_ms);
    t.expert = per_layer_tails(expert, I, L, D);
    t.a2a = per_layer_tails(a2a, I, L, D);
    t.layer = per_layer_tails(layer, I, L, D);
    t.expert_sum = summed_layer_tail(expert, I, L, D);
    t.a2a_sum = summed_layer_tail(a2a, I, L, D);
    t.layer_sum = summed_layer_tail(layer, I, L, D);
    std::vector<double> forward;
    for (const BatchResult& b : run.measured) forward.push_back(b.forward_ms);
    t.forward = summarize(forward);
    return t;
}

namespace {

// Layer l's placement of measured batch i, as (expert, replica slot, device) rows, when it differs from batch i-1's.
void put_placement_if_changed(Store& store, const std::string& run_id, const ServeRun& run, size_t i, int l, int D,
                              int E) {
    const BatchResult& b = run.measured[i];
    const bool changed = i == 0 || run.measured[i - 1].placements[l].owner != b.placements[l].owner ||
                         run.measured[i - 1].placements[l].replica != b.placements[l].replica;
    if (!changed) return;
    const int64_t step = static_cast<int64_t>(i);
    const Placement& p = b.placements[l];
    for (int e = 0; e < E; ++e) {
        store.put_placement_row(run_id, step, l, e, 0, p.owner[e]);
        int r = 1;
        for (int d = 0; d < D; ++d)
            if (p.replica[static_cast<size_t>(e) * D + d]) store.put_placement_row(run_id, step, l, e, r++, d);
    }
}

// Measured batch i's per-layer figures: expert and all-to-all times per rank, the max over ranks per layer and
// their sums over layers, the expert load and the placement where it changed.
void put_batch_layers(Store& store, const std::string& run_id, const ServeRun& run, size_t i) {
    const int L = run.profile.L, D = run.profile.D, E = run.profile.E;
    const BatchResult& b = run.measured[i];
    const int64_t step = static_cast<int64_t>(i);
    double sums[3] = {0, 0, 0};
    for (int l = 0; l < L; ++l) {
        double mx[3] = {0, 0, 0};
        for (int d = 0; d < D; ++d) {
            const size_t at = static_cast<size_t>(l) * D + d;
            store.put_metric(run_id, "expert_ms", step, b.expert_ms[at], l, d);
            store.put_metric(run_id, "a2a_ms", step, b.a2a_ms[at], l, d);
            mx[0] = std::max(mx[0], b.expert_ms[at]);
            mx[1] = std::max(mx[1], b.a2a_ms[at]);
            mx[2] = std::max(mx[2], b.layer_ms[at]);
        }
        store.put_metric(run_id, "expert_max_ms", step, mx[0], l);
        store.put_metric(run_id, "a2a_max_ms", step, mx[1], l);
        store.put_metric(run_id, "layer_max_ms", step, mx[2], l);
        for (int k = 0; k < 3; ++k) sums[k] += mx[k];
        store.put_expert_load(run_id, step, l, b.counts.data() + static_cast<size_t>(l) * D * E, D, E);
        put_placement_if_changed(store, run_id, run, i, l, D, E);
    }
    store.put_metric(run_id, "expert_max_ms", step, sums[0]);
    store.put_metric(run_id, "a2a_max_ms", step, sums[1]);
    store.put_metric(run_id, "layer_max_ms", step, sums[2]);
}

// The layer-to-layer token path moved on the real ranks: per boundary l -> l+1 (layer = l) and summed.
void put_token_path(Store& store, const std::string& run_id, int64_t step, const BatchResult& b) {
    double path_ms = 0, path_bytes = 0;
    for (size_t l = 0; l < b.token_path_ms.size(); ++l) {
        store.put_metric(run_id, "token_path.boundary_ms", step, b.token_path_ms[l], static_cast<int>(l));
        store.put_metric(run_id, "token_path.bytes", step, static_cast<double>(b.token_path_bytes[l]),
                         static_cast<int>(l));
        path_ms += b.token_path_ms[l];
        path_bytes += static_cast<double>(b.token_path_bytes[l]);
    }
    if (!b.token_path_ms.empty()) {
        store.put_metric(run_id, "token_path.boundary_ms", step, path_ms);
        store.put_metric(run_id, "token_path.bytes", step, path_bytes);
    }
}

// The run's tails per layer and summed, its offline plan time and (moetuner) the ILP figures.
void put_run_figures(Store& store, const std::string& run_id, const ServeSettings& settings, const ServeRun& run,
                     const RunTails& tails) {
    for (int l = 0; l < run.profile.L; ++l) {
        put_tail(store, run_id, "expert", tails.expert[l], l);
        put_tail(store, run_id, "a2a", tails.a2a[l], l);
        put_tail(store, run_id, "layer", tails.layer[l], l);
    }
    put_tail(store, run_id, "expert", tails.expert_sum, -1);
    put_tail(store, run_id, "a2a", tails.a2a_sum, -1);
    put_tail(store, run_id, "layer", tails.layer_sum, -1);
    put_tail(store, run_id, "forward", tails.forward, -1);
    store.put_metric(run_id, "plan.offline_s", 0, run.offline_plan_s);
    if (settings.base.policy == "moetuner" || settings.base.policy == "moetuner-joint") {
        store.put_metric(run_id, "ilp.ilp1_objective", 0, run.ilp.ilp1_objective);
        store.put_metric(run_id, "ilp.ilp1_bound", 0, run.ilp.ilp1_bound);
        store.put_metric(run_id, "ilp.ilp2_objective", 0, run.ilp.ilp2_objective);
        store.put_metric(run_id, "ilp.ilp2_bound", 0, run.ilp.ilp2_bound);
        store.put_metric(run_id, "ilp.solve_s", 0, run.ilp.solve_s);
    }
}

}  // namespace

void record_serve_run(Store& store, const std::string& run_id, const ServeSettings& settings, const ServeRun& run) {
    const int L = run.profile.L, D = run.profile.D;
    const RunTails tails = run_tails(run);
    // one iteration: the counts summed over the profiled batches
    Trace profile;
    profile.meta = routing_trace_meta(settings.base.model, D, 1, "serve-profile:" + run_id);
    profile.meta.tokens_per_iteration *= run.profile.iterations;
    profile.counts = run.profile.counts;
    profile.transitions = run.profile.transitions;
    store.transaction([&] {
        for (size_t i = 0; i < run.measured.size(); ++i) {
            const BatchResult& b = run.measured[i];
            const int64_t step = static_cast<int64_t>(i);
            store.put_metric(run_id, "forward_ms", step, b.forward_ms);
            store.put_metric(run_id, "loss", step, b.loss);
            store.put_metric(run_id, "max_mean_load", step, max_mean_rows(b, L, D));
            put_batch_layers(store, run_id, run, i);
            put_token_path(store, run_id, step, b);
        }
        put_run_figures(store, run_id, settings, run, tails);
        store.save_trace(profile, run_id);
        store.heartbeat(run_id);
    });
}

}  // namespace prophet::serve
