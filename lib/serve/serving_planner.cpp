#include "serve/serving_planner.h"

#include "core/error.h"
#include "core/timer.h"

namespace prophet::serve {

std::vector<double> RoutingProfile::expert_loads() const {
    std::vector<double> loads(static_cast<size_t>(L) * E, 0.0);  // [L][E]
    for (int l = 0; l < L; ++l)
        for (int d = 0; d < D; ++d)
            for (int e = 0; e < E; ++e)
                loads[static_cast<size_t>(l) * E + e] +=
                    static_cast<double>(counts[(static_cast<size_t>(l) * D + d) * E + e]);
    return loads;
}

bool is_offline_policy(const std::string& policy) {
    return policy == "eplb" || policy == "moetuner" || policy == "moetuner-joint";
}

std::vector<double> link_costs(const CostModel& cost, int num_devices) {
    const int D = num_devices;
    std::vector<double> c(static_cast<size_t>(D) * D, 0.0);
    for (int a = 0; a < D; ++a)
        for (int b = 0; b < D; ++b)
            if (a != b) c[static_cast<size_t>(a) * D + b] = 1.0 / cost.cluster.link_bytes_per_s(a, b);
    return c;
}

ServingPlanner::ServingPlanner(std::string policy, const RoutingProfile& profile, const CostModel& cost,
                               const BalanceOptions& options, int num_nodes)
    : policy_(std::move(policy)) {
    const int L = profile.L, D = profile.D, E = profile.E;
    PROPHET_ASSERT(profile.counts.size() == static_cast<size_t>(L) * D * E);
    if (!is_offline_policy(policy_)) {
        online_ = std::make_unique<PolicyRunner>(policy_, L, D, E, cost, options, 1, num_nodes);
        // `prophet` plans a batch from the previous one: the first measured batch follows the last profiled one
        online_->end_iteration(-1, profile.last_counts);
        return;
    }
    const std::vector<double> loads = profile.expert_loads();
    std::vector<double> transitions(profile.transitions.begin(), profile.transitions.end());
    const int64_t t0 = now_ns();
    if (policy_ == "eplb")
        offline_ = plan_eplb(loads, L, D, E, num_nodes, options);
    else if (policy_ == "moetuner")
        offline_ = plan_moetuner(loads, transitions, L, D, E, link_costs(cost, D), options, &ilp_);
    else
        offline_ = plan_moetuner_joint(loads, transitions, L, D, E, link_costs(cost, D), options, &ilp_);
    offline_plan_s_ = static_cast<double>(now_ns() - t0) * 1e-9;
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
