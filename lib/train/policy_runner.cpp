#include "train/policy_runner.h"

#include <exception>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace prophet {

PolicyRunner::PolicyRunner(std::string policy, int num_layers, int num_devices, int num_experts, CostModel cost,
                           BalanceOptions options, int profile_iterations, int num_nodes)
    : policy_(std::move(policy)), row_(&policy_row(policy_)), input_(policy_input(*row_, options)), L_(num_layers),
      D_(num_devices), E_(num_experts), cost_(std::move(cost)), options_(std::move(options)),
      profile_iterations_(profile_iterations < 1 ? 1 : profile_iterations), num_nodes_(num_nodes) {
    session_ = std::make_unique<PolicySession>(options_, cost_, L_, E_);
    window_.assign(static_cast<size_t>(L_) * D_ * E_, 0);
    if (plans_for_forecast(*row_, options_))
        forecasts_.assign(L_, LoadForecast(static_cast<size_t>(D_) * E_, options_));
}

PolicyRunner::~PolicyRunner() = default;

bool PolicyRunner::plans_in_own_process() const { return row_->external_process; }

void PolicyRunner::set_root_broadcast(int rank, std::function<void(void*, size_t)> broadcast) {
    rank_ = rank;
    broadcast_ = std::move(broadcast);
}

std::vector<Placement> PolicyRunner::from_root(const std::function<std::vector<Placement>()>& plan, int count) {
    if (!broadcast_ || !row_->external_process) return plan();
    std::vector<Placement> out;
    int32_t ok = 1;
    std::exception_ptr failure;
    if (rank_ == 0) {
        try {
            out = plan();
        } catch (...) {
            failure = std::current_exception();
            ok = 0;
        }
    }
    broadcast_(&ok, sizeof ok);  // every rank learns whether rank 0's policy failed before waiting for a placement
    if (failure) std::rethrow_exception(failure);
    if (!ok)
        throw Error(kExitDistributed,
                    "distributed failure: the external policy on rank 0 failed (rank 0 reports "
                    "why); fix: see rank 0's error");
    if (rank_ != 0) out.assign(count, Placement::make_static(D_, E_));
    for (Placement& p : out) {
        PROPHET_ASSERT(p.owner.size() == static_cast<size_t>(E_) && p.replica.size() == static_cast<size_t>(E_) * D_);
        broadcast_(p.owner.data(), p.owner.size() * sizeof(int));
        broadcast_(p.replica.data(), p.replica.size());
    }
    return out;
}

Placement PolicyRunner::plan(int64_t iteration, int layer, const int64_t* counts) {
    Placement p = from_root([&] { return std::vector<Placement>{policy_plan(iteration, layer, counts)}; }, 1)[0];
    if (in_force_.empty()) in_force_.assign(L_, Placement::make_static(D_, E_));
    in_force_[layer] = p;
    return within_hosts(std::move(p));
}

Placement PolicyRunner::within_hosts(Placement placement) const {
    if (!host_of_rank_.empty()) keep_replicas_within_groups(placement, host_of_rank_);
    return placement;
}

Placement PolicyRunner::plan_layer(int64_t iteration, int layer, const int64_t* counts) const {
    LayerPlanRequest request;
    request.iteration = iteration;
    request.layer = layer;
    request.counts = counts;
    request.current = in_force_.empty() ? nullptr : &in_force_[layer];
    request.num_devices = D_;
    request.num_experts = E_;
    request.cost = &cost_;
    request.options = &options_;
    return row_->plan_layer(request, *session_);
}

Placement PolicyRunner::policy_plan(int64_t iteration, int layer, const int64_t* counts) {
    switch (input_) {
        case PolicyInput::kCurrentIteration:
            return plan_layer(iteration, layer, counts);
        case PolicyInput::kPreviousIteration:
            if (previous_.empty()) return plan_static(D_, E_);
            return plan_layer(iteration, layer, planning_counts(layer).data());
        case PolicyInput::kProfileWindow:
            break;
    }
    if (offline_.empty()) return plan_static(D_, E_);
    return offline_[layer];
}

bool PolicyRunner::plans_online() const { return input_ != PolicyInput::kProfileWindow; }

std::vector<int64_t> PolicyRunner::planning_counts(int layer) const {
    PROPHET_ASSERT(!previous_.empty());
    if (!forecasts_.empty()) return forecasts_[layer].forecast();
    const int64_t* last = previous_.data() + static_cast<size_t>(layer) * D_ * E_;
    return std::vector<int64_t>(last, last + static_cast<size_t>(D_) * E_);
}

std::vector<int64_t> PolicyRunner::next_planning_counts(int layer, const int64_t* counts) const {
    if (!forecasts_.empty()) return forecasts_[layer].forecast_after(counts);
    return std::vector<int64_t>(counts, counts + static_cast<size_t>(D_) * E_);
}

Placement PolicyRunner::plan_next(int layer, const int64_t* planning) const {
    PROPHET_ASSERT_MSG(!row_->external_process, "plan_next runs on the planner thread; external policies refuse it");
    if (!plans_online()) return plan_static(D_, E_);
    return within_hosts(plan_layer(-1, layer, planning));
}

