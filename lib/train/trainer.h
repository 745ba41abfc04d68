// trainer.h: one MoE-GPT training run on the ranks of a communicator, expert-parallel under a balancing policy.
//
// Dense parameters are data-parallel (gradients summed across ranks); experts are expert-parallel: expert e's home
// is rank e / (E/D), the only rank that keeps its optimizer state and updates it. Every iteration the policy
// (PolicyRunner) picks a placement per layer; the executor sends parameters to the ranks that compute a replica
// (Trans) and sums their gradients home (Agg). Any placement gives the same losses up to float summation order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "balance/placement.h"
#include "comm/comm.h"
#include "comm/comm_counting.h"
#include "model/data.h"
#include "model/moe_gpt.h"
#include "model/step_model.h"
#include "schedule/timeline.h"
#include "train/plan_ahead.h"
#include "train/policy_runner.h"
#include "train/trace_routing.h"
#include "train/train_config.h"

namespace prophet {

class ExpertParallelExecutor;

struct StepStats {
    int64_t step = 0;
    double loss = 0;           // mean cross-entropy over the global batch (+ aux loss when enabled)
    double lr = 0;
    double grad_norm = 0;      // before clipping
    double step_ms = 0;        // wall time of the step (max over ranks)
    double tokens_per_s = 0;   // global tokens / step time
    double mean_max_mean_load = 0;  // max_i H_i / mean_i H_i under the placement used, mean over layers
    // wall time per activity, max over ranks, summed over layers (ms)
    double a2a_ms = 0, expert_ms = 0, trans_ms = 0, agg_ms = 0, plan_ms = 0, nonexpert_ms = 0;
    int replicas = 0;                   // replicas over all layers
    // where the layers' token-expert assignments were computed, summed over layers (route_split.h's RoutingTally):
    // by their expert's owner, by a replica holder, and of those, sent to the replica from another device (only a
    // split rule, balance.route_to = even_split, flow or max_flow, sends tokens to a replica)
    int64_t tokens_to_owner = 0, tokens_to_replicas = 0, tokens_sent_to_replicas = 0;
    // what Trans/Agg/Plan held up the computation, max over ranks, summed over layers (ms): the whole transfer
    // when blocking, the waits for it under the block-wise schedule (docs/scheduler.md)
    double trans_exposed_ms = 0, agg_exposed_ms = 0, plan_wait_ms = 0;
    // with set_timeline(true), on rank 0: each rank's ops of this step as timeline_json arrays, times in us from
    // the earliest rank's step start
    std::vector<std::string> timelines;  // [D]
    // with set_timeline(true), on every rank: each rank's own step wall time and the part of it no compute-lane
    // op covers (timeline_remainder_ns), ms
    std::vector<double> rank_step_ms, remainder_ms;  // [D]
    std::vector<int64_t> counts;        // [L][D][E] tokens rank d routed to expert e
    std::vector<int64_t> transitions;   // [L-1][E][E] when record_transitions
    std::vector<Placement> placements;  // [L]
};

class Trainer {
  public:
    Trainer(Communicator& comm, const TrainSettings& settings, std::string checkpoint_hash);
    ~Trainer();

    // Runs step next_step() on every rank (collective) and returns its statistics (identical on every rank).
    StepStats step();
    int64_t next_step() const { return next_step_; }

    void set_record_transitions(bool on) { record_transitions_ = on; }
    // Record every op of every rank (schedule/timeline.h) into StepStats::timelines (rank 0).
    void set_timeline(bool on);
    // The communicator the run uses: the one given, or the emulated network in front of it (comm.link_gbps),
    // behind the per-peer byte counter.
    Communicator& comm() { return comm_; }
    // [D] expert-parallel bytes this rank has sent to each rank so far (comm/comm_counting.h says what counts)
    std::vector<uint64_t> sent_bytes() const { return counting_->sent_bytes(); }

