#include "train/train_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "balance/cluster.h"
#include "balance/options.h"
#include "core/error.h"
#include "train/default_cluster.h"

namespace prophet {

namespace {

// store.path, run.*, model.*
void add_run_model_keys(Schema& s) {
    s.add_string("store.path", "results/prophet.db", {}, "SQLite file every run records into");
    s.add_string("run.experiment", "train", {}, "experiment label stored with the run");
    s.add_int("run.seed", 1, 0, 1e15, "seed of the parameter initialisation (the data has its own data.seed)");
    // the model: shape letters as in docs/model.md
    s.add_int("model.V", 256, 2, 1 << 20, "V: vocabulary size (byte-level: 256)");
    s.add_int("model.T", 64, 1, 1 << 16, "T: sequence length, tokens");
    s.add_int("model.C", 128, 1, 1 << 16, "C: channels");
    s.add_int("model.NH", 4, 1, 1024, "NH: attention heads (C % NH == 0)");
    s.add_int("model.L", 4, 1, 1024, "L: blocks, each with an MoE layer");
    s.add_int("model.E", 8, 1, 1 << 16, "E: experts per MoE layer (E % D == 0)");
    s.add_int("model.K", 2, 1, 1 << 16, "K: experts per token (K <= E)");
    s.add_int("model.F", 0, 0, 1 << 20, "F: expert hidden size (0: 2C)");
    s.add_int("model.B", 8, 1, 1 << 20, "B: global batch, sequences (B % D == 0)");
    s.add_float("model.aux_loss_coef", 0.0, 0.0, 1e3, "auxiliary load-balancing loss coefficient (0: off)");
    s.add_float("model.capacity_factor", 0.0, 0.0, 1e3, "expert capacity factor (0: dropless)");
}

// train.*, device.kind, routing.*
void add_train_keys(Schema& s) {
    s.add_int("train.steps", 20, 1, 1e12, "training steps");
    s.add_float("train.lr", 1e-3, 0.0, 10.0, "peak learning rate", true);
    s.add_float("train.min_lr", 1e-4, 0.0, 10.0, "learning rate at the end of the cosine decay");
    s.add_int("train.warmup_steps", 2, 0, 1e12, "linear warmup steps");
    s.add_float("train.weight_decay", 0.1, 0.0, 10.0, "AdamW weight decay (matrices only)");
    s.add_float("train.grad_clip", 1.0, 0.0, 1e6, "global gradient-norm clip (0: off)");
    s.add_int("train.log_every", 1, 1, 1e9, "print a step line every N steps");
    s.add_int("train.threads", 1, 1, 256, "BLAS threads per rank");
    s.add_string("train.checkpoint_dir", "", {}, "where --save writes checkpoints (empty: results/ckpt/<run_id>)");
    s.add_int("train.save_every", 0, 0, 1e12, "checkpoint every N steps (0: at the end only, with --save)");
    s.add_int("train.keep_checkpoints", 3, 0, 1e9,
              "step directories kept in the checkpoint directory: the newest N (and the one `latest` names); "
              "older ones are removed after each save (0: keep every one)");
    s.add_string("device.kind", "cpu", {"cpu", "cuda"},
                 "where the model computes: cpu (every rank, MPI) or cuda (a GPU per rank, ranks of a host "
                 "sharing its GPUs round-robin; exit 4 when no CUDA device is usable; docs/gpu.md)");
    s.add_string("train.precision", "fp32", {"fp32", "bf16"},
                 "GEMM precision: fp32, or bf16 (device.kind = cuda only: bf16 tensor-core GEMMs over fp32 "
                 "master weights, gradients and optimizer state; docs/gpu.md)");
    s.add_bool("train.record_loads", true, "record the D x E expert loads of every step and layer");
    s.add_string("routing.source", "gate", {"gate", "trace"},
                 "gate: the model's top-k; trace: assignments drawn to match routing.trace's per-device, "
                 "per-expert counts each step (losses are then not a model's; docs/testbed.md)");
    s.add_string("routing.trace", "", {},
                 "routing trace for routing.source = \"trace\": a .ptrace, a CSV trace or a generator .toml");
}

// balance.*, comm.*, schedule.*, train.max_memory_gib
void add_balance_comm_schedule_keys(Schema& s) {
    add_balance_keys(s, /*allow_all=*/false, "static");
    s.add_string("balance.cluster", kDefaultClusterPath, {},
                 "cluster file of the planner's cost model (num_devices is taken from the run; topology-aware "
                 "where the file describes its topology, Trans/Agg priced as the trainer's point-to-point star); "
                 "the default is built into prophet, a path given is read relative to the working directory");
    s.add_string("comm.backend", "mpi", {"mpi", "nccl"},
                 "the ranks' communicator: mpi (the MPI world on host buffers; cuda ranks may share a GPU) or "
                 "nccl (device.kind = cuda, one rank per GPU, bootstrapped over MPI; docs/gpu.md)");
    s.add_float("comm.timeout_s", 600.0, 0.0, 1e6, "a collective blocked longer than this ends the job (exit 6)");
    s.add_float("comm.link_gbps", 0.0, 0.0, 1e6,
                "emulate a network: each rank's point-to-point and all-to-all traffic leaves at this rate, Gbit/s, "
                "taking wall time but no CPU (0: off; docs/scheduler.md)");
    s.add_float("comm.link_latency_us", 0.0, 0.0, 1e6, "emulated per-message latency with comm.link_gbps, us");
    s.add_bool("comm.replicas_within_host", false,
               "host-aware placement: drop every replica the policy puts on another host than the expert's owner "
               "(hosts: the ranks' host names), so no expert parameters or gradients cross hosts");
    s.add_string("schedule.mode", "none", {"none", "blockwise", "fastermoe"},
                 "none: Plan, Trans and Agg block in order; blockwise: Pro-Prophet's scheduler (plan ahead on a "
                 "planner thread, Trans/Agg on a communication thread beside compute); fastermoe: FasterMoE's own "
                 "(plan in order, Trans beside the dispatch all-to-all, Agg beside the backward combine "
                 "all-to-all, on a communication thread; docs/scheduler.md)");
    s.add_string("schedule.split", "time", {"time", "half"},
                 "how blockwise divides a block's Trans/Agg between its two compute windows: time (fill the "
                 "non-expert window by estimated transfer time) or half (half the experts, the authors' code)");
    s.add_float("train.max_memory_gib", 0.0, 0.0, 1e9,
                "refuse (exit 4) a run whose estimated memory per rank exceeds this, GiB (0: MemAvailable / "
                "ranks on the node)");
}

// debug.*: test-only fault injection
void add_debug_keys(Schema& s) {
    // test-only fault injection (docs/reliability.md): never set these outside a test of the failure paths
    s.add_int("debug.fail_rank", -1, -1, 1 << 20, "TEST ONLY: this rank fails at debug.fail_step (-1: none)");
    s.add_int("debug.fail_step", 0, 0, 1e12, "TEST ONLY: the step at which debug.fail_rank fails");
    s.add_string("debug.fail_mode", "kill", {"kill", "exit", "hang", "error", "bad_alloc"},
                 "TEST ONLY: how it fails: SIGKILL itself, _exit(1), sleep forever (a hung collective), "
                 "throw a run error (exit 1) that only this rank sees, or throw std::bad_alloc (exit 4)");
    s.add_float("debug.slow_step_pct", 0.0, 0.0, 1000.0,
                "TEST ONLY: every step spins for this % of its wall time on every rank, before the step "
                "time is taken (the injected slowdown ci/bench-regress.sh --inject-slowdown must catch)");
}

}  // namespace

const Schema& train_schema() {
    static const Schema schema = [] {
        Schema s;
        add_run_model_keys(s);
        add_data_keys(s);
        add_train_keys(s);
        add_balance_comm_schedule_keys(s);
        add_debug_keys(s);
        return s;
    }();
    return schema;
}

namespace {

// The planner's cluster: the built-in copy of the default, or the file balance.cluster names (an error naming
// balance.cluster when it cannot be read).
ClusterSpec planner_cluster(const Config& c) {
    const std::string path = c.get_string("balance.cluster");
    if (c.source("balance.cluster") == "default" && path == kDefaultClusterPath)
        return load_cluster_text(kDefaultClusterToml, std::string(kDefaultClusterPath) + " (built into prophet)");
    if (!std::ifstream(path))
        throw_config_error("balance.cluster", "\"" + path + "\"",
                           std::string("cannot read the cluster file (") + std::strerror(errno) +
                               "; a relative path is read from "
                               "the working directory)",
                           "give an existing cluster file (experiments/clusters/), or leave balance.cluster out for "
                           "the built-in default");
    return load_cluster_file(path);
}

}  // namespace

CostModel trainer_cost_model(ClusterSpec cluster, const ModelConfig& m, int D) {
    cluster.num_devices = D;
    if (cluster.devices_per_node > D || D % cluster.devices_per_node != 0) cluster.devices_per_node = D;
    CostModel cost;
    cost.cluster = cluster;
    cost.model.d_model = m.C;
    cost.model.d_ffn = m.hidden_size();
    cost.model.seq_len = m.T;
    cost.model.bytes_per_elem = 4;
    cost.model.tokens_per_device = static_cast<int64_t>(m.B / D) * m.T;
    apply_cluster_pricing(cost, nullptr);
    cost.trans_broadcast = TransBroadcast::kStar;
    return cost;
}

namespace {

// model.* and run.seed, and the divisibility expert and data parallelism over D ranks need.
void read_model_section(const Config& c, int D, TrainSettings& t) {
    ModelConfig& m = t.model;
    m.V = static_cast<int>(c.get_int("model.V"));
    m.NH = static_cast<int>(c.get_int("model.NH"));
    read_model_dims(c, m);
    m.aux_loss_coef = c.get_float("model.aux_loss_coef");
    m.capacity_factor = c.get_float("model.capacity_factor");
    t.seed = c.get_int("run.seed");
    m.seed = static_cast<uint64_t>(t.seed);
    model_config_validate(m);
    if (m.E % D != 0)
        throw_config_error("model.E", std::to_string(m.E),
                           "must be divisible by the number of ranks D = " + std::to_string(D) +
                               " (expert parallelism puts E/D experts on each rank)",
                           "use E = " + std::to_string(((m.E + D - 1) / D) * D) + " or run on a divisor of E ranks");
    if (m.B % D != 0)
        throw_config_error("model.B", std::to_string(m.B),
                           "must be divisible by the number of ranks D = " + std::to_string(D) +
                               " (each rank takes B/D sequences)",
                           "use B = " + std::to_string(((m.B + D - 1) / D) * D));
}

// data.*: the token source.
void read_data_section(const Config& c, TrainSettings& t) {
    const ModelConfig& m = t.model;
    if (c.has("data.vocab_size") && c.get_int("data.vocab_size") != m.V)
        throw_config_error("data.vocab_size", std::to_string(c.get_int("data.vocab_size")),
                           "must equal model.V = " + std::to_string(m.V), "drop data.vocab_size (it follows model.V)");
    t.data = data_config_from(c);
    t.data.vocab_size = m.V;
    t.data.validate();
    if (t.data.source == "file" && access(t.data.path.c_str(), R_OK) != 0)
        throw_config_error("data.path", "\"" + t.data.path + "\"", "cannot read the data file",
                           "give an existing file, or --set data.source=generated");
}

// train.* (optimizer, logging, checkpoints), routing.* and device.kind.
void read_train_section(const Config& c, TrainSettings& t) {
    t.steps = c.get_int("train.steps");
    t.lr.max_lr = c.get_float("train.lr");
    t.lr.min_lr = c.get_float("train.min_lr");
    t.lr.warmup_steps = c.get_int("train.warmup_steps");
    t.lr.total_steps = t.steps;
    t.adamw.weight_decay = c.get_float("train.weight_decay");
    t.grad_clip = c.get_float("train.grad_clip");
    t.log_every = static_cast<int>(c.get_int("train.log_every"));
    t.threads = static_cast<int>(c.get_int("train.threads"));
    t.checkpoint_dir = c.get_string("train.checkpoint_dir");
    t.save_every = c.get_int("train.save_every");
    t.keep_checkpoints = c.get_int("train.keep_checkpoints");
    t.record_loads = c.get_bool("train.record_loads");
    // GpuModel routes with its own gate: the recorded routing (model.route_override) exists on the CPU model only
    if (c.get_string("routing.source") == "trace" && c.get_string("device.kind") == "cuda")
        throw_config_error("routing.source", "trace",
                           "a recorded routing replaces the gate's choices in the CPU model only; the GPU model "
                           "(device.kind = cuda) routes with its own gate",
                           "set routing.source = gate with device.kind = cuda, or device.kind = cpu");
    t.routing_trace = c.get_string("routing.source") == "trace" ? c.get_string("routing.trace") : "";
    if (c.get_string("routing.source") == "trace" && (t.routing_trace.empty() || access(t.routing_trace.c_str(), R_OK) != 0))
        throw_config_error("routing.trace", "\"" + c.get_string("routing.trace") + "\"",
                           "routing.source = \"trace\" needs a readable routing trace file",
                           "--set routing.trace=results/traces/<run>.ptrace (prophet profile writes one), or "
                           "--set routing.source=gate");
    t.device_kind = c.get_string("device.kind");
}

// balance.*: the policy and the planner's cost model of D devices.
void read_balance_section(const Config& c, int D, TrainSettings& t) {
    const ModelConfig& m = t.model;
    t.policy = c.get_string("balance.policy");
    t.balance = balance_options_from(c);
    t.profile_iterations = static_cast<int>(std::max<int64_t>(1, c.get_int("balance.profile_iterations")));
    t.cluster_path = c.get_string("balance.cluster");
    t.cost = trainer_cost_model(planner_cluster(c), m, D);
    if (t.policy == "exhaustive" && (D - 1) * m.E > 22)
        throw_config_error("balance.policy", "exhaustive",
                           "enumerates 2^((D-1)*E) placements per layer and step; too many for D = " +
                               std::to_string(D) + ", E = " + std::to_string(m.E),
                           "use it with D = E <= 4");
}

// store.*, run.experiment, comm.* and schedule.*, and the planner's objective that follows the schedule.
void read_comm_section(const Config& c, TrainSettings& t) {
    t.store_path = c.get_string("store.path");
    t.experiment = c.get_string("run.experiment");
    t.comm_timeout_s = c.get_float("comm.timeout_s");
    t.comm_backend = c.get_string("comm.backend");
    if (t.comm_backend == "nccl" && t.device_kind != "cuda")
        throw_config_error("comm.backend", "nccl",
                           "NCCL moves GPU buffers between GPUs, and this run computes on device.kind = " +
                               t.device_kind,
                           "set device.kind = cuda (one rank per GPU), or comm.backend = mpi");
    if (t.comm_backend == "nccl" && c.get_float("comm.link_gbps") > 0)
        throw_config_error("comm.link_gbps", std::to_string(c.get_float("comm.link_gbps")),
                           "the emulated link paces host-buffer messages from a thread of its own, which NCCL's "
                           "communicator does not allow (comm.backend = nccl)",
                           "set comm.link_gbps = 0, or comm.backend = mpi");
    t.link_gbps = c.get_float("comm.link_gbps");
    t.link_latency_us = c.get_float("comm.link_latency_us");
    t.replicas_within_host = c.get_bool("comm.replicas_within_host");
    t.schedule_blockwise = c.get_string("schedule.mode") == "blockwise";
    t.schedule_fastermoe = c.get_string("schedule.mode") == "fastermoe";
    // the planner's objective follows the schedule that runs: transfers are hidden only with the scheduler
    // (fastermoe's overlap hides them behind an all-to-all only, not behind compute: Eq 6, as blocking)
    if (t.balance.cost_eq_auto) t.balance.cost_eq = t.schedule_blockwise ? 8 : 6;
    t.balance.cost_eq_auto = false;  // resolved
    // balance.route_to = auto: the policy's own rule, as plan and sim (the executor runs every rule, splits included)
    t.balance.route_rule = effective_route_rule(t.policy, t.balance);
    t.schedule_split = c.get_string("schedule.split");
}

// The GPU model's and the communicators' limits (cuda/gpu_model.h), checked before the store is opened;
// train.precision and debug.*.
void check_device_limits(const Config& c, int D, TrainSettings& t) {
    const ModelConfig& m = t.model;
    if (t.device_kind == "cuda" && m.capacity_factor > 0)
        throw_config_error("model.capacity_factor", std::to_string(m.capacity_factor),
                           "the GPU model is dropless for now (device.kind = cuda)", "set model.capacity_factor = 0");
    if (t.device_kind == "cuda" && m.aux_loss_coef > 0)
        throw_config_error("model.aux_loss_coef", std::to_string(m.aux_loss_coef),
                           "the GPU model has no auxiliary loss yet (device.kind = cuda)", "set model.aux_loss_coef = 0");
    // blockwise and fastermoe both run Trans/Agg on a communication thread: the same refusals
    const std::string mode = c.get_string("schedule.mode");
    if (t.device_kind == "cuda" && mode != "none" && D == 1)
        throw_config_error("schedule.mode", mode,
                           "one cuda rank runs every expert inside the GPU model: there is no Trans or Agg to overlap",
                           "set schedule.mode = none with one cuda rank (" + mode + " needs several ranks)");
    if (t.comm_backend == "nccl" && mode != "none")
        throw_config_error("schedule.mode", mode,
                           "the " + mode + " schedule calls the communicator from a second thread, which the NCCL "
                           "communicator does not allow (comm.backend = nccl)",
                           "set schedule.mode = none, or comm.backend = mpi");
    t.precision = c.get_string("train.precision");
    if (t.precision == "bf16" && t.device_kind != "cuda")
        throw_config_error("train.precision", "bf16",
                           "bf16 GEMMs run on GPUs only; the CPU model computes in fp32 (device.kind = " +
                               t.device_kind + ")",
                           "set device.kind = cuda, or train.precision = fp32");
    t.debug_slow_step_pct = c.get_float("debug.slow_step_pct");
}

}  // namespace

void read_model_dims(const Config& config, ModelConfig& m) {
    m.T = static_cast<int>(config.get_int("model.T"));
    m.C = static_cast<int>(config.get_int("model.C"));
    m.L = static_cast<int>(config.get_int("model.L"));
    m.E = static_cast<int>(config.get_int("model.E"));
    m.K = static_cast<int>(config.get_int("model.K"));
    m.F = static_cast<int>(config.get_int("model.F"));
    m.B = static_cast<int>(config.get_int("model.B"));
}

TrainSettings train_settings_from(const Config& c, int world_size) {
    TrainSettings t;
    read_model_section(c, world_size, t);
    read_data_section(c, t);
    read_train_section(c, t);
    read_balance_section(c, world_size, t);
    read_comm_section(c, t);
    check_device_limits(c, world_size, t);
    return t;
}

}  // namespace prophet
