// ilp_gap.h: MoETuner's two-stage ILP against its joint form on small random instances, and solve times against
// E, D and L (the reviewers' question: does the decomposition lose against a joint optimum, and what does it cost?).
//
// An instance is tokens walking through L layers of E experts: each token picks its layer-0 expert from a Zipf
// distribution (exponent `skew`, a random expert order per layer) and at each next layer follows its expert's
// preferred successor with probability `affinity`, else draws from that layer's Zipf. Counting the walks gives the
// loads [L][E] and transitions [L-1][E][E] the planners take (top-1, so every token adds 1 to both).
// Both plans are scored by the same joint objective J (moetuner_joint_objective): load term + traffic term.
#pragma once

#include <cstdint>
#include <vector>

#include "balance/policies.h"

namespace prophet::serve {

struct IlpInstance {
    int E = 0, D = 0, L = 0;
    uint64_t seed = 0;
    std::vector<double> loads;        // [L][E]
    std::vector<double> transitions;  // [L-1][E][E]
    std::vector<double> link_cost;    // [D][D]: 1 on every off-diagonal pair (one node)
};
IlpInstance make_ilp_instance(int E, int D, int L, uint64_t seed, int64_t tokens = 4096, double skew = 1.0,
                              double affinity = 0.7);

struct IlpGapResult {
    JointObjective two_stage;   // J of plan_moetuner's placements
    JointObjective joint;       // J of plan_moetuner_joint's (only when has_joint)
    bool has_joint = false;     // E, D, L within kJoint* limits
    double two_stage_s = 0;     // wall time of plan_moetuner
    double joint_s = 0;         // wall time of plan_moetuner_joint
    double joint_bound = 0;     // CBC's lower bound on J
    bool joint_proven = false;  // joint J within options.ilp_gap of the bound
    // (two_stage J - joint J) / joint J; > 0: the decomposition lost
    double gap() const { return joint.objective > 0 ? (two_stage.objective - joint.objective) / joint.objective : 0; }
};
IlpGapResult compare_ilps(const IlpInstance& instance, const BalanceOptions& options);

}  // namespace prophet::serve
