// policy_runner.h: runs the configured balancing policy every iteration of a real run, layer by layer.
//
// Called by the expert-parallel executor after the counts exchange, with this iteration's global D x E counts;
// every rank calls it with identical inputs, so every rank derives the same placement without communicating.
// What a policy plans from is its registry row's input (policy_registry.h): the previous iteration's counts
// (`prophet`; iteration 0: static), the current ones (`prophet-oracle`, `fastermoe`, `top2`, ...), or, offline
// (`eplb`, `moetuner`, `moetuner-joint`), static for the first `profile_iterations` iterations, then one plan from
// those iterations' counts, kept. An external policy (a process of its own) runs on rank 0 only when
// set_root_broadcast was called: rank 0 plans and broadcasts the placement (and whether it failed) to the others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/load_forecast.h"
#include "balance/policies.h"
#include "balance/policy_registry.h"

namespace prophet {

// each expert's load over all devices: counts [L][D][E] summed over D into [L][E]
std::vector<double> loads_per_expert(const std::vector<int64_t>& counts, int L, int D, int E);

class PolicyRunner {
  public:
    PolicyRunner(std::string policy, int num_layers, int num_devices, int num_experts, CostModel cost,
                 BalanceOptions options, int profile_iterations, int num_nodes);
    ~PolicyRunner();

    // The placement of `layer` for `iteration`; counts [D*E] are this iteration's global counts.
    Placement plan(int64_t iteration, int layer, const int64_t* counts);
    // Ahead planning (the block-wise scheduler needs a layer's placement before its counts exist): every online
    // policy then plans iteration j from iteration j-1's counts (Pro-Prophet's locality assumption; for
    // fastermoe, top2, top3, prophet-oracle and exhaustive that makes them predictive). plan_next(layer, planning)
    // is that rule on next_planning_counts of this iteration's counts, for the next iteration; it reads only
    // settings and its argument, so a planner thread may call it while the main thread runs. plan_from_previous(layer)
    // is the same rule on the counts end_iteration kept (static when none; offline policies: their plan or static),
    // for the first iteration and after a resume.
    // With a load forecast (plans_for_forecast: flow under balance.flow_predict = ewma) the rule plans for the
    // forecast of every iteration so far instead of the last one's counts: next_planning_counts(layer, counts) is
    // what the next iteration plans for once this iteration's counts [D*E] of layer are known (call it on the
    // thread that calls end_iteration; without a forecast, the counts themselves).
    bool plans_online() const;
    std::vector<int64_t> next_planning_counts(int layer, const int64_t* counts) const;
    Placement plan_next(int layer, const int64_t* planning_counts) const;
    Placement plan_from_previous(int layer) const;
    // After every layer of an iteration has run: remember its counts ([L][D][E]) for the next iteration.
    void end_iteration(int64_t iteration, const std::vector<int64_t>& counts);

    // An offline policy's placements [L] from a window's loads [L][E] and transitions [L-1][E][E] (may be empty)
    // summed over window_iterations (serving's profile); *ilp: the solver's report (moetuner*), may be nullptr.
    std::vector<Placement> plan_window(const std::vector<double>& loads, const std::vector<double>& transitions,
                                       int window_iterations, IlpReport* ilp);

    const std::string& policy() const { return policy_; }
    // True for a policy planned in a process of its own (external): plan_next must not run on a second thread,
    // and with several ranks only rank 0 may plan (set_root_broadcast).
    bool plans_in_own_process() const;
    // Several ranks: `broadcast(data, bytes)` copies rank 0's bytes to every rank (a collective every rank calls in
    // the same order, as plan() and end_iteration() are). External policies then plan on rank 0 only.
    void set_root_broadcast(int rank, std::function<void(void*, size_t)> broadcast);
    // Host-aware placement (comm.replicas_within_host): every placement returned from now on keeps replicas on
    // their owner's host. host_of_rank: [D] host index of each rank; empty: no restriction.
    void set_rank_hosts(std::vector<int> host_of_rank) { host_of_rank_ = std::move(host_of_rank); }

    // State a resumed run needs to make the same placements: previous counts, offline placements and load forecasts
    // (JSON).
    std::string save_state() const;
    // Checks every field against this run's L, D and E before using any (a short `previous` would make plan()
    // read past its end); a defect is a prophet::Error, exit 3, naming `origin` (the state.json) and the field.
    void load_state(const std::string& json, const std::string& origin);

  private:
    void plan_offline();
    Placement policy_plan(int64_t iteration, int layer, const int64_t* counts);  // plan() before the host restriction
    Placement plan_layer(int64_t iteration, int layer, const int64_t* counts) const;  // the row's online planner
    // rank 0 runs plan(); every rank gets its placements [count] (a failure on rank 0 fails every rank)
    std::vector<Placement> from_root(const std::function<std::vector<Placement>()>& plan, int count);
    Placement within_hosts(Placement placement) const;
    std::vector<int64_t> planning_counts(int layer) const;  // [D*E] what layer plans for after end_iteration

    std::string policy_;
    const PolicyRow* row_;
    PolicyInput input_;
    std::unique_ptr<PolicySession> session_;  // an external policy's process (started on its first plan)
    int rank_ = 0;
    std::function<void(void*, size_t)> broadcast_;  // empty: every rank plans for itself
    int L_, D_, E_;
    CostModel cost_;
    BalanceOptions options_;
    int profile_iterations_;
    int num_nodes_;
    std::vector<int> host_of_rank_;     // [D] or empty (set_rank_hosts)
    std::vector<int64_t> previous_;     // [L][D][E] counts of the last finished iteration (empty: none)
    std::vector<int64_t> window_;       // [L][D][E] counts summed over the profiling window
    int64_t window_iterations_ = 0;
    std::vector<Placement> offline_;    // [L] once planned
    std::vector<LoadForecast> forecasts_;  // [L] under plans_for_forecast (else empty), fed by end_iteration
    std::vector<Placement> in_force_;      // [L] the last placement plan() returned per layer (empty: none yet)
};

}  // namespace prophet
