// moves.h: the one-off cost of moving experts between two placements of one layer.
//
// An owner is where an expert lives: its weights (and, in training, its optimizer state) move to a new owner once,
// when the placement changes, not every iteration (cost_model.h charges per-iteration Trans/Agg to replicas only;
// training's columns charge the move in the iteration it happens, charge_owner_moves).
// A move is priced like a star Trans (owner to owner), on the cluster's links: flat, the busiest device's sent or
// received bytes over trans_gbit_s; topology-aware, the busiest resource of that traffic (topology.h).
#pragma once

#include <vector>

#include "balance/cost_model.h"
#include "balance/evaluate.h"
#include "balance/placement.h"

namespace prophet {

// Copies of an expert's weights a training move carries: the weights and AdamW's two moments (m, v), each the
// size of the weights.
inline constexpr double kTrainingStateCopies = 3.0;

struct MoveCost {
    int experts = 0;     // experts whose owner changed
    double bytes = 0;    // expert_bytes x state_copies x experts
    double seconds = 0;  // the transfer, as above (0 when nothing moves)
};

// Experts whose owner differs between `before` and `after` (same shape), each carrying state_copies x
// expert_bytes from its old owner to its new one.
MoveCost price_owner_moves(const CostModel& model, const Placement& before, const Placement& after,
                           double state_copies);

// Serving: the (expert, device) copies `after` holds that `before` did not, over every layer ([L] each), each one
// expert's weights (expert_bytes, no optimizer state) sent from e's previous owner, every layer's at once.
// MoveCost::experts counts the copies.
MoveCost price_new_copies(const CostModel& model, const std::vector<Placement>& before,
                          const std::vector<Placement>& after);

// The owner moves of layer score k of an iteration-major [I*L] sequence: against layer k - L (the previous
// iteration's placement of the same layer), or the static layout for iteration 0 (k < L).
MoveCost layer_owner_moves(const std::vector<LayerScore>& layers, size_t k, int num_layers, const CostModel& model,
                           double state_copies);

// Training's charge for owner moves, one rule for every column: layer scores [first, first + L) (one iteration)
// each get their layer_owner_moves seconds added, blocking, to eq6_s, eq8_s and fastermoe_s (and owner_move_s).
// The move carries the expert's weights and optimizer state; nothing hides it (docs/cost-model.md, "Owner moves").
void charge_owner_moves(std::vector<LayerScore>& layers, size_t first, int num_layers, const CostModel& model,
                        double state_copies);

// The one-off moves of a scored policy (evaluate_policy's placements, iteration-major [I][L]), summed: each layer's
// iteration 0 against the static layout, every later iteration against the previous one. `per_iteration`, when
// given, receives the moved experts of each iteration [I].
MoveCost owner_moves_of(const PolicyScore& score, const CostModel& model, int num_layers, double state_copies,
                        std::vector<int>* per_iteration = nullptr);

}  // namespace prophet