Placement PolicyRunner::plan_from_previous(int layer) const {
    if (!plans_online()) return offline_.empty() ? plan_static(D_, E_) : within_hosts(offline_[layer]);
    if (previous_.empty()) return plan_static(D_, E_);
    return plan_next(layer, planning_counts(layer).data());
}

std::vector<double> loads_per_expert(const std::vector<int64_t>& counts, int L, int D, int E) {
    std::vector<double> loads(static_cast<size_t>(L) * E, 0.0);  // [L][E]
    for (int l = 0; l < L; ++l)
        for (int d = 0; d < D; ++d)
            for (int e = 0; e < E; ++e)
                loads[static_cast<size_t>(l) * E + e] +=
                    static_cast<double>(counts[(static_cast<size_t>(l) * D + d) * E + e]);
    return loads;
}

void PolicyRunner::end_iteration(int64_t iteration, const std::vector<int64_t>& counts) {
    (void)iteration;
    PROPHET_ASSERT(counts.size() == static_cast<size_t>(L_) * D_ * E_);
    previous_ = counts;
    for (int l = 0; l < static_cast<int>(forecasts_.size()); ++l)
        forecasts_[l].observe(counts.data() + static_cast<size_t>(l) * D_ * E_);
    if (offline_.empty() && input_ == PolicyInput::kProfileWindow) {
        for (size_t i = 0; i < counts.size(); ++i) window_[i] += counts[i];
        if (++window_iterations_ >= profile_iterations_) plan_offline();
    }
}

void PolicyRunner::plan_offline() {
    const std::vector<double> loads = loads_per_expert(window_, L_, D_, E_);
    const std::vector<double> no_transitions;  // a real run's transitions come from `prophet profile`
    offline_ = plan_window(loads, no_transitions, static_cast<int>(window_iterations_), nullptr);
}

std::vector<Placement> PolicyRunner::plan_window(const std::vector<double>& loads,
                                                 const std::vector<double>& transitions, int window_iterations,
                                                 IlpReport* ilp) {
    const std::vector<double> link_cost = link_costs(cost_, D_);
    WindowPlanRequest request;
    request.window_iterations = window_iterations;
    request.loads = &loads;
    request.transitions = &transitions;
    request.link_cost = &link_cost;
    request.num_layers = L_;
    request.num_devices = D_;
    request.num_experts = E_;
    request.num_nodes = num_nodes_;
    request.options = &options_;
    WindowPlanReport report;
    std::vector<Placement> out = from_root([&] { return row_->plan_window(request, *session_, &report); }, L_);
    if (ilp) *ilp = report.ilp;
    return out;
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
    nlohmann::json forecasts = nlohmann::json::array();  // [L] under plans_for_forecast, else empty
    for (const LoadForecast& f : forecasts_) {
        const LoadForecast::State state = f.state();
        forecasts.push_back({{"observed", state.observed}, {"mean", state.mean}, {"var", state.var}});
    }
    j["forecast"] = forecasts;
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

// j["forecast"] restored into copies of `forecasts` ([L]: the run's, fresh; empty: the run keeps none and the field
// is not read). Per layer {"observed": n, "mean": [D*E], "var": [D*E]}; with previous counts (has_previous) the
// next plan reads every forecast, so each must have observed an iteration.
std::vector<LoadForecast> state_forecasts(const nlohmann::json& j, const std::string& origin,
                                          std::vector<LoadForecast> forecasts, bool has_previous) {
    if (forecasts.empty()) return forecasts;
    const auto it = j.find("forecast");
    if (it == j.end() || !it->is_array() || it->size() != forecasts.size())
        state_error(origin, "forecast",
                    "must be an array of num_layers (" + std::to_string(forecasts.size()) +
                        ") load forecasts for balance.flow_predict = ewma (a checkpoint written before prophet saved "
                        "them cannot resume such a run exactly)");
    for (size_t l = 0; l < forecasts.size(); ++l) {
        const nlohmann::json& f = (*it)[l];
        const std::string field = "forecast[" + std::to_string(l) + "]";
        const auto observed = f.is_object() ? f.find("observed") : f.end();
        if (observed == f.end() || !observed->is_number_integer())
            state_error(origin, field + ".observed", "is missing or not an integer");
        if (has_previous && observed->get<int64_t>() < 1)
            state_error(origin, field + ".observed",
                        "is " + observed->dump() + " while previous holds counts (needs >= 1 observation)");
        LoadForecast::State state;
        state.observed = observed->get<int64_t>();
        try {
            state.mean = f.at("mean").get<std::vector<double>>();
            state.var = f.at("var").get<std::vector<double>>();
        } catch (const nlohmann::json::exception&) {
            state_error(origin, field, "needs mean and var as arrays of numbers");
        }
        const std::string problem = forecasts[l].restore(std::move(state));
        if (!problem.empty()) state_error(origin, field, problem);
    }
    return forecasts;
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
    std::vector<LoadForecast> forecasts = state_forecasts(j, origin, forecasts_, !previous.empty());
    previous_ = std::move(previous);
    forecasts_ = std::move(forecasts);
    window_ = std::move(window);
    window_iterations_ = iterations->get<int64_t>();
    offline_ = std::move(placements);
}

}  // namespace prophet