    // Collective. Rank 0 gathers the home experts and writes a checkpoint of step next_step() - 1 under dir.
    // run_id (the store's run, when there is one) goes into state.json extra.run_id, so that a later --resume can
    // close the run it continues (train/resume_record.h).
    std::string save(const std::string& dir, const std::string& run_id = "");
    // Collective. Every rank reads the checkpoint (dir or a step directory) and continues after its step.
    void resume(const std::string& path);

    // The host model: the CPU run's own; on a device run, its values as of the last save / resume.
    Model<float>& model() { return *model_; }
    const Model<float>& model() const { return *model_; }
    const TrainSettings& settings() const { return settings_; }
    const DataSource& data() const { return *data_; }

  private:
    void sum_dense_gradients();
    // collective: timelines filled on rank 0, rank_step_ms / remainder_ms of *s on every rank
    std::vector<std::string> gather_timelines(int64_t step_start_ns, int64_t step_end_ns, StepStats* s);
    // records [*cursor, now) as a compute-lane op of the step (block -1) when a timeline is on; cursor = now
    void mark(OpKind kind, int64_t* cursor);
    double global_grad_norm_sq();
    // the constructor's steps: the balancing policy, the Trans/Agg schedule, the device the model runs on
    void set_up_policy(int D);
    void set_up_schedule(int D);
    void set_up_device(int D);
    // step()'s steps: forward, backward and optimizer on this rank's batch (grad_norm, lr, loss into s); the
    // counts [L][D][E] and placements [L]; the transitions [L-1][E][E]; the step's times (max over ranks)
    void train_on_batch(int64_t step, StepStats& s, int64_t* cursor);
    void collect_routing(int64_t step, StepStats& s);
    void count_transitions(StepStats& s);
    // the step's mean max/mean load and routing tally, from the splits the layers ran (s.counts, s.placements set)
    void summarise_routing(StepStats& s);
    void time_step(int64_t t0, int64_t* cursor, StepStats& s);

    std::unique_ptr<Communicator> paced_;  // comm.link_gbps > 0: the emulated network
    std::unique_ptr<CountingCommunicator> counting_;  // in front of paced_ or the given one
    Communicator& comm_;
    TrainSettings settings_;
    std::string checkpoint_hash_;
    std::unique_ptr<Model<float>> model_;
    std::unique_ptr<DataSource> data_;
    std::unique_ptr<PolicyRunner> policy_;
    std::unique_ptr<ExpertParallelExecutor> executor_;
    std::unique_ptr<StepModel> step_model_;  // device.kind: the CPU model_ itself, or a GPU copy of it
    bool on_device_ = false;                 // device.kind != cpu
    bool uses_executor_ = true;              // the MoE layers run the executor (not: one device rank)
    std::unique_ptr<PlanAhead> plan_ahead_;     // schedule.mode = blockwise
    std::unique_ptr<OpTimeline> timeline_;      // set_timeline(true)
    std::unique_ptr<TraceRouter> router_;       // routing.source = "trace"
    std::vector<char> skip_;        // [tensors] 1 for expert tensors this rank is not home of
    std::vector<char> home_experts_;  // [tensors] 1 for the expert tensors this rank is home of
    std::vector<int32_t> inputs_, targets_;  // [B/D, T]
    int64_t next_step_ = 0;
    bool record_transitions_ = false;
};

// The load balance a step achieved: max_i H_i / mean_i H_i (balance/device_load.h's max_mean_load) of each
// layer's flow under the placement it used, summed over layers, then divided by L. counts: [L][D][E] tokens rank d
// routed to expert e; placements: [L].
double step_mean_max_mean_load(const std::vector<int64_t>& counts, const std::vector<Placement>& placements, int D,
                               int E, RouteRule route_rule);

// sha256 over the keys that change the numbers a resumed run must repeat (model.*, data.*, run.seed, the
// optimizer and schedule keys, balance.*); store paths, logging and checkpoint keys may differ on resume.
std::string checkpoint_config_hash(const Config& config);

}  // namespace prophet
