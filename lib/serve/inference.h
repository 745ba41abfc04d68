// inference.h: one expert-parallel forward-only pass of a MoE-GPT over a batch, with per-layer per-rank timings.
//
// Every rank holds every parameter (a freshly initialised model, or a checkpoint loaded on every rank), so a
// placement that only moves owners needs no parameter traffic; replicas still go by Trans every batch, as the
// executor does in training. The experts run in an ExpertParallelExecutor (lib/moe) under the placement its
// provider returns; nothing is computed backward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "balance/placement.h"
#include "comm/comm.h"
#include "model/data.h"
#include "model/moe_gpt.h"

namespace prophet {
class ExpertParallelExecutor;
}

namespace prophet::serve {

// One batch, identical on every rank. Times in ms.
struct BatchResult {
    int64_t step = 0;                   // the data step of the batch
    double forward_ms = 0;              // wall time of the whole forward, max over ranks
    double loss = 0;                    // mean cross-entropy over the global batch
    std::vector<double> expert_ms;      // [L][D] expert token processing (the two GEMMs) of each rank
    std::vector<double> a2a_ms;         // [L][D] dispatch + combine all-to-all (pack, exchange, sort / reduce)
    std::vector<double> layer_ms;       // [L][D] every forward stage of the MoE layer: layout and counts
                                        //   exchange, plan, Trans, dispatch, experts, combine
    std::vector<int64_t> rows_computed; // [L][D] token-expert rows each rank's experts computed
    std::vector<int64_t> counts;        // [L][D][E] tokens rank d routed to expert e
    std::vector<int64_t> transitions;   // [L-1][E][E] when asked for
    // the layer-to-layer token path moved on the real ranks after the forward (token_path_exchange.h), when set
    std::vector<int64_t> token_path_route;  // [L-1][D][D] (e1, e2) pairs src -> dst per layer boundary
    std::vector<double> token_path_ms;      // [L-1] wall time of each boundary's exchange, max over ranks
    std::vector<int64_t> token_path_bytes;  // [L-1] bytes that left their rank per boundary
    std::vector<Placement> placements;  // [L]
};

// Tokens at expert e1 of layer l that go to expert e2 of layer l+1, every (a, b) pair of a token's K choices:
// dispatch_idx [L,N,K] (-1 = dropped, skipped) -> out [L-1][E][E] (added to).
void count_transitions(const int* dispatch_idx, int L, int N, int K, int E, int64_t* out);

class InferenceEngine {
  public:
    using PlacementProvider = std::function<Placement(int layer, const int64_t* counts)>;

    // model: this rank's copy (every parameter present); rule: where non-holders send their tokens
    InferenceEngine(Communicator& comm, Model<float>& model, RouteRule rule);
    ~InferenceEngine();

    // nullptr: the static placement
    void set_placement_provider(PlacementProvider provider);
    // after each forward, also move the layer-to-layer token path's activations (token_path_exchange.h)
    void set_exchange_token_path(bool on) { exchange_token_path_ = on; }

    // Collective: the forward of global batch `step` of `data` (this rank takes rank_sequences(B, rank, D)).
    BatchResult forward(const DataSource& data, int64_t step, bool record_transitions);

    Model<float>& model() { return model_; }

  private:
    Communicator& comm_;
    Model<float>& model_;
    std::unique_ptr<ExpertParallelExecutor> executor_;
    RouteRule rule_;
    bool exchange_token_path_ = false;
    std::vector<int32_t> inputs_, targets_;  // [B/D, T]
};

}  // namespace prophet::serve
