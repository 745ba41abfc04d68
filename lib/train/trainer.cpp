#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "balance/device_load.h"
#include "balance/route_split.h"
#include "comm/comm_paced.h"
#include "core/error.h"
#include "core/sha256.h"
#include "core/timer.h"
#include "kernels/optim.h"
#include "model/checkpoint.h"
#include "moe/ep_executor.h"
#include "train/device.h"
#include "train/resume_check.h"
#include "train/traffic.h"

namespace prophet {

std::string checkpoint_config_hash(const Config& config) {
    std::string text;
    for (const auto& [key, value] : config.flat()) {
        const bool math = key.rfind("model.", 0) == 0 || key.rfind("data.", 0) == 0 || key.rfind("balance.", 0) == 0 ||
                          key == "run.seed" || key == "train.steps" || key == "train.lr" || key == "train.min_lr" ||
                          key == "train.warmup_steps" || key == "train.weight_decay" || key == "train.grad_clip";
        // recorded routing changes the numbers; the default (gate) adds nothing, so older checkpoints still match
        const bool routed = key.rfind("routing.", 0) == 0 && config.get_string("routing.source") == "trace";
        if (math || routed) text += key + " = " + value + "\n";
    }
    return sha256_hex(text);
}

namespace {

// A feature that calls MPI from a second thread of the rank: refuse it (exit 6) unless MPI allows that.
void require_thread_multiple(const Communicator& comm, const std::string& feature) {
    if (comm.name() == std::string("mpi") && mpi_thread_level() != "MPI_THREAD_MULTIPLE")
        throw Error(kExitDistributed, feature + " needs MPI_THREAD_MULTIPLE, but this MPI provided " +
                                          mpi_thread_level());
}

std::unique_ptr<Communicator> paced_if_asked(Communicator& comm, const TrainSettings& settings) {
    if (settings.link_gbps <= 0) return nullptr;
    require_thread_multiple(comm, "comm.link_gbps (the emulated link's wire thread calls MPI)");
    return make_paced_communicator(
        &comm, LinkEmulation{settings.link_gbps * 1e9 / 8, settings.link_latency_us * 1e-6, settings.comm_timeout_s});
}

}  // namespace

Trainer::Trainer(Communicator& comm, const TrainSettings& settings, std::string checkpoint_hash)
    : paced_(paced_if_asked(comm, settings)),
      counting_(std::make_unique<CountingCommunicator>(paced_ ? paced_.get() : &comm)),
      comm_(*counting_),
      settings_(settings),
      checkpoint_hash_(std::move(checkpoint_hash)) {
    const ModelConfig& m = settings_.model;
    const int D = comm_.size();
    model_ = std::make_unique<Model<float>>(m);
    data_ = make_data_source(settings_.data, m.T, m.B);
    set_up_policy(D);
    executor_ = std::make_unique<ExpertParallelExecutor>(&comm_, *model_, settings_.balance.route_rule);
    executor_->set_route_pricing(
        settings_.cost);  // kFlow's and kMaxFlow's prices: the planner's cost model, as plan and sim
    executor_->set_placement_provider(
        [this](int layer, const int64_t* counts) { return policy_->plan(next_step_, layer, counts); });
    model_set_executor(*model_, static_cast<MoeExecutor<float>*>(executor_.get()));
    if (!settings_.routing_trace.empty()) {
        router_ = std::make_unique<TraceRouter>(load_trace(settings_.routing_trace), m.L, m.E, comm_.rank(), D);
        model_->route_override = [this](int layer, int N, int K, int* expert_idx) {
            router_->route(next_step_, layer, N, K, expert_idx);
        };
    }
    set_up_schedule(D);
    set_up_device(D);
    skip_ = executor_->optimizer_skip_mask(model_->layout);
    home_experts_ = executor_->home_expert_tensor_mask(model_->layout);
    const int B_local = m.B / D;
    inputs_.resize(static_cast<size_t>(B_local) * m.T);
    targets_.resize(inputs_.size());
}

void Trainer::set_up_policy(int D) {
    const ModelConfig& m = settings_.model;
    const int num_nodes = std::max(1, D / std::max(1, settings_.cost.cluster.devices_per_node));
    policy_ = std::make_unique<PolicyRunner>(settings_.policy, m.L, D, m.E, settings_.cost, settings_.balance,
                                             settings_.profile_iterations, num_nodes);
    if (settings_.replicas_within_host) policy_->set_rank_hosts(gather_rank_hosts(comm_));  // collective
    if (policy_->plans_in_own_process()) {  // external: one process, on rank 0; the others get its placements
        if (settings_.schedule_blockwise)
            throw_config_error("schedule.mode", "blockwise",
                               "plans ahead on a second thread, and an external policy answers on one pipe",
                               "--set schedule.mode=none (or fastermoe) with balance.policy = external");
        if (D > 1)
            policy_->set_root_broadcast(comm_.rank(),
                                        [this](void* data, size_t bytes) { comm_.broadcast(data, bytes, 0); });
    }
}

void Trainer::set_up_schedule(int D) {
    const ModelConfig& m = settings_.model;
    if (settings_.schedule_blockwise) {
        require_thread_multiple(comm_, "schedule.mode = blockwise (Trans/Agg run on a communication thread)");
        EpSchedule sched;
        sched.mode = EpScheduleMode::kBlockwise;
        sched.split = parse_transfer_split_rule(settings_.schedule_split);
        // offline estimates, identical on every rank: the cluster file's non-expert times, and one expert's
        // parameters over the emulated link (or the cluster's Trans bandwidth)
        sched.fnec_s = settings_.cost.fnec_s();
        sched.bnec_s = settings_.cost.bnec_s();
        const double expert_bytes = 2.0 * m.C * m.hidden_size() * sizeof(float);
        const double link = settings_.link_gbps > 0 ? settings_.link_gbps * 1e9 / 8
                                                    : settings_.cost.cluster.trans_bytes_per_s;
        sched.expert_transfer_s = link > 0 ? expert_bytes / link : 0.0;
        executor_->set_schedule(sched);
        plan_ahead_ = std::make_unique<PlanAhead>(*policy_, m.L);
        executor_->set_ahead_provider(
            [this](int layer) { return plan_ahead_->placement(next_step_, layer); },
            [this](int layer, const int64_t* counts) { plan_ahead_->observe(next_step_, layer, counts); });
    }
    if (settings_.schedule_fastermoe) {  // FasterMoE's overlap: the same planner in order, Trans/Agg beside a2a
        require_thread_multiple(comm_, "schedule.mode = fastermoe (Trans/Agg run on a communication thread)");
        EpSchedule sched;
        sched.mode = EpScheduleMode::kFasterMoE;
        executor_->set_schedule(sched);
    }
}

void Trainer::set_up_device(int D) {
    // the model operations on the run's device; the CPU one drives model_ itself (with the executor above), a
    // GPU one keeps its own copy and syncs model_ only for checkpoints (save / resume)
    // (ranks of one host share its GPUs round-robin: local rank % devices; gather_rank_hosts is a collective)
    const int local_rank = settings_.device_kind != "cpu" && D > 1 ? local_rank_of(gather_rank_hosts(comm_), comm_.rank()) : 0;
    step_model_ = make_step_model(settings_.device_kind, settings_.precision, *model_, local_rank, comm_.rank());
    on_device_ = settings_.device_kind != "cpu";
    // one device rank runs every expert inside the device model; several run the executor, host-staged: its
    // layout, all-to-alls, Trans and Agg on host buffers over comm_, the experts on the device (docs/gpu.md)
    uses_executor_ = !on_device_ || D > 1;
    if (on_device_ && uses_executor_) {
        executor_->set_expert_compute(step_model_->expert_compute(*model_));
        step_model_->set_moe_executor(executor_.get());
    }
}

Trainer::~Trainer() = default;

void Trainer::set_timeline(bool on) {
    timeline_ = on ? std::make_unique<OpTimeline>() : nullptr;
    executor_->set_timeline(timeline_.get());
    step_model_->set_timeline(timeline_.get());  // the CPU model's host marks, or a GPU's event pairs
    if (plan_ahead_) plan_ahead_->set_timeline(timeline_.get());
}

void Trainer::sum_dense_gradients() {
    step_model_->reduce_dense_grads([this](float* data, size_t n) { comm_.all_reduce_sum(data, n); });
}

double Trainer::global_grad_norm_sq() {
    // dense gradients are identical on every rank after the all-reduce: count them once (on rank 0); expert
    // gradients are summed at their home (Agg), so every rank counts the experts it is home of
    std::vector<char> include = home_experts_;
    if (comm_.rank() == 0)
        for (int i = 0; i < model_->num_tensors(); ++i)
            if (!model_->tensor(i).is_expert) include[i] = 1;
    double norm_sq = step_model_->grad_norm_sq(&include);
    comm_.all_reduce_sum(&norm_sq, 1);
    return norm_sq;
}

void Trainer::mark(OpKind kind, int64_t* cursor) { mark_compute(timeline_.get(), kind, -1, cursor); }

std::vector<std::string> Trainer::gather_timelines(int64_t step_start_ns, int64_t step_end_ns, StepStats* s) {
    const int D = comm_.size();
    std::vector<int64_t> starts(D);  // [D]
    comm_.all_gather(&step_start_ns, sizeof(int64_t), starts.data());
    const int64_t origin = *std::min_element(starts.begin(), starts.end());
    const std::vector<OpRecord> ops = timeline_->take();
    // this rank's step length and the part of it no compute-lane op covers, both ms, gathered to every rank
    const double own[2] = {(double)(step_end_ns - step_start_ns) * 1e-6,
                           (double)timeline_remainder_ns(ops, step_start_ns, step_end_ns) * 1e-6};
    std::vector<double> all_own(2 * (size_t)D);  // [D][2]
    comm_.all_gather(own, sizeof own, all_own.data());
    s->rank_step_ms.resize(D);
    s->remainder_ms.resize(D);
    for (int d = 0; d < D; d++) {
        s->rank_step_ms[d] = all_own[2 * (size_t)d];
        s->remainder_ms[d] = all_own[2 * (size_t)d + 1];
    }
    const std::string mine = timeline_json(ops, origin);
    const int64_t length = (int64_t)mine.size();
    std::vector<int64_t> lengths(D);  // [D]
    comm_.all_gather(&length, sizeof(int64_t), lengths.data());
    const size_t width = (size_t)*std::max_element(lengths.begin(), lengths.end());
    std::string padded = mine;
    padded.resize(width, ' ');
    std::string all(width * D, ' ');
    comm_.all_gather(padded.data(), width, all.data());
    std::vector<std::string> out;
    if (comm_.rank() == 0)
        for (int d = 0; d < D; d++) out.push_back(all.substr(width * d, (size_t)lengths[d]));
    return out;
}

double step_mean_max_mean_load(const std::vector<int64_t>& counts, const std::vector<Placement>& placements, int D,
                               int E, RouteRule route_rule) {
    const int L = static_cast<int>(placements.size());
    double load_sum = 0;
    for (int l = 0; l < L; ++l) {
        const LayerFlow flow =
            compute_flow(counts.data() + static_cast<size_t>(l) * D * E, D, E, placements[l], route_rule);
        load_sum += max_mean_load(flow.computed.data(), D);
    }
    return load_sum / L;
}

void Trainer::train_on_batch(int64_t step, StepStats& s, int64_t* cursor) {
    const ModelConfig& m = settings_.model;
    const int D = comm_.size();
    const auto [seq_begin, seq_end] = rank_sequences(m.B, comm_.rank(), D);
    data_->batch(step, seq_begin, seq_end, inputs_.data(), targets_.data());
    step_model_->zero_grad();
    mark(OpKind::kData, cursor);
    double loss = step_model_->forward(inputs_.data(), targets_.data(), m.B / D, static_cast<double>(m.B) * m.T);
    step_model_->backward();
    *cursor = now_ns();
    if (uses_executor_) {  // one device rank has no other rank to sum with, and never runs the executor
        sum_dense_gradients();     // beside the last Agg under the block-wise schedule
        mark(OpKind::kAllReduce, cursor);
        executor_->finish_backward();  // every Agg done before the optimizer (records its waits)
    }
    *cursor = now_ns();
    const double norm_sq = global_grad_norm_sq();
    s.grad_norm = std::sqrt(norm_sq);
    s.lr = lr_at_step(settings_.lr, step);
    step_model_->adamw_step(s.lr, settings_.adamw, grad_clip_scale(s.grad_norm, settings_.grad_clip), &skip_);
    mark(OpKind::kOptimizer, cursor);
    comm_.all_reduce_sum(&loss, 1);
    s.loss = loss;
}

void Trainer::collect_routing(int64_t step, StepStats& s) {
    const ModelConfig& m = settings_.model;
    const int D = comm_.size();
    s.counts.resize(static_cast<size_t>(m.L) * D * m.E);
    for (int l = 0; l < m.L; ++l) {
        int64_t* counts = s.counts.data() + static_cast<size_t>(l) * D * m.E;  // [D,E]
        if (!uses_executor_) {  // one device rank, all experts local: the policy sees the counts after the fact
            const std::vector<int64_t> local = step_model_->routing_counts(l);  // [E]
            std::copy(local.begin(), local.end(), counts);
            s.placements.push_back(policy_->plan(step, l, counts));
            continue;
        }
        const MoeLayerStats& stats = executor_->layer_stats(l);
        std::copy(stats.counts.begin(), stats.counts.end(), counts);
        s.placements.push_back(stats.placement);
    }
}

void Trainer::count_transitions(StepStats& s) {
    const ModelConfig& m = settings_.model;
    s.transitions.assign(static_cast<size_t>(m.L - 1) * m.E * m.E, 0);
    const int N = m.B / comm_.size() * m.T;
    const int* idx = step_model_->dispatch_indices();  // [L,N,K], -1 where dropped
    for (int l = 0; l + 1 < m.L; ++l)
        for (int n = 0; n < N; ++n)
            for (int a = 0; a < m.K; ++a) {
                const int e1 = idx[(static_cast<size_t>(l) * N + n) * m.K + a];
                if (e1 < 0) continue;
                for (int b = 0; b < m.K; ++b) {
                    const int e2 = idx[(static_cast<size_t>(l + 1) * N + n) * m.K + b];
                    if (e2 >= 0) ++s.transitions[(static_cast<size_t>(l) * m.E + e1) * m.E + e2];
                }
            }
    comm_.all_reduce_sum(s.transitions.data(), s.transitions.size());
}

void Trainer::summarise_routing(StepStats& s) {
    const int D = comm_.size(), E = settings_.model.E, L = static_cast<int>(s.placements.size());
    double load_sum = 0;
    for (int l = 0; l < L; ++l) {
        const int64_t* counts = s.counts.data() + static_cast<size_t>(l) * D * E;  // [D,E]
        const Placement& p = s.placements[l];
        // one device rank never runs the executor: its rule's split of the counts (all on the one device)
        const RouteSplit split = uses_executor_ ? executor_->layer_stats(l).route
                                                : route_split(counts, p, settings_.balance.route_rule, &settings_.cost);
        // load balance actually achieved: H under the placement and the split each layer ran
        const LayerFlow flow = flow_of_split(counts, p, split);
        load_sum += max_mean_load(flow.computed.data(), D);
        const RoutingTally tally = tally_routing(split, p);
        s.tokens_to_owner += tally.to_owner;
        s.tokens_to_replicas += tally.to_replicas;
        s.tokens_sent_to_replicas += tally.sent_to_replicas;
    }
    s.mean_max_mean_load = L > 0 ? load_sum / L : 0.0;
}

void Trainer::time_step(int64_t t0, int64_t* cursor, StepStats& s) {
    const ModelConfig& m = settings_.model;
    // TEST ONLY (debug.slow_step_pct): the injected slowdown ci/bench-regress.sh must catch: a spin of this % of the
    // step's wall time so far, just before the step time is taken, so the step becomes that % slower
    if (settings_.debug_slow_step_pct > 0)
        spin_wall_ns(static_cast<int64_t>((now_ns() - t0) * settings_.debug_slow_step_pct / 100.0));
    const MoeLayerStats t = executor_->step_stats();  // summed over layers
    mark(OpKind::kStats, cursor);
    const int64_t t_end = now_ns();  // the step's end on this rank: the max over ranks below is step_ms
    // the counts all-gather (layout) is communication: it counts with the all-to-all
    double times[9] = {(t_end - t0) * 1e-6, t.a2a_ms() + t.layout_ms, t.expert_ms(), t.trans_ms, t.agg_ms,
                       t.plan_ms, t.trans_exposed_ms, t.agg_exposed_ms, t.plan_wait_ms};
    comm_.all_reduce_max(times, 9);
    s.trans_exposed_ms = times[6];
    s.agg_exposed_ms = times[7];
    s.plan_wait_ms = times[8];
    s.step_ms = times[0];
    s.a2a_ms = times[1];
    s.expert_ms = times[2];
    s.trans_ms = times[3];
    s.agg_ms = times[4];
    s.plan_ms = times[5];
    // NOTE: under the block-wise schedule Trans/Agg run beside the rest, so only their exposed part is subtracted
    s.nonexpert_ms = std::max(0.0, s.step_ms - s.a2a_ms - s.expert_ms - s.trans_exposed_ms - s.agg_exposed_ms -
                                       s.plan_ms - s.plan_wait_ms);
    if (timeline_) s.timelines = gather_timelines(t0, t_end, &s);
    s.tokens_per_s = s.step_ms > 0 ? static_cast<double>(m.B) * m.T / (s.step_ms * 1e-3) : 0.0;
}

StepStats Trainer::step() {
    const ModelConfig& m = settings_.model;
    const int64_t step = next_step_;
    StepStats s;
    s.step = step;
    const int64_t t0 = now_ns();
    int64_t cursor = t0;  // the timeline's: the end of the last op the trainer itself recorded
    train_on_batch(step, s, &cursor);
    // routing of this step: counts per layer (identical on every rank) and optional transitions
    collect_routing(step, s);
    if (record_transitions_ && m.L > 1) count_transitions(s);
    policy_->end_iteration(step, s.counts);
    summarise_routing(s);
    for (const Placement& p : s.placements) s.replicas += p.num_replicas();
    time_step(t0, &cursor, s);
    ++next_step_;
    return s;
}

namespace {

constexpr int kCheckpointTag = 7100;

std::vector<int64_t> shape_of(const ParamTensor& t) { return std::vector<int64_t>(t.shape.begin(), t.shape.end()); }

}  // namespace

std::string Trainer::save(const std::string& dir, const std::string& run_id) {
    const ModelConfig& m = settings_.model;
    step_model_->to_host(*model_);  // a device model's parameters and AdamW state into the checkpoint layout
    const int D = comm_.size();
    const int experts_per_rank = m.E / D;
    // bring every home expert's parameters and optimizer state to rank 0
    for (int l = 0; l < m.L; ++l)
        for (int e = 0; e < m.E; ++e) {
            const int home = e / experts_per_rank;
            if (home == 0) continue;
            if (comm_.rank() != home && comm_.rank() != 0) continue;
            const int w1 = model_->layout.expert_w1[static_cast<size_t>(l) * m.E + e];
            const size_t offset = model_->tensor(w1).offset;
            const size_t count = 2 * static_cast<size_t>(m.C) * m.hidden_size();
            std::vector<float>* arrays[3] = {&model_->params, &model_->adam_m, &model_->adam_v};
            for (int a = 0; a < 3; ++a) {
                float* data = arrays[a]->data() + offset;
                CommHandle h = comm_.rank() == home ? comm_.isend(data, count * sizeof(float), 0, kCheckpointTag + a)
                                                    : comm_.irecv(data, count * sizeof(float), home, kCheckpointTag + a);
                h->wait();
            }
        }
    std::string written;
    if (comm_.rank() == 0) {
        std::vector<TensorView> tensors, optimizer;
        for (int i = 0; i < model_->num_tensors(); ++i) {
            const ParamTensor& t = model_->tensor(i);
            tensors.push_back({t.name, shape_of(t), model_->params.data() + t.offset});
            optimizer.push_back({t.name + ".m", shape_of(t), model_->adam_m.data() + t.offset});
            optimizer.push_back({t.name + ".v", shape_of(t), model_->adam_v.data() + t.offset});
        }
        CheckpointMeta meta;
        meta.config_hash = checkpoint_hash_;
#ifdef PROPHET_VERSION
        meta.prophet_version = PROPHET_VERSION;
#endif
        meta.optimizer_step = model_->adam_step;
        meta.data_position["next_step"] = std::to_string(next_step_);
        meta.extra["policy_state"] = policy_->save_state();
        meta.extra["world_size"] = std::to_string(D);
        if (!run_id.empty()) meta.extra["run_id"] = run_id;
        // the run has no stochastic operation after initialisation; the seed's generator is kept for the record
        const std::map<std::string, RngState> rngs = {{"init", rng_state(Rng(settings_.model.seed))}};
        written = save_checkpoint(dir, next_step_ - 1, tensors, optimizer, rngs, meta);
        prune_checkpoints(dir, settings_.keep_checkpoints);  // after `latest` moved: never the newest
    }
    comm_.barrier();
    return written;
}

void Trainer::resume(const std::string& path) {
    CheckpointExpect expect;
    expect.config_hash = checkpoint_hash_;
    for (int i = 0; i < model_->num_tensors(); ++i)
        expect.tensors.emplace_back(model_->tensor(i).name, shape_of(model_->tensor(i)));
    const Checkpoint ckpt = load_checkpoint(path, expect);
    // every field the trainer reads is checked before any is used (exit 3 naming the file and the field)
    const ResumeFields fields = check_resume_fields(ckpt, comm_.size());
    const auto state = ckpt.meta.extra.find("policy_state");
    if (state != ckpt.meta.extra.end())
        policy_->load_state(state->second, (std::filesystem::path(ckpt.dir) / "state.json").string());
    for (int i = 0; i < model_->num_tensors(); ++i) {
        const ParamTensor& t = model_->tensor(i);
        const auto copy = [&](const TensorMap& map, const std::string& name, std::vector<float>& dst) {
            const Tensor& src = map.at(name);
            std::copy(src.data.begin(), src.data.end(), dst.begin() + static_cast<long>(t.offset));
        };
        copy(ckpt.tensors, t.name, model_->params);
        copy(ckpt.optimizer, t.name + ".m", model_->adam_m);
        copy(ckpt.optimizer, t.name + ".v", model_->adam_v);
    }
    model_->adam_step = fields.optimizer_step;
    step_model_->from_host(*model_);  // and onto the device, when the run has one
    next_step_ = fields.next_step;
    comm_.barrier();
}

}  // namespace prophet
