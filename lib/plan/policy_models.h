// policy_models.h: what `prophet plan` computes per policy: its planning scored under every system model (Eq 6,
// Eq 8, FasterMoE's system, the trace-driven simulator), the static baseline the ratios divide by, and the rows it
// records into the store (docs/plan.md's columns).
#pragma once

#include <string>
#include <vector>

#include "balance/evaluate.h"
#include "balance/moves.h"
#include "store/store.h"

namespace prophet::plan {

// The simulator column of one policy: its system's placements under the system's schedule.
struct SimColumn {
    std::string schedule;         // the policy's system schedule: blockwise (prophet, prophet-oracle), fastermoe
                                  // (fastermoe) or none
    double moe_ms = 0;            // mean over iterations and blocks of the simulated MoE time of a block
    double iteration_ms = 0;      // mean simulated iteration (every block, FNEC/BNEC included)
    double exposed_trans_ms = 0;  // per block, means like moe_ms
    double exposed_agg_ms = 0;
    double owner_move_ms = 0;  // per block: the owner moves simulate_score charged to the policy's layers
                               // (BlockResult::owner_move_s, mean over iterations and layers), in moe_ms and
                               // iteration_ms
    struct Block {
        int64_t iteration = 0;
        int layer = 0;
        double moe_ms = 0;  // the block's simulated MoE time (one of moe_ms's terms)
    };
    std::vector<Block> blocks;  // every (iteration, block) simulated, iteration-major
};

// One policy under every system model. Planners with a cost objective (plans_with_cost_eq) plan once per
// equation when balance.cost_eq = 0 (auto), so each column is a policy planned and scored by one equation;
// the others (and any policy when cost_eq is set) plan once and are scored under every model.
struct PolicyModels {
    PolicyScore eq6;  // planned for and scored by Eq 6 (transfers blocking)
    PolicyScore eq8;  // planned for and scored by Eq 8 (block-wise scheduler hides what its split can)
    SimColumn sim;    // the trace-driven simulator on the placements of the policy's own system (system())
    MoveCost moves;   // the system's owner moves over the trace, summed (each column charges them per iteration)
    const std::string& name() const { return eq6.name; }
    bool skipped() const { return eq6.skipped || eq8.skipped; }
    const std::string& note() const { return eq6.skipped ? eq6.note : eq8.note; }
    // the planning of the policy's own system: Eq 8's for prophet's scheduler, Eq 6's for the others
    const PolicyScore& system() const { return system_cost_eq(name()) == 8 ? eq8 : eq6; }
};

// static's mean MoE-layer time (ms) under each model: the denominators of the xstat* ratios.
struct StaticTimes {
    double eq6_ms = 0, eq8_ms = 0, fastermoe_ms = 0, sim_ms = 0;
};

// The simulator column: the system's placements timed op by op under the system's schedule (sim::system_schedule)
// with the split rule `time` (whole experts, what the scheduler does) and no planning time (deterministic).
SimColumn simulate_column(const PolicyScore& score, const TraceView& view, const CostModel& cost,
                          const EvalSettings& settings);

// The policy planned and scored under Eq 6 and Eq 8, its simulator column and its owner moves (num_layers of the
// trace); allow_skip lets a policy too large for the instance be skipped with a note.
PolicyModels evaluate_models(const std::string& name, const TraceView& view, const CostModel& cost,
                             const EvalSettings& settings, bool allow_skip);

// static's times: from `scores` when static is among them, else static scored once (one planning repeat).
StaticTimes static_times_of(const std::vector<PolicyModels>& scores, const TraceView& view, const CostModel& cost,
                            const EvalSettings& settings);

// The policy's rows of a plan run: an event when skipped or with a solver status, its metrics plan.<policy>.*
// (step 0) and, with record_layers, one plan_results row per iteration and layer and the Sim column per block
// (plan.<policy>.sim_ms, step = iteration, layer = block). Inside the caller's transaction.
void put_policy_results(Store& store, const std::string& run_id, const PolicyModels& m, bool record_layers);

}  // namespace prophet::plan
