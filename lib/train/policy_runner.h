// policy_runner.h: runs the configured balancing policy every iteration of a real run, layer by layer.
//
// Called by the expert-parallel executor after the counts exchange, with this iteration's global D x E counts;
// every rank calls it with identical inputs, so every rank derives the same placement without communicating.
// `prophet` plans iteration j from iteration j-1's counts (iteration 0: static); `prophet-oracle`, `fastermoe`,
// `top2`, `top3` and `exhaustive` plan on the current counts; `eplb`, `moetuner` and `moetuner-joint` run static
// for the first `profile_iterations` iterations, then plan once from those iterations' counts and keep the result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/policies.h"

namespace prophet {

class PolicyRunner {
  public:
    PolicyRunner(std::string policy, int num_layers, int num_devices, int num_experts, CostModel cost,
                 BalanceOptions options, int profile_iterations, int num_nodes);

    // The placement of `layer` for `iteration`; counts [D*E] are this iteration's global counts.
    Placement plan(int64_t iteration, int layer, const int64_t* counts);
    // Ahead planning (the block-wise scheduler needs a layer's placement before its counts exist): every online
    // policy then plans iteration j from iteration j-1's counts (Pro-Prophet's locality assumption; for
    // fastermoe, top2, top3, prophet-oracle and exhaustive that makes them predictive). plan_next(layer, counts)
    // is that rule on this iteration's counts [D*E], for the next iteration; it reads only settings, so a planner
    // thread may call it while the main thread runs. plan_from_previous(layer) is the same rule on the counts
    // end_iteration kept (static when none; offline policies: their plan or static), for the first iteration
    // and after a resume.
    bool plans_online() const;
    Placement plan_next(int layer, const int64_t* counts) const;
    Placement plan_from_previous(int layer) const;
    // After every layer of an iteration has run: remember its counts ([L][D][E]) for the next iteration.
    void end_iteration(int64_t iteration, const std::vector<int64_t>& counts);

    const std::string& policy() const { return policy_; }
    // Host-aware placement (comm.replicas_within_host): every placement returned from now on keeps replicas on
    // their owner's host. host_of_rank: [D] host index of each rank; empty: no restriction.
    void set_rank_hosts(std::vector<int> host_of_rank) { host_of_rank_ = std::move(host_of_rank); }

    // State a resumed run needs to make the same placements: previous counts and offline placements (JSON).
    std::string save_state() const;
    // Checks every field against this run's L, D and E before using any (a short `previous` would make plan()
    // read past its end); a defect is a prophet::Error, exit 3, naming `origin` (the state.json) and the field.
    void load_state(const std::string& json, const std::string& origin);

  private:
    void plan_offline();
    Placement policy_plan(int layer, const int64_t* counts);  // plan() before the host restriction
    Placement policy_plan_next(const int64_t* counts) const;  // plan_next() before it
    Placement within_hosts(Placement placement) const;

    std::string policy_;
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
};

}  // namespace prophet
