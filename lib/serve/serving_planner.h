// serving_planner.h: the placement of every MoE layer during an inference run, per policy.
//
// Offline policies (plans_offline, policy_registry.h) plan once, before the measured batches, with their registry
// row's window planner on the routing profile of data A:
//   eplb            plan_eplb on the profiled loads [L][E]
//   moetuner        plan_moetuner (two-stage ILP) on the loads and the layer-to-layer transitions [L-1][E][E],
//                   with link cost 1 / bandwidth of the cluster file's links
//   moetuner-joint  plan_moetuner_joint on the same inputs (small instances only)
//   external        (balance.external_role = offline) the external process, asked once with the loads
// Every other policy runs as in training (PolicyRunner): `static` always, `prophet` from the previous batch's
// counts (the first measured batch sees the last profiled one), the rest from the current batch's counts.
// An external policy runs on rank 0 only when a RootBroadcast is given (several ranks).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/policies.h"
#include "train/policy_runner.h"

namespace prophet::serve {

// What profiling data A gave (identical on every rank).
struct RoutingProfile {
    int iterations = 0;
    int L = 0, D = 0, E = 0;
    std::vector<int64_t> counts;       // [L][D][E] summed over the profiled batches
    std::vector<int64_t> transitions;  // [L-1][E][E] summed: tokens at expert e1 of layer l then e2 of layer l+1
    std::vector<int64_t> last_counts;  // [L][D][E] of the last profiled batch
    // [L][E] loads summed over devices, as the offline planners take them
    std::vector<double> expert_loads() const;
};

// Several ranks: this rank and a broadcast of rank 0's bytes to every rank (a collective), so that an external
// policy runs on rank 0 only. Empty broadcast: every rank plans for itself.
struct RootBroadcast {
    int rank = 0;
    std::function<void(void*, size_t)> broadcast;
};

class ServingPlanner {
  public:
    ServingPlanner(std::string policy, const RoutingProfile& profile, const CostModel& cost,
                   const BalanceOptions& options, int num_nodes, const RootBroadcast& root = {});

    // The placement of `layer` for the batch whose global counts ([D*E]) are `counts`; every rank calls it with
    // identical inputs and gets the same answer.
    Placement plan(int layer, const int64_t* counts);
    // after every layer of a batch: its counts [L][D][E]
    void end_iteration(const std::vector<int64_t>& counts);

    double offline_plan_s() const { return offline_plan_s_; }  // wall time of the offline planning (0: online)
    const IlpReport& ilp_report() const { return ilp_; }     // moetuner / moetuner-joint only
    const std::vector<Placement>& offline() const { return offline_; }

  private:
    std::string policy_;
    std::vector<Placement> offline_;        // [L] offline policies
    std::unique_ptr<PolicyRunner> online_;  // online policies (null for offline ones once planned)
    int64_t iteration_ = 0;
    double offline_plan_s_ = 0;
    IlpReport ilp_;
};

}  // namespace prophet::serve
