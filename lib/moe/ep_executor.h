// ep_executor.h: ExpertParallelExecutor, the MoeExecutor (model/moe_executor.h) that runs the experts of every
// MoE layer across the ranks of a Communicator under any placement (balance/placement.h). docs/expert-parallelism.md
// has the long form; the stages are the flat functions of layout.h, dispatch.h, experts.h and trans_agg.h.
//
//   forward(l):  layout -> notify (all_gather counts [D*E]) -> plan (provider) -> route (the rule's split of every
//                (device, expert) group over the expert's holders, balance/route_split.h) -> Trans -> dispatch
//                -> experts -> combine -> out (sum in k order, as LocalMoeExecutor)
//   backward(l): combine backward (dgate_w, dy) -> dispatch dy -> experts backward (dW +=) -> combine dx -> dh
//                -> Agg (group -> home, then the non-home copies' gradients are zeroed)
//
// With set_schedule(blockwise) (docs/scheduler.md) the placement of every layer comes from an ahead provider
// (planned from the previous iteration's counts, on a planner thread), and Trans/Agg run as tasks on a
// communication stream (an OrderedWorker thread) beside computation: Trans(l+1) beside FEC(l) and FNEC(l+1),
// Agg(l+1) beside BNEC(l+1) and BEC(l); the main thread waits for a part only right before the stage that needs
// it, and finish_backward() waits for every Agg (the optimizer must not run before). Results are identical to the
// blocking order: the same transfers with the same sums, only at other times.
// With set_schedule(fastermoe) FasterMoE's own overlap (papers/pro-prophet.md §7 "Execution"): plan on this step's
// counts as blocking, then Trans(l) whole on the communication stream beside the dispatch all-to-all (waited right
// before the expert compute), and Agg(l) whole beside the backward combine all-to-all (waited at the end of
// backward(l): what follows the block waits for both, as the simulator's kFasterMoE). Identical results, too.
//
// The experts' FFN runs in an ExpertCompute (model/expert_compute.h): on this CPU over the storage by default, or
// on a GPU (cuda/gpu_expert_compute.h), which gets the sorted rows as host buffers and copies the moving experts'
// parameters / gradients between its device arena and the storage around Trans / Agg (host staging). Everything
// else (layout, notify, plan, dispatch, combine, Trans, Agg) is this one code path on host buffers.
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
#include <memory>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"
#include "balance/route_split.h"
#include "core/huge_pages.h"
#include "model/expert_compute.h"
#include "model/moe_executor.h"
#include "moe/cpu_expert_compute.h"
#include "moe/layout.h"
#include "schedule/split.h"
#include "schedule/timeline.h"
#include "schedule/worker.h"

namespace prophet {

class Communicator;
struct ParamLayout;

// What one layer did in the last step on this rank. forward(l) resets it; backward(l) completes it. Times in ms.
struct MoeLayerStats {
    std::vector<int64_t> counts;   // [D*E] global routing matrix of this step (the routing trace)
    Placement placement;           // the placement used
    RouteSplit route;              // every (src, e) group's parts per holder: route_split(counts, placement, rule)
    int64_t rows_sent = 0;         // rows this rank sent to other ranks, one direction
    int64_t rows_received = 0;     // rows this rank received from other ranks, one direction
    int64_t rows_computed = 0;     // rows this rank's experts computed (its own included)
    double layout_ms = 0;          // layout + notify (counts all_gather) + placement-hash all_gather + layout build
    double plan_ms = 0;            // provider call + placement validation + the routing split (kFlow: its broadcast)
    double trans_ms = 0;
    double dispatch_fwd_ms = 0;    // pack + all_to_all_v + sort
    double combine_fwd_ms = 0;     // unsort + all_to_all_v + weighted sum
    double dispatch_bwd_ms = 0;    // combine backward (dgate_w, dy) + all_to_all_v + sort
    double combine_bwd_ms = 0;     // unsort + all_to_all_v + sum into dh
    double expert_fwd_ms = 0;
    double expert_bwd_ms = 0;
    double agg_ms = 0;
    // Time this layer's Trans/Agg held up this rank's computation: the whole transfer when blocking; in the
    // block-wise schedule, the main thread's waits for them. trans_ms / agg_ms stay the transfers' own time.
    double trans_exposed_ms = 0;
    double agg_exposed_ms = 0;
    double plan_wait_ms = 0;       // block-wise: the main thread's wait for the planner (0 when it was ahead)

