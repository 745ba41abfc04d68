#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "core/timer.h"
#include "kernels/optim.h"
#include "model/checkpoint.h"
#include "comm/comm_paced.h"
#include "moe/ep_executor.h"

namespace prophet {

std::string checkpoint_config_hash(const Config& config) {
    std::string text;
    for (const auto& [key, value] : config.flat()) {
        const bool math = key.rfind("model.", 0) == 0 || key.rfind("data.", 0) == 0 || key.rfind("balance.", 0) == 0 ||
                          key == "run.seed" || key == "train.steps" || key == "train.lr" || key == "train.min_lr" ||
                          key == "train.warmup_steps" || key == "train.weight_decay" || key == "train.grad_clip";
        if (math) text += key + " = " + value + "\n";
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
    return make_paced_communicator(&comm, LinkEmulation{settings.link_gbps * 1e9 / 8, settings.link_latency_us * 1e-6});
}

}  // namespace

Trainer::Trainer(Communicator& comm, const TrainSettings& settings, std::string checkpoint_hash)
    : paced_(paced_if_asked(comm, settings)),
      comm_(paced_ ? *paced_ : comm),
      settings_(settings),
      checkpoint_hash_(std::move(checkpoint_hash)) {
    const ModelConfig& m = settings_.model;
    const int D = comm_.size();
    model_ = std::make_unique<Model<float>>(m);
    data_ = make_data_source(settings_.data, m.T, m.B);
    const int num_nodes = std::max(1, D / std::max(1, settings_.cost.cluster.devices_per_node));
    policy_ = std::make_unique<PolicyRunner>(settings_.policy, m.L, D, m.E, settings_.cost, settings_.balance,
                                             settings_.profile_iterations, num_nodes);
    executor_ = std::make_unique<ExpertParallelExecutor>(&comm_, *model_, settings_.balance.route_rule);
    executor_->set_placement_provider(
        [this](int layer, const int64_t* counts) { return policy_->plan(next_step_, layer, counts); });
    model_set_executor(*model_, static_cast<MoeExecutor<float>*>(executor_.get()));
    if (settings_.schedule_blockwise) {
        require_thread_multiple(comm_, "schedule.mode = blockwise (Trans/Agg run on a communication thread)");
        EpSchedule sched;
        sched.blockwise = true;
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
        plan_ahead_ = std::make_unique<PlanAhead>(*policy_, m.L, D, m.E);
        executor_->set_ahead_provider(
            [this](int layer) { return plan_ahead_->placement(next_step_, layer); },
            [this](int layer, const int64_t* counts) { plan_ahead_->observe(next_step_, layer, counts); });
    }

    skip_ = executor_->optimizer_skip_mask(model_->layout);
    home_experts_ = executor_->home_expert_tensor_mask(model_->layout);
    const int B_local = m.B / D;
    inputs_.resize(static_cast<size_t>(B_local) * m.T);
    targets_.resize(inputs_.size());
}

Trainer::~Trainer() = default;

void Trainer::set_timeline(bool on) {
    timeline_ = on ? std::make_unique<OpTimeline>() : nullptr;
    executor_->set_timeline(timeline_.get());
    if (plan_ahead_) plan_ahead_->set_timeline(timeline_.get());
}

void Trainer::sum_dense_gradients() {
    Span<float> dense = model_dense_grads(*model_);
    comm_.all_reduce_sum(dense.data, dense.size);
}

double Trainer::global_grad_norm_sq() {
    // dense gradients are identical on every rank after the all-reduce: count them once (on rank 0); expert
    // gradients are summed at their home (Agg), so every rank counts the experts it is home of
    std::vector<char> include = home_experts_;
    if (comm_.rank() == 0)
        for (int i = 0; i < model_->num_tensors(); ++i)
            if (!model_->tensor(i).is_expert) include[i] = 1;
    double norm_sq = grad_norm_sq(*model_, &include);
    comm_.all_reduce_sum(&norm_sq, 1);
    return norm_sq;
}

std::vector<std::string> Trainer::gather_timelines(int64_t step_start_ns) {
    const int D = comm_.size();
    std::vector<int64_t> starts(D);  // [D]
    comm_.all_gather(&step_start_ns, sizeof(int64_t), starts.data());
    const int64_t origin = *std::min_element(starts.begin(), starts.end());
    const std::string mine = timeline_json(timeline_->take(), origin);
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

StepStats Trainer::step() {
    const ModelConfig& m = settings_.model;
    const int D = comm_.size();
    const int B_local = m.B / D;
    const int64_t step = next_step_;
    StepStats s;
    s.step = step;
    const int64_t t0 = now_ns();

    const auto [seq_begin, seq_end] = rank_sequences(m.B, comm_.rank(), D);
    data_->batch(step, seq_begin, seq_end, inputs_.data(), targets_.data());
    model_zero_grad(*model_);
    double loss = model_forward(*model_, inputs_.data(), targets_.data(), B_local, static_cast<double>(m.B) * m.T);
    model_backward(*model_);
    sum_dense_gradients();     // beside the last Agg under the block-wise schedule
    executor_->finish_backward();  // every Agg done before the optimizer
    const int64_t t_opt = now_ns();
    const double norm_sq = global_grad_norm_sq();
    s.grad_norm = std::sqrt(norm_sq);
    s.lr = lr_at_step(settings_.lr, step);
    adamw_step(*model_, s.lr, settings_.adamw, grad_clip_scale(s.grad_norm, settings_.grad_clip), &skip_);
    if (timeline_) timeline_->add(OpKind::kOptimizer, OpLane::kCompute, -1, 0, t_opt, now_ns());
    comm_.all_reduce_sum(&loss, 1);
    s.loss = loss;

    // routing of this step: counts per layer (identical on every rank) and optional transitions
    s.counts.resize(static_cast<size_t>(m.L) * D * m.E);
    for (int l = 0; l < m.L; ++l) {
        const MoeLayerStats& stats = executor_->layer_stats(l);
        std::copy(stats.counts.begin(), stats.counts.end(), s.counts.begin() + static_cast<size_t>(l) * D * m.E);
        s.placements.push_back(stats.placement);
    }
    if (record_transitions_ && m.L > 1) {
        s.transitions.assign(static_cast<size_t>(m.L - 1) * m.E * m.E, 0);
        const int N = B_local * m.T;
        const int* idx = model_->acts.dispatch_idx;  // [L,N,K], -1 where dropped
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
    policy_->end_iteration(step, s.counts);

    // load balance actually achieved: H under the placement each layer used
    double load_sum = 0;
    for (int l = 0; l < m.L; ++l) {
        const LayerFlow flow = compute_flow(s.counts.data() + static_cast<size_t>(l) * D * m.E, D, m.E,
                                            s.placements[l], settings_.balance.route_rule);
        int64_t h_max = 0, h_sum = 0;
        for (int64_t h : flow.computed) {
            h_max = std::max(h_max, h);
            h_sum += h;
        }
        load_sum += h_sum > 0 ? static_cast<double>(h_max) * D / h_sum : 1.0;
        s.replicas += s.placements[l].num_replicas();
    }
    s.max_mean_load = load_sum / m.L;

    // TEST ONLY (debug.slow_step_pct): the injected slowdown ci/bench-regress.sh must catch: a spin of this % of the
    // step's wall time so far, just before the step time is taken, so the step becomes that % slower
    if (settings_.debug_slow_step_pct > 0)
        spin_wall_ns(static_cast<int64_t>((now_ns() - t0) * settings_.debug_slow_step_pct / 100.0));
    const MoeLayerStats t = executor_->step_stats();  // summed over layers
    // the counts all-gather (layout) is communication: it counts with the all-to-all
    double times[9] = {(now_ns() - t0) * 1e-6, t.a2a_ms() + t.layout_ms, t.expert_ms(), t.trans_ms, t.agg_ms,
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
    if (timeline_) s.timelines = gather_timelines(t0);
    s.tokens_per_s = s.step_ms > 0 ? static_cast<double>(m.B) * m.T / (s.step_ms * 1e-3) : 0.0;
    ++next_step_;
    return s;
}

namespace {

constexpr int kCheckpointTag = 7100;

std::vector<int64_t> shape_of(const ParamTensor& t) { return std::vector<int64_t>(t.shape.begin(), t.shape.end()); }

}  // namespace

std::string Trainer::save(const std::string& dir) {
    const ModelConfig& m = settings_.model;
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
        // the run has no stochastic operation after initialisation; the seed's generator is kept for the record
        const std::map<std::string, RngState> rngs = {{"init", rng_state(Rng(settings_.model.seed))}};
        written = save_checkpoint(dir, next_step_ - 1, tensors, optimizer, rngs, meta);
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
    const auto saved_ranks = ckpt.meta.extra.find("world_size");
    if (saved_ranks != ckpt.meta.extra.end() && std::stoi(saved_ranks->second) != comm_.size())
        throw Error(kExitConfig, "checkpoint error: " + ckpt.dir + " was written by a run on " + saved_ranks->second +
                                     " ranks, this run has " + std::to_string(comm_.size()) +
                                     "; fix: resume with mpirun -np " + saved_ranks->second);
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
    model_->adam_step = ckpt.meta.optimizer_step;
    next_step_ = std::stoll(ckpt.meta.data_position.at("next_step"));
    const auto state = ckpt.meta.extra.find("policy_state");
    if (state != ckpt.meta.extra.end()) policy_->load_state(state->second);
    comm_.barrier();
}

}  // namespace prophet
