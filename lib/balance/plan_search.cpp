// plan_search.cpp: simulated annealing over replica sets (plan_search.h).
#include "balance/plan_search.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/rng.h"

namespace prophet {
namespace {

// removes one replica drawn uniformly over all replicas; false when there is none
bool remove_random_replica(Placement& p, Rng& rng, int* expert) {
    const int D = p.num_devices;
    const int total = p.num_replicas();
    if (total == 0) return false;
    int pick = static_cast<int>(rng.below(static_cast<uint64_t>(total)));
    for (size_t i = 0; i < p.replica.size(); ++i) {
        if (!p.replica[i]) continue;
        if (pick-- > 0) continue;
        p.replica[i] = 0;
        *expert = static_cast<int>(i / static_cast<size_t>(D));
        return true;
    }
    return false;
}

// a replica of `expert` on a device without it, drawn uniformly
bool add_replica_of(Placement& p, int expert, Rng& rng) {
    const int D = p.num_devices;
    int free_devices = 0;
    for (int d = 0; d < D; ++d) free_devices += p.holds(expert, d) ? 0 : 1;
    if (free_devices == 0) return false;
    int pick = static_cast<int>(rng.below(static_cast<uint64_t>(free_devices)));
    for (int d = 0; d < D; ++d) {
        if (p.holds(expert, d) || pick-- > 0) continue;
        p.add_replica(expert, d);
        return true;
    }
    return false;
}

// One proposal applied to `p` in place; false when the drawn move has nothing to act on (no replica to remove
// or move, or the expert is on every device). Moves: 0 add, 1 remove, 2 move (remove + add elsewhere).
bool propose(Placement& p, Rng& rng) {
    const int move = static_cast<int>(rng.below(3));
    int expert = static_cast<int>(rng.below(static_cast<uint64_t>(p.num_experts)));
    if (move == 0) return add_replica_of(p, expert, rng);
    if (!remove_random_replica(p, rng, &expert)) return false;
    return move == 1 || add_replica_of(p, expert, rng);
}

void check_options(const PlanSearchOptions& o) {
    if (o.cost_eq != 6 && o.cost_eq != 8)
        throw_config_error("cost_eq", std::to_string(o.cost_eq), "must be 6 or 8", "pick Eq 6 or Eq 8");
    if (o.iterations < 0)
        throw_config_error("iterations", std::to_string(o.iterations), "must be >= 0", "pass a count of proposals");
}

}  // namespace

double search_layer_cost(const int64_t* counts, const Placement& placement, const CostModel& cost,
                         const PlanSearchOptions& options) {
    const LayerFlow flow =
        compute_flow(counts, placement.num_devices, placement.num_experts, placement, options.route_rule, &cost);
    return layer_cost(predict_layer(cost, flow, placement), options.cost_eq);
}

Placement search_plan(const int64_t* counts, const CostModel& cost, const Placement& start,
                      const PlanSearchOptions& options, PlanSearchReport* report) {
    check_options(options);
    Rng rng(options.seed);
    Placement current = start, best = start;
    double current_s = search_layer_cost(counts, start, cost, options), best_s = current_s;
    PlanSearchReport r;
    r.start_s = current_s;
    const double t0 = current_s * options.initial_temperature;
    for (int it = 0; it < options.iterations; ++it) {
        Placement candidate = current;
        if (!propose(candidate, rng)) continue;
        if (options.max_replicas_per_device > 0 && !check_placement(candidate, options.max_replicas_per_device).empty())
            continue;
        const double s = search_layer_cost(counts, candidate, cost, options);
        const double temperature = t0 * (1.0 - static_cast<double>(it) / options.iterations);
        const bool accept =
            s < current_s || (temperature > 0 && rng.uniform() < std::exp((current_s - s) / temperature));
        if (!accept) continue;
        ++r.accepted;
        current = std::move(candidate);
        current_s = s;
        if (current_s < best_s) {
            best_s = current_s;
            best = current;
            ++r.improved;
        }
    }
    r.best_s = best_s;
    if (report) *report = r;
    return best;
}

}  // namespace prophet