    double a2a_ms() const { return dispatch_fwd_ms + combine_fwd_ms + dispatch_bwd_ms + combine_bwd_ms; }
    double expert_ms() const { return expert_fwd_ms + expert_bwd_ms; }
};

// Where Trans/Agg run (docs/scheduler.md): blocking in order on the main thread; Pro-Prophet's block-wise
// scheduler (split parts beside the neighbouring compute); FasterMoE's (whole, beside one all-to-all each).
enum class EpScheduleMode { kBlocking, kBlockwise, kFasterMoE };

// The schedule's settings. The split (block-wise only) uses offline estimates only (every rank must split alike).
struct EpSchedule {
    EpScheduleMode mode = EpScheduleMode::kBlocking;
    TransferSplitRule split = TransferSplitRule::kTime;
    double fnec_s = 0;             // one block's forward non-expert compute (the Trans budget beside it)
    double bnec_s = 0;             // one block's backward non-expert compute (the Agg budget)
    double expert_transfer_s = 0;  // one expert's parameters (or gradient) over one link
};

class ExpertParallelExecutor final : public MoeExecutor<float> {
  public:
    // counts [D*E]: global, this step, this layer. Must return the same placement on every rank.
    using PlacementProvider = std::function<Placement(int layer, const int64_t* counts)>;

    // comm: all ranks of the expert-parallel group (D = comm->size(), E % D == 0); storage [L*E] this process's
    // expert copies. rule: where the tokens for a replicated expert go (RouteRule::kOwner is Pro-Prophet's rule;
    // kEvenSplit, kFlow and kMaxFlow split a (device, expert) group over the expert's holders, balance/route_split.h).
    ExpertParallelExecutor(Communicator* comm, int L, int E, int K, int C, int F, RouteRule rule,
                           ExpertStorage storage);
    ExpertParallelExecutor(Communicator* comm, Model<float>& model, RouteRule rule);

    void forward(int layer, int N, const float* h, const int* expert_idx, const float* gate_w, float* out) override;
    void backward(int layer, int N, const float* dout, float* dh, float* dgate_w) override;
    const char* name() const override { return "expert_parallel"; }
    void block_forward_begin(int layer) override;
    // Block-wise and FasterMoE: waits for every Trans/Agg still in flight (call after model_backward, before the
    // optimizer) and completes the layers' transfer times. Blocking mode: nothing to wait for.
    void finish_backward();

    // Before the first step. Blockwise needs set_ahead_provider (FasterMoE plans with the placement provider, as
    // blocking). Both need a communicator that allows one extra thread (the communication stream) to call
    // isend/irecv while the main thread runs collectives.
    void set_schedule(const EpSchedule& schedule);
    const EpSchedule& schedule() const { return schedule_; }
    // Block-wise planning: ahead(layer) returns this step's placement of layer before its counts exist (it may
    // block on a planner); observe(layer, counts [D*E]) hands this step's counts to the planner right after the
    // counts exchange. Both must behave identically on every rank.
    using AheadProvider = std::function<Placement(int layer)>;
    using CountsObserver = std::function<void(int layer, const int64_t* counts)>;
    void set_ahead_provider(AheadProvider ahead, CountsObserver observe) {
        ahead_ = std::move(ahead);
        observe_ = std::move(observe);
    }
    // Record every op of this rank (nullptr: off). Not owned.
    void set_timeline(OpTimeline* timeline) { timeline_ = timeline; }
    // Serving: parameters never change, so the copies a Trans sent stay current (a serving system keeps replicas
    // resident): each layer's Trans sends only to the ranks that hold an expert now but did not at that layer's
    // last Trans, and nothing when the placement is unchanged. Blocking mode only; never in training, where every
    // step's update makes the copies stale.
    void set_resident_replicas(bool on) { resident_replicas_ = on; }

    // Where the experts' FFN runs (model/expert_compute.h; not owned). nullptr (the default): on this CPU, on the
    // storage's host copies. A device compute (cuda/gpu_expert_compute.h) gets the sorted rows and copies its
    // experts' parameters / gradients to and from the host copies around every Trans / Agg; under the block-wise
    // schedule those staging calls run on the communication thread, inside the transfer's task.
    void set_expert_compute(ExpertCompute* compute);
    const char* expert_compute_name() const { return compute_->name(); }

    // kFlow's and kMaxFlow's prices (the run's cost model, as plan and sim pass to compute_flow); unset: one unit
    // per token. Under kFlow and kMaxFlow rank 0 solves each layer's split and broadcasts it (the LP's warm start
    // depends on the thread's earlier solves, so ranks never solve it apart; the max-flow split is deterministic,
    // but one solve is cheaper than D); the other rules are arithmetic every rank repeats.
    void set_route_pricing(const CostModel& cost) {
        route_cost_ = cost;
        route_priced_ = true;
    }
    RouteRule route_rule() const { return rule_; }

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
    const RowsVector<float>& expert_inputs(int layer) const { return layers_[layer].x; }

