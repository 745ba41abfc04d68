#include "train/policy_runner.h"

#include <nlohmann/json.hpp>

#include "balance/policy_flow.h"
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
    if (policy_ == "flow") {  // the previous batch's counts, weights at home; the executor's owner rule routes
        if (previous_.empty()) return plan_static(D_, E_);
        return plan_flow(previous_.data() + static_cast<size_t>(layer) * D_ * E_, D_, E_, cost_, options_,
                         plan_static(D_, E_));
    }
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
    if (policy_ == "flow") return plan_flow(counts, D_, E_, cost_, options_, plan_static(D_, E_));
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

namespace {

// A defect of one field of the saved balancing state: exit 3 naming the file and the field.
[[noreturn]] void state_error(const std::string& origin, const std::string& field, const std::string& problem) {
    throw_input_error(origin, "extra.policy_state" + (field.empty() ? "" : "." + field) + " " + problem,
                      "resume from a checkpoint this prophet wrote for this config (prophet ckpt show DIR), "
                      "or start the run afresh");
}

// `j[field]` as a vector of `size` non-negative counts (size 0 allowed when `may_be_empty`).
std::vector<int64_t> state_counts(const nlohmann::json& j, const std::string& origin, const std::string& field,
                                  size_t size, bool may_be_empty) {
    const auto it = j.find(field);
    if (it == j.end() || !it->is_array()) state_error(origin, field, "is missing or not an array");
    if (!(may_be_empty && it->empty()) && it->size() != size)
        state_error(origin, field,
                    "has " + std::to_string(it->size()) + " entries, this config needs " + std::to_string(size) +
                        " (num_layers x devices x experts)" + (may_be_empty ? " or 0" : ""));
    std::vector<int64_t> values;
    values.reserve(it->size());
    for (const nlohmann::json& v : *it) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0)
            state_error(origin, field, "holds " + v.dump() + " at entry " + std::to_string(values.size()) +
                                           ", not a token count (an integer >= 0)");
        values.push_back(v.get<int64_t>());
    }
    return values;
}

}  // namespace

void PolicyRunner::load_state(const std::string& text, const std::string& origin) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw_input_error(origin, std::string("extra.policy_state is not valid JSON (") + e.what() + ")",
                          "resume from a checkpoint this prophet wrote (prophet ckpt show DIR)");
    }
    if (!j.is_object()) state_error(origin, "", "is not a JSON object");
    const auto policy = j.find("policy");
    if (policy == j.end() || !policy->is_string()) state_error(origin, "policy", "is missing or not a string");
    if (policy->get<std::string>() != policy_)
        throw Error(kExitConfig, "checkpoint error: " + origin + ": the checkpoint's balancing state is for policy " +
                                     policy->get<std::string>() + ", this run uses " + policy_ +
                                     "; fix: resume with --set balance.policy=" + policy->get<std::string>());
    const size_t cells = static_cast<size_t>(L_) * D_ * E_;  // [L][D][E]
    std::vector<int64_t> previous = state_counts(j, origin, "previous", cells, true);
    std::vector<int64_t> window = state_counts(j, origin, "window", cells, false);
    const auto iterations = j.find("window_iterations");
    if (iterations == j.end() || !iterations->is_number_integer() || iterations->get<int64_t>() < 0)
        state_error(origin, "window_iterations", "is missing or not an integer >= 0");
    const auto offline = j.find("offline");
    if (offline == j.end() || !offline->is_array() || (!offline->empty() && offline->size() != static_cast<size_t>(L_)))
        state_error(origin, "offline", "must be an array of 0 or num_layers (" + std::to_string(L_) + ") placements");
    std::vector<Placement> placements;
    for (const nlohmann::json& p : *offline) {
        const std::string field = "offline[" + std::to_string(placements.size()) + "]";
        const auto owner = p.is_object() ? p.find("owner") : p.end();
        const auto replica = p.is_object() ? p.find("replica") : p.end();
        if (owner == p.end() || !owner->is_array() || owner->size() != static_cast<size_t>(E_))
            state_error(origin, field + ".owner", "must be an array of num_experts (" + std::to_string(E_) + ") devices");
        if (replica == p.end() || !replica->is_array() || replica->size() != static_cast<size_t>(E_) * D_)
            state_error(origin, field + ".replica",
                        "must be an array of experts x devices (" + std::to_string(E_ * D_) + ") flags");
        std::vector<int> owners;
        for (const nlohmann::json& d : *owner) {
            if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() >= D_)
                state_error(origin, field + ".owner", "holds " + d.dump() + ", not a device in [0, " +
                                                          std::to_string(D_) + ")");
            owners.push_back(d.get<int>());
        }
        Placement placement = Placement::make_owners(D_, owners);
        for (size_t i = 0; i < replica->size(); ++i) {
            const nlohmann::json& flag = (*replica)[i];
            if (!flag.is_number_integer() || (flag.get<int64_t>() != 0 && flag.get<int64_t>() != 1))
                state_error(origin, field + ".replica", "holds " + flag.dump() + ", not a flag 0 or 1");
            placement.replica[i] = static_cast<uint8_t>(flag.get<int64_t>());
        }
        const std::string problem = check_placement(placement, 0);
        if (!problem.empty()) state_error(origin, field, "is not a valid placement: " + problem);
        placements.push_back(std::move(placement));
    }
    previous_ = std::move(previous);
    window_ = std::move(window);
    window_iterations_ = iterations->get<int64_t>();
    offline_ = std::move(placements);
}

}  // namespace prophet
