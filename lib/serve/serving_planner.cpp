#include "serve/serving_planner.h"

#include "balance/policy_registry.h"
#include "core/error.h"
#include "core/timer.h"

namespace prophet::serve {

std::vector<double> RoutingProfile::expert_loads() const { return loads_per_expert(counts, L, D, E); }

ServingPlanner::ServingPlanner(std::string policy, const RoutingProfile& profile, const CostModel& cost,
                               const BalanceOptions& options, int num_nodes, const RootBroadcast& root)
    : policy_(std::move(policy)) {
    const int L = profile.L, D = profile.D, E = profile.E;
    PROPHET_ASSERT(profile.counts.size() == static_cast<size_t>(L) * D * E);
    // online and offline alike through PolicyRunner (the registry's planners, rank 0 only for an external one)
    online_ = std::make_unique<PolicyRunner>(policy_, L, D, E, cost, options, 1, num_nodes);
    if (root.broadcast) online_->set_root_broadcast(root.rank, root.broadcast);
    if (!plans_offline(policy_, options)) {
        // `prophet` plans a batch from the previous one: the first measured batch follows the last profiled one
        online_->end_iteration(-1, profile.last_counts);
        return;
    }
    const std::vector<double> transitions(profile.transitions.begin(), profile.transitions.end());
    const int64_t t0 = now_ns();
    offline_ = online_->plan_window(profile.expert_loads(), transitions, profile.iterations, &ilp_);
    offline_plan_s_ = static_cast<double>(now_ns() - t0) * 1e-9;
    online_.reset();  // planned once: an external policy's process ends here
}

Placement ServingPlanner::plan(int layer, const int64_t* counts) {
    if (online_) return online_->plan(iteration_, layer, counts);
    return offline_[layer];
}

void ServingPlanner::end_iteration(const std::vector<int64_t>& counts) {
    if (online_) online_->end_iteration(iteration_, counts);
    ++iteration_;
}

}  // namespace prophet::serve