  private:
    struct LayerState {
        MoeDispatchLayout layout;
        MoeLayerStats stats;
        std::vector<float> gate_w;  // [N*K] copy
        RowsVector<float> y_src;    // [M_send,C] expert outputs back at the source, in slot order
        RowsVector<float> x;        // [M_recv,C] sorted expert inputs
    };

    Placement plan(int layer, const int64_t* counts);
    RouteSplit route_layer(const MoeLayerStats& stats);  // the layer's split (kFlow: collective, see above)
    Placement validate(int layer, Placement p);
    void check_same_placement(int layer, const Placement& placement);
    // block-wise helpers
    void fetch_ahead(int layer);  // placement + split of layer (collective: the placement check)
    // A layer's moving experts divided between its two compute windows ([E] each, 1 = in that part): beside the
    // non-expert compute (budget_s of it, schedule/split.h) and beside the expert compute; layer 0 has no earlier
    // block's expert compute, so all of it goes beside the non-expert part.
    struct TransferParts {
        std::vector<uint8_t> beside_nec, beside_expert;
    };
    TransferParts split_layer(int layer, const Placement& placement, double budget_s) const;
    // placement: not owned, must stay unchanged until the task is waited for (ahead_placement_ or the layer's stats)
    int64_t submit_transfer(bool trans, int layer, int part, std::vector<uint8_t> only, const Placement* placement);
    void wait_transfer(bool trans, int layer, int64_t ticket);
    void record(OpKind kind, int block, int64_t start_ns, int64_t end_ns, int part = 0);
    // the steps of forward() and backward(), in order (each records its ops and its part of the layer's stats)
    void forward_layout(int layer, int N, const int* expert_idx);
    int64_t forward_trans(int layer);  // FasterMoE's Trans ticket, else 0
    void forward_dispatch(int layer, const float* h);
    void forward_experts(int layer);
    void forward_combine(int layer, int N, const float* gate_w, float* out);
    void backward_dispatch(int layer, const float* dout, float* dgate_w);
    void backward_experts(int layer);
    void backward_combine(int layer, float* dh);
    void backward_agg(int layer, int64_t fastermoe_agg);
    // the all-to-all of forward_dispatch and backward_dispatch: buffers sized for the layer's layout (send_,
    // recv_, and `sorted` [M_recv,C]), then the rows packed in send_ exchanged (recorded as `kind` from
    // packed_ns) and sorted by expert into `sorted` (recorded as kPack)
    void size_exchange_buffers(int layer, RowsVector<float>& sorted);
    void exchange_and_sort(int layer, OpKind kind, int64_t packed_ns, RowsVector<float>& sorted);

    Communicator* comm_;
    int L_, E_, K_, C_, F_, D_;
    RouteRule rule_;
    CostModel route_cost_;
    bool route_priced_ = false;
    ExpertStorage storage_;
    CpuExpertCompute cpu_compute_;     // the default compute, on storage_
    ExpertCompute* compute_;           // cpu_compute_ or the one set_expert_compute installed
    PlacementProvider provider_;
    bool check_placement_ = true;
    bool identity_experts_ = false;
    bool resident_replicas_ = false;
    std::vector<Placement> last_trans_;  // [L] the placement each layer's last Trans used (resident replicas)
    std::vector<LayerState> layers_;  // [L]
    // block-wise and FasterMoE schedules
    EpSchedule schedule_;
    AheadProvider ahead_;
    CountsObserver observe_;
    OpTimeline* timeline_ = nullptr;
    OpTimeline transfers_;                          // comm-lane spans of this step (always kept)
    std::unique_ptr<OrderedWorker> comm_stream_;    // Trans/Agg tasks (threaded unless blocking)
    std::vector<Placement> ahead_placement_;        // [L] this step's placements, fetched before each layer
    std::vector<TransferParts> trans_parts_;        // [L] Trans beside FNEC(l) / beside FEC(l-1)
    std::vector<int64_t> trans_ticket_;             // [L] last Trans part submitted for the layer (0: none)
    std::vector<int64_t> agg_ticket_;               // [L] last Agg part submitted (0: none)
    std::vector<std::vector<uint8_t>> agg_pending_; // [L][E] Agg part still to submit beside BEC(l-1)
    std::vector<double> carried_trans_wait_ms_;     // [L] waits for layer l's Trans made during forward(l-1)
    double carried_plan_wait_ms_ = 0;               // fetch_ahead's last wait for the planner
    double layer0_plan_wait_ms_ = 0, next_plan_wait_ms_ = 0;
    // scratch shared by the layers
    std::vector<int64_t> local_counts_;  // [E]
    RowsVector<float> send_;             // [M_send,C]
    RowsVector<float> recv_;             // [M_recv,C]
    RowsVector<float> sorted_;           // [M_recv,C] y or dy or dx in sorted order
    RowsVector<float> dx_sorted_;        // [M_recv,C]
};

}  // namespace prophet
