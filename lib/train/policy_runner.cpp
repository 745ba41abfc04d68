#include "train/policy_runner.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace prophet {

PolicyRunner::PolicyRunner(std::string policy, int num_layers, int num_devices, int num_experts, CostModel cost,
                           BalanceOptions options, int profile_iterations, int num_nodes)
    : policy_(std::move(policy)),
      L_(num_layers),
      D_(num_devices),
      E_(num_experts),
      cost_(std::move(cost)),
      options_(std::move(options)),
      profile_iterations_(profile_iterations < 1 ? 1 : profile_iterations),
      num_nodes_(num_nodes) {
    const auto& names = policy_names();
    if (std::find(names.begin(), names.end(), policy_) == names.end())
        throw_config_error("balance.policy", policy_, "unknown policy", "see prophet train --help-config");
    window_.assign(static_cast<size_t>(L_) * D_ * E_, 0);
}

Placement PolicyRunner::plan(int64_t iteration, int layer, const int64_t* counts) {
    (void)iteration;
    return within_hosts(policy_plan(layer, counts));
}

Placement PolicyRunner::within_hosts(Placement placement) const {
    if (!host_of_rank_.empty()) keep_replicas_within_groups(placement, host_of_rank_);
    return placement;
}

Placement PolicyRunner::policy_plan(int layer, const int64_t* counts) {
    if (policy_ == "static") return plan_static(D_, E_);
    if (policy_ == "prophet") {
        if (previous_.empty()) return plan_static(D_, E_);
        return plan_prophet(previous_.data() + static_cast<size_t>(layer) * D_ * E_, D_, E_, cost_, options_);
    }
    if (policy_ == "prophet-oracle") return plan_prophet(counts, D_, E_, cost_, options_);
    if (policy_ == "fastermoe") return plan_fastermoe(counts, D_, E_, cost_, options_);
    if (policy_ == "top2") return plan_broadcast_top(counts, D_, E_, 2);
    if (policy_ == "top3") return plan_broadcast_top(counts, D_, E_, 3);
    if (policy_ == "exhaustive") return plan_exhaustive(counts, D_, E_, cost_, options_);
    // offline policies
    if (offline_.empty()) return plan_static(D_, E_);
    return offline_[layer];
}

bool PolicyRunner::plans_online() const {
    return policy_ != "static" && policy_ != "eplb" && policy_ != "moetuner" && policy_ != "moetuner-joint";
}

Placement PolicyRunner::plan_next(int layer, const int64_t* counts) const {
    (void)layer;
    return within_hosts(policy_plan_next(counts));
}

Placement PolicyRunner::policy_plan_next(const int64_t* counts) const {
    if (policy_ == "prophet" || policy_ == "prophet-oracle") return plan_prophet(counts, D_, E_, cost_, options_);
    if (policy_ == "fastermoe") return plan_fastermoe(counts, D_, E_, cost_, options_);
    if (policy_ == "top2") return plan_broadcast_top(counts, D_, E_, 2);
    if (policy_ == "top3") return plan_broadcast_top(counts, D_, E_, 3);
    if (policy_ == "exhaustive") return plan_exhaustive(counts, D_, E_, cost_, options_);
    return plan_static(D_, E_);
}

Placement PolicyRunner::plan_from_previous(int layer) const {
    if (!plans_online()) return offline_.empty() ? plan_static(D_, E_) : within_hosts(offline_[layer]);
    if (previous_.empty()) return plan_static(D_, E_);
    return plan_next(layer, previous_.data() + static_cast<size_t>(layer) * D_ * E_);
}

void PolicyRunner::end_iteration(int64_t iteration, const std::vector<int64_t>& counts) {
    PROPHET_ASSERT(counts.size() == static_cast<size_t>(L_) * D_ * E_);
    previous_ = counts;
    if (offline_.empty() && (policy_ == "eplb" || policy_ == "moetuner" || policy_ == "moetuner-joint")) {
        for (size_t i = 0; i < counts.size(); ++i) window_[i] += counts[i];
        if (++window_iterations_ >= profile_iterations_) plan_offline();
    }
}

void PolicyRunner::plan_offline() {
    std::vector<double> loads(static_cast<size_t>(L_) * E_, 0.0);  // [L][E]
    for (int l = 0; l < L_; ++l)
        for (int d = 0; d < D_; ++d)
            for (int e = 0; e < E_; ++e)
                loads[static_cast<size_t>(l) * E_ + e] +=
                    static_cast<double>(window_[(static_cast<size_t>(l) * D_ + d) * E_ + e]);
    if (policy_ == "eplb") {
        offline_ = plan_eplb(loads, L_, D_, E_, num_nodes_, options_);
        return;
    }
    std::vector<double> link_cost(static_cast<size_t>(D_) * D_, 0.0);
    for (int a = 0; a < D_; ++a)
        for (int b = 0; b < D_; ++b)
            if (a != b) link_cost[static_cast<size_t>(a) * D_ + b] = 1.0 / cost_.cluster.link_bytes_per_s(a, b);
    const std::vector<double> no_transitions;  // a real run's transitions come from `prophet profile`
    offline_ = policy_ == "moetuner" ? plan_moetuner(loads, no_transitions, L_, D_, E_, link_cost, options_)
                                     : plan_moetuner_joint(loads, no_transitions, L_, D_, E_, link_cost, options_);
}

std::string PolicyRunner::save_state() const {
    nlohmann::json j;
    j["policy"] = policy_;
    j["previous"] = previous_;
    j["window"] = window_;
    j["window_iterations"] = window_iterations_;
    nlohmann::json offline = nlohmann::json::array();
    for (const Placement& p : offline_) offline.push_back({{"owner", p.owner}, {"replica", p.replica}});
    j["offline"] = offline;
    return j.dump();
}

void PolicyRunner::load_state(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("policy").get<std::string>() != policy_)
        throw Error(kExitConfig, "checkpoint error: the checkpoint's balancing state is for policy " +
                                     j.at("policy").get<std::string>() + ", this run uses " + policy_ +
                                     "; fix: resume with --set balance.policy=" + j.at("policy").get<std::string>());
    previous_ = j.at("previous").get<std::vector<int64_t>>();
    window_ = j.at("window").get<std::vector<int64_t>>();
    window_iterations_ = j.at("window_iterations").get<int64_t>();
    offline_.clear();
    for (const auto& p : j.at("offline")) {
        Placement placement = Placement::make_owners(D_, p.at("owner").get<std::vector<int>>());
        placement.replica = p.at("replica").get<std::vector<uint8_t>>();
        offline_.push_back(std::move(placement));
    }
}

}  // namespace prophet
