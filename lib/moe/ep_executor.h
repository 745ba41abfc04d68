// ep_executor.h: ExpertParallelExecutor, the MoeExecutor (model/moe_executor.h) that runs the experts of every
// MoE layer across the ranks of a Communicator under any placement (balance/placement.h). docs/expert-parallelism.md
// has the long form; the stages are the flat functions of layout.h, dispatch.h, experts.h and trans_agg.h.
//
//   forward(l):  layout -> notify (all_gather counts [D*E]) -> plan (provider) -> Trans -> dispatch -> experts
//                -> combine -> out (sum in k order, as LocalMoeExecutor)
//   backward(l): combine backward (dgate_w, dy) -> dispatch dy -> experts backward (dW +=) -> combine dx -> dh
//                -> Agg (group -> home, then the non-home copies' gradients are zeroed)
//
// Every rank holds all experts' parameters (the model arena), but only expert e's home rank e / (E/D) keeps the
// authoritative copy and updates it: the trainer passes optimizer_skip_mask() to adamw_step and counts only home
// experts in the grad norm (home_expert_mask()). Non-home parameter copies are stale except right after Trans.
//
// Typical use on each rank (comm from make_local_group or make_mpi_communicator):
//   ExpertParallelExecutor ep(comm, model, RouteRule::kOwner);
//   ep.set_placement_provider([&](int layer, const int64_t* counts) { return policy(layer, counts); });
//   model_set_executor(model, &ep);
//   ... forward/backward ...; const std::vector<char> skip = ep.optimizer_skip_mask(model.layout);
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "balance/placement.h"
#include "model/moe_executor.h"
#include "moe/layout.h"

namespace prophet {

class Communicator;
template <typename Float>
struct Model;
struct ParamLayout;

// This process's copy of every expert: params[l*E + e] -> w1 [C,F] then w2 [F,C] (2*C*F floats, contiguous);
// grads the same layout.
struct ExpertStorage {
    std::vector<float*> params;  // [L*E]
    std::vector<float*> grads;   // [L*E]
};
ExpertStorage expert_storage_from_model(Model<float>& model);

// What one layer did in the last step on this rank. forward(l) resets it; backward(l) completes it. Times in ms.
struct MoeLayerStats {
    std::vector<int64_t> counts;   // [D*E] global routing matrix of this step (the routing trace)
    Placement placement;           // the placement used
    std::vector<int> destination;  // [D*E] routing_destination(counts, placement, rule)
    int64_t rows_sent = 0;         // rows this rank sent to other ranks, one direction
    int64_t rows_received = 0;     // rows this rank received from other ranks, one direction
    int64_t rows_computed = 0;     // rows this rank's experts computed (its own included)
    double layout_ms = 0;          // layout + notify (counts all_gather) + placement-hash all_gather + layout build
    double plan_ms = 0;            // provider call + placement validation + routing destination (no communication)
    double trans_ms = 0;
    double dispatch_fwd_ms = 0;    // pack + all_to_all_v + sort
    double combine_fwd_ms = 0;     // unsort + all_to_all_v + weighted sum
    double dispatch_bwd_ms = 0;    // combine backward (dgate_w, dy) + all_to_all_v + sort
    double combine_bwd_ms = 0;     // unsort + all_to_all_v + sum into dh
    double expert_fwd_ms = 0;
    double expert_bwd_ms = 0;
    double agg_ms = 0;

    double a2a_ms() const { return dispatch_fwd_ms + combine_fwd_ms + dispatch_bwd_ms + combine_bwd_ms; }
    double expert_ms() const { return expert_fwd_ms + expert_bwd_ms; }
};

class ExpertParallelExecutor final : public MoeExecutor<float> {
  public:
    // counts [D*E]: global, this step, this layer. Must return the same placement on every rank.
    using PlacementProvider = std::function<Placement(int layer, const int64_t* counts)>;

    // comm: all ranks of the expert-parallel group (D = comm->size(), E % D == 0); storage [L*E] this process's
    // expert copies. rule: where non-holders send their tokens (RouteRule::kOwner is Pro-Prophet's rule).
    ExpertParallelExecutor(Communicator* comm, int L, int E, int K, int C, int F, RouteRule rule,
                           ExpertStorage storage);
    ExpertParallelExecutor(Communicator* comm, Model<float>& model, RouteRule rule);

    void forward(int layer, int N, const float* h, const int* expert_idx, const float* gate_w, float* out) override;
    void backward(int layer, int N, const float* dout, float* dh, float* dgate_w) override;
    const char* name() const override { return "expert_parallel"; }

    // nullptr / empty: the static placement every step
    void set_placement_provider(PlacementProvider provider) { provider_ = std::move(provider); }
    // After the provider runs, all-gather a hash of its placement and fail if ranks disagree (default on; one
    // 8-byte all_gather per layer)
    void set_check_placement(bool check) { check_placement_ = check; }

    int rank() const;
    int num_ranks() const { return D_; }
    int home_of(int expert) const { return expert / (E_ / D_); }
    // [L*E] 1 where this rank is the expert's home
    std::vector<char> home_expert_mask() const;
    // per tensor index of layout: 1 for expert tensors whose home is another rank (adamw_step's skip)
    std::vector<char> optimizer_skip_mask(const ParamLayout& layout) const;
    // per tensor index of layout: 1 for expert tensors whose home is this rank (grad_norm_sq's include for the
    // expert part; dense tensors are 0, the trainer counts them once)
    std::vector<char> home_expert_tensor_mask(const ParamLayout& layout) const;

    const MoeLayerStats& layer_stats(int layer) const { return layers_[layer].stats; }
    MoeLayerStats step_stats() const;  // times and rows summed over layers (counts/placement left empty)

    // ---- test hooks
    // expert(x) = x: no GEMMs, no gradients; dispatch/combine/Trans/Agg run as usual
    void set_identity_experts(bool identity) { identity_experts_ = identity; }
    const MoeDispatchLayout& dispatch_layout(int layer) const { return layers_[layer].layout; }
    // [M_recv,C] the rows this rank received for layer in the last forward, in sorted order (layout.h)
    const std::vector<float>& expert_inputs(int layer) const { return layers_[layer].x; }

  private:
    struct LayerState {
        MoeDispatchLayout layout;
        MoeLayerStats stats;
        std::vector<float> gate_w;  // [N*K] copy
        std::vector<float> y_src;   // [M_send,C] expert outputs back at the source, in slot order
        std::vector<float> x;       // [M_recv,C] sorted expert inputs
        std::vector<float> pre;     // [M_recv,F]
        std::vector<float> act;     // [M_recv,F]
    };

    Placement plan(int layer, const int64_t* counts);
    void check_same_placement(int layer, const Placement& placement);

    Communicator* comm_;
    int L_, E_, K_, C_, F_, D_;
    RouteRule rule_;
    ExpertStorage storage_;
    PlacementProvider provider_;
    bool check_placement_ = true;
    bool identity_experts_ = false;
    std::vector<LayerState> layers_;  // [L]
    // scratch shared by the layers
    std::vector<int64_t> local_counts_;  // [E]
    std::vector<float> send_;            // [M_send,C]
    std::vector<float> recv_;            // [M_recv,C]
    std::vector<float> sorted_;          // [M_recv,C] y or dy or dx in sorted order
    std::vector<float> dpre_;            // [M_recv,F]
    std::vector<float> dx_sorted_;       // [M_recv,C]
};

}  // namespace prophet
