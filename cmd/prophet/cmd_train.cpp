#include "cmd_train.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "cmd_infer.h"
#include "core/error.h"
#include "core/timer.h"
#include "kernels/blas.h"
#include "model/checkpoint.h"
#include "progress.h"
#include "trace/trace.h"
#include "train/calibrate.h"
#include "train/calibrate_ops.h"
#include "train/device.h"
#include "train/failure_watch.h"
#include "train/fault_inject.h"
#include "train/memory_estimate.h"
#include "train/resume_record.h"
#include "train/routing_trace.h"
#include "train/testbed_record.h"
#include "train/traffic.h"
#include "train/trainer.h"

namespace prophet::cli {

namespace {

int env_int(const char* const names[], int fallback) {
    for (int i = 0; names[i]; ++i)
        if (const char* v = std::getenv(names[i])) return std::atoi(v);
    return fallback;
}
// rank and size as the launcher announces them, known before MPI_Init so config errors can be reported (by
// rank 0 only) before any communication
int env_world_size() {
    static const char* const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", nullptr};
    return env_int(names, 1);
}
int env_world_rank() {
    static const char* const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", nullptr};
    return env_int(names, 0);
}

void add_run_options(CLI::App* cmd, CommonArgs& common) {
    add_common_options(cmd, common);
    cmd->footer(
        "Launch: mpirun -np D prophet train ... (as root add --allow-run-as-root; more ranks than cores: "
        "--oversubscribe); without mpirun it runs as one rank.\n"
        "Device: --set device.kind=cuda trains on one GPU (one rank; exit 4 when no CUDA device is usable); "
        "the default is cpu.\n"
        "Presets: experiments/models/*.toml (tiny, small, moe-gpt-s/m/l/ds/dm), experiments/train/*.toml.\n"
        "Example:\n"
        "  mpirun --allow-run-as-root --oversubscribe -np 4 ./build/prophet train "
        "--config experiments/train/skewed-4rank.toml --set balance.policy=prophet");
}

struct RunContext {
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<Store> store;  // rank 0 only
    std::string run_id;
    Config config;
    TrainSettings settings;
    FaultPlan fault;                       // debug.* (test-only)
    std::unique_ptr<FailureWatch> watch;   // records the run when a signal ends it (docs/reliability.md)
    TestbedRecord testbed;                 // the machine at the start (docs/testbed.md); complete on rank 0
    explicit RunContext(const Schema& schema) : config(schema) {}
};

void print_parameter_table(const RunContext& ctx, const Trainer& trainer, FILE* out) {
    const TrainSettings& s = ctx.settings;
    const ModelConfig& m = s.model;
    std::fprintf(out, "+----------------------+--------------------------------------------------+\n");
    std::fprintf(out, "| %-20s | %-48s |\n", "parameter", "value");
    std::fprintf(out, "+----------------------+--------------------------------------------------+\n");
    auto row = [&](const char* k, const std::string& v) { std::fprintf(out, "| %-20s | %-48s |\n", k, v.c_str()); };
    row("run", ctx.run_id.empty() ? "(dry run)" : ctx.run_id);
    row("ranks D", std::to_string(ctx.comm->size()) + " (" + ctx.comm->name() + ")");
    row("device", s.device_kind);
    row("V T C NH", std::to_string(m.V) + " " + std::to_string(m.T) + " " + std::to_string(m.C) + " " + std::to_string(m.NH));
    row("L E K F", std::to_string(m.L) + " " + std::to_string(m.E) + " " + std::to_string(m.K) + " " +
                       std::to_string(m.hidden_size()));
    row("B (global)", std::to_string(m.B) + " sequences, " + std::to_string(m.B * m.T) + " tokens/step");
    row("parameters", std::to_string(trainer.model().layout.num_params));
    row("data", trainer.data().describe().substr(0, 48));
    row("steps, lr", std::to_string(s.steps) + ", " + fmt(s.lr.max_lr) + " (warmup " + std::to_string(s.lr.warmup_steps) + ")");
    row("balance.policy", s.policy + " (route to " + route_rule_name(s.balance.route_rule) + ")");
    row("schedule", std::string(s.schedule_blockwise    ? "blockwise (split " + s.schedule_split + ")"
                                : s.schedule_fastermoe ? "fastermoe"
                                                       : "none") +
                        (s.link_gbps > 0 ? ", link " + fmt(s.link_gbps) + " Gbit/s" : ""));
    row("planner cluster", s.cluster_path.substr(0, 48));
    row("BLAS", blas_config().substr(0, 48));
    row("store", s.store_path);
    std::fprintf(out, "+----------------------+--------------------------------------------------+\n");
}

// A step's figures under their store and --json names, written once for both.
std::vector<std::pair<const char*, double>> step_metrics(const StepStats& s) {
    return {{"loss", s.loss},
            {"lr", s.lr},
            {"grad_norm", s.grad_norm},
            {"step_ms", s.step_ms},
            {"tokens_per_s", s.tokens_per_s},
            {"max_mean_load", s.mean_max_mean_load},
            {"a2a_ms", s.a2a_ms},
            {"expert_ms", s.expert_ms},
            {"nonexpert_ms", s.nonexpert_ms},
            {"trans_ms", s.trans_ms},
            {"agg_ms", s.agg_ms},
            {"plan_ms", s.plan_ms},
            {"replicas", static_cast<double>(s.replicas)},
            {"tokens_to_owner", static_cast<double>(s.tokens_to_owner)},
            {"tokens_to_replicas", static_cast<double>(s.tokens_to_replicas)},
            {"tokens_sent_to_replicas", static_cast<double>(s.tokens_sent_to_replicas)},
            {"trans_exposed_ms", s.trans_exposed_ms},
            {"agg_exposed_ms", s.agg_exposed_ms},
            {"plan_wait_ms", s.plan_wait_ms}};
}

void record_step(Store& store, const std::string& run_id, const StepStats& s, const std::vector<Placement>& previous,
                 bool record_loads, int D, int E) {
    store.transaction([&] {
        for (const auto& [key, value] : step_metrics(s)) store.put_metric(run_id, key, s.step, value);
        // one event per rank: its ops of this step (schedule/timeline.h: [kind, lane, block, part, start_us, end_us])
        for (size_t r = 0; r < s.timelines.size(); ++r)
            store.put_event(run_id, s.step, static_cast<int>(r), "info", "timeline", "ops of one step", s.timelines[r]);
        // per rank: its own step wall time and the part no compute-lane op covers (docs/scheduler.md), ms
        for (size_t r = 0; r < s.remainder_ms.size(); ++r) {
            store.put_metric(run_id, "timeline_step_ms", s.step, s.rank_step_ms[r], -1, static_cast<int>(r));
            store.put_metric(run_id, "timeline_remainder_ms", s.step, s.remainder_ms[r], -1, static_cast<int>(r));
        }
        const int L = static_cast<int>(s.placements.size());
        for (int l = 0; l < L; ++l) {
            if (record_loads)
                store.put_expert_load(run_id, s.step, l, s.counts.data() + static_cast<size_t>(l) * D * E, D, E);
            const Placement& p = s.placements[l];
            const bool changed = previous.empty() || previous[l].owner != p.owner || previous[l].replica != p.replica;
            if (!changed) continue;
            for (int e = 0; e < E; ++e) {
                store.put_placement_row(run_id, s.step, l, e, 0, p.owner[e]);
                int r = 1;
                for (int d = 0; d < D; ++d)
                    if (p.replica[static_cast<size_t>(e) * D + d])
                        store.put_placement_row(run_id, s.step, l, e, r++, d);
            }
        }
        store.heartbeat(run_id);
    });
}

nlohmann::json step_json(const StepStats& s) {
    nlohmann::json j = {{"step", s.step}};
    for (const auto& [key, value] : step_metrics(s)) j[key] = value;
    j["replicas"] = s.replicas;  // counts: integers in the JSON
    j["tokens_to_owner"] = s.tokens_to_owner;
    j["tokens_to_replicas"] = s.tokens_to_replicas;
    j["tokens_sent_to_replicas"] = s.tokens_sent_to_replicas;
    return j;
}

// Everything both commands share: config, validation before any communication, MPI, the store record.
std::unique_ptr<RunContext> start_run(const std::string& command, const CommonArgs& args, int* argc, char*** argv) {
    auto ctx = std::make_unique<RunContext>(train_schema());
    ctx->config = resolve_config(train_schema(), args);
    const int world = env_world_size();
    ctx->settings = train_settings_from(ctx->config, world);
    if (ctx->settings.balance.token_path == TokenPath::kLayerToLayer)
        throw_config_error("balance.token_path", "layer_to_layer",
                           "training's MoE executor combines every token on its home device after each layer; the "
                           "layer-to-layer path is modelled by plan and the serving simulation only",
                           "--set balance.token_path=auto (or home)");
    require_usable_device(ctx->settings.device_kind);  // exit 4 before the store, a run row or a checkpoint dir
    check_train_memory(ctx->config, ctx->settings.model, world);  // exit 4 before anything is allocated
    ctx->fault = fault_plan_from(ctx->config, world);
    if (args.dry_run) return ctx;
    bool is_mpi = false;
    ctx->comm = make_run_communicator(ctx->settings.comm_backend, make_world_communicator(argc, argv, &is_mpi));
    ctx->comm->set_timeout_s(ctx->settings.comm_timeout_s);
    blas_set_num_threads(ctx->settings.threads);
    ctx->testbed = testbed_survey(*ctx->comm, blas_num_threads());
    if (ctx->comm->rank() == 0) {
        ctx->store = std::make_unique<Store>(Store::open(ctx->settings.store_path));
        RunInfo info = make_run_info(command, ctx->config, args);
        info.experiment = ctx->settings.experiment;
        info.seed = ctx->settings.seed;
        info.world_size = ctx->comm->size();
        info.backend = ctx->settings.device_kind + "-" + ctx->comm->name();
        ctx->store->transaction([&] {
            ctx->run_id = ctx->store->begin_run(info);
            auto params = ctx->config.flat();
            params.emplace_back("blas", blas_config());
            for (auto& kv : testbed_params(ctx->testbed)) params.push_back(std::move(kv));
            ctx->store->put_params(ctx->run_id, params);
        });
        if (ctx->testbed.busy) {
            const std::string message = busy_machine_message(ctx->testbed);
            std::fprintf(stderr, "prophet: warning: %s\n", message.c_str());
            const nlohmann::json data = {{"load1", ctx->testbed.load1}, {"cores", ctx->testbed.cores},
                                         {"ranks_here", ctx->testbed.ranks_here},
                                         {"busy_load_per_core", kBusyLoadPerCore}};
            ctx->store->put_event(ctx->run_id, 0, -1, "warn", "busy_machine", message, data.dump());
        }
    }
    // every rank learns the run id (for checkpoint paths)
    char id[32] = {0};
    std::snprintf(id, sizeof id, "%s", ctx->run_id.c_str());
    ctx->comm->broadcast(id, sizeof id, 0);
    ctx->run_id = id;
    ctx->watch = std::make_unique<FailureWatch>(*ctx->comm, ctx->settings.store_path, ctx->run_id);
    return ctx;
}

struct LoopResult {
    std::vector<StepStats> steps;
};

// The training loop shared by train and profile: prints, records, checkpoints.
LoopResult run_loop(RunContext& ctx, Trainer& trainer, const CommonArgs& args, bool save, bool record_transitions,
                    const std::string& checkpoint_dir) {
    const bool root = ctx.comm->rank() == 0;
    const TrainSettings& s = ctx.settings;
    const int D = ctx.comm->size();
    // rank 0 writes the checkpoints: it holds the directory's lock until the loop ends (exit 4 when in use)
    std::optional<FileLock> checkpoint_lock;
    if (save && root) checkpoint_lock = lock_checkpoint_dir(checkpoint_dir);
    trainer.set_record_transitions(record_transitions);
    LoopResult result;
    std::vector<Placement> previous;
    if (root && !args.json)
        std::printf("%6s | %9s | %8s | %9s | %8s | %7s | %7s | %8s | %7s | %7s | %7s\n", "step", "loss", "ms", "tok/s",
                    "max/mean", "a2a ms", "exp ms", "nonexp", "trans", "agg", "plan");
    Progress progress("step", s.steps, trainer.next_step());  // rank 0's stderr: steps done, ETA
    while (trainer.next_step() < s.steps) {
        ctx.watch->set_step(trainer.next_step());
        maybe_inject_fault(ctx.fault, ctx.comm->rank(), trainer.next_step());
        StepStats st = trainer.step();
        if (!std::isfinite(st.loss))
            throw Error(kExitRunFailed, "run failed: loss is " + std::to_string(st.loss) + " at step " +
                                            std::to_string(st.step) + "; fix: lower train.lr");
        if (root) {
            progress.clear();
            record_step(*ctx.store, ctx.run_id, st, previous, s.record_loads, D, s.model.E);
            if (args.json) {
                std::printf("%s\n", step_json(st).dump().c_str());
                std::fflush(stdout);
            } else if (st.step % s.log_every == 0 || st.step + 1 == s.steps) {
                std::printf("%6lld | %9.5f | %8.2f | %9.0f | %8.3f | %7.2f | %7.2f | %8.2f | %7.2f | %7.2f | %7.3f\n",
                            static_cast<long long>(st.step), st.loss, st.step_ms, st.tokens_per_s,
                            st.mean_max_mean_load, st.a2a_ms, st.expert_ms, st.nonexpert_ms, st.trans_ms, st.agg_ms,
                            st.plan_ms);
                std::fflush(stdout);
            }
            progress.update(st.step + 1);
        }
        previous = st.placements;
        if (save && s.save_every > 0 && (st.step + 1) % s.save_every == 0 && st.step + 1 < s.steps) {
            const std::string written = trainer.save(checkpoint_dir, ctx.run_id);
            if (root) ctx.store->put_event(ctx.run_id, st.step, 0, "info", "checkpoint", written, "");
        }
        if (!record_transitions) {
            st.counts.clear();
            st.counts.shrink_to_fit();
        }
        result.steps.push_back(std::move(st));
    }
    if (root) progress.finish();
    if (save) {
        const std::string written = trainer.save(checkpoint_dir, ctx.run_id);
        if (root) {
            ctx.store->put_event(ctx.run_id, trainer.next_step() - 1, 0, "info", "checkpoint", written, "");
            std::fprintf(stderr, "prophet: checkpoint %s\n", written.c_str());
        }
    }
    if (root) ctx.store->put_params(ctx.run_id, {testbed_steal_param(ctx.testbed)});  // steal over the loop
    return result;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

nlohmann::json summary_json(const RunContext& ctx, const LoopResult& r) {
    std::vector<double> ms, load, tps;
    // the first step pays for allocation and page faults; medians skip it when there are more
    for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i) {
        ms.push_back(r.steps[i].step_ms);
        load.push_back(r.steps[i].mean_max_mean_load);
        tps.push_back(r.steps[i].tokens_per_s);
    }
    return {{"summary", true},
            {"run_id", ctx.run_id},
            {"policy", ctx.settings.policy},
            {"ranks", ctx.comm->size()},
            {"steps", r.steps.size()},
            {"final_loss", r.steps.empty() ? 0.0 : r.steps.back().loss},
            {"median_step_ms", median(ms)},
            {"median_tokens_per_s", median(tps)},
            {"median_max_mean_load", median(load)}};
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainArgs& args) {
    CLI::App* cmd = app.add_subcommand("train", "train a MoE-GPT on CPU ranks (MPI) under a balancing policy");
    cmd->add_flag("--save", args.save, "write a checkpoint at the end (and every train.save_every steps)");
    cmd->add_option("--resume", args.resume, "continue from a checkpoint directory (or one step-N directory in it)");
    cmd->add_flag("--timeline", args.timeline,
                  "record every op of every rank (compute, all-to-all, Trans/Agg and the waits for them) into the "
                  "store; report/fig_gantt.py draws it");
    add_run_options(cmd, args.common);
    return cmd;
}

CLI::App* add_profile_command(CLI::App& app, ProfileArgs& args) {
    CLI::App* cmd = app.add_subcommand(
        "profile", "run N iterations and record the routing trace; --calibrate also measures this machine");
    cmd->add_option("-o,--out", args.trace_out, "trace file to write (default results/traces/<run_id>.ptrace)");
    cmd->add_flag("--calibrate", args.calibrate,
                  "measure all-to-all and point-to-point bandwidth, expert GEMM throughput and non-expert time, and "
                  "write a cluster file prophet plan accepts");
    cmd->add_option("--cluster-out", args.cluster_out,
                    "calibrated cluster file (default results/clusters/calibrated-<D>rank.toml)");
    cmd->add_option("--ops-shape", args.ops_shapes,
                    "with --calibrate: also measure the per-op model's attention rate at this model shape (its "
                    "GEMMs come from the calibration's fixed grid), KEY=N,... with keys C F NH V E T B over the "
                    "config's model (e.g. C=128,F=1024,NH=8); repeatable. For validating runs of other shapes; the "
                    "calibration run and its scale fit stay the config's")
        ->allow_extra_args(false);
    cmd->add_option(
        "--grid-passes", args.grid_passes,
        "with --calibrate: passes over the GEMM grid, each point keeping its fastest (default " +
            std::to_string(kDefaultGemmGridPasses) +
            ": a disturbance slows one pass only; 1 takes half the grid's time, about 10 s on a 2-core VM)");
    add_inference_flag(cmd);
    add_run_options(cmd, args.common);
    return cmd;
}

namespace {

void print_train_dry_run(const RunContext& ctx) {
    const MemoryEstimate mem = estimate_train_memory(ctx.settings.model, env_world_size());
    std::printf(
        "dry run: would train %lld steps on %d rank(s) with balance.policy=%s, recording into %s; "
        "memory per rank at least %s (up to %s with skewed routing)\n",
        static_cast<long long>(ctx.settings.steps), env_world_size(), ctx.settings.policy.c_str(),
        ctx.settings.store_path.c_str(), format_gib(mem.total_bytes()).c_str(), format_gib(mem.worst_bytes()).c_str());
}

// --resume: the trainer continues from the checkpoint; the root records the resume and closes the resumed run.
void resume_training(RunContext& ctx, Trainer& trainer, const std::string& resume, bool root) {
    trainer.resume(resume);
    if (!root) return;
    ctx.store->put_event(ctx.run_id, trainer.next_step(), 0, "info", "resume", resume, "");
    close_resumed_run(*ctx.store, resume, ctx.run_id, trainer.next_step());  // not left running
    std::fprintf(stderr, "prophet: resumed from %s at step %lld\n", resume.c_str(),
                 static_cast<long long>(trainer.next_step()));
}

// The root's end of a finished training run: the traffic event, the summary and the run marked finished.
void finish_training(RunContext& ctx, const LoopResult& r, int64_t step, const Traffic& traffic, bool json) {
    nlohmann::json summary = summary_json(ctx, r);
    summary["traffic"] = traffic_json(traffic);
    ctx.store->put_event(ctx.run_id, step, 0, "info", "traffic", "expert-parallel bytes per rank pair and host pair",
                         summary["traffic"].dump());
    if (json) std::printf("%s\n", summary.dump().c_str());
    std::fprintf(stderr, "prophet: run %s finished: %zu steps, final loss %.5f, median %.2f ms/step, %.0f tok/s\n",
                 ctx.run_id.c_str(), r.steps.size(), summary["final_loss"].get<double>(),
                 summary["median_step_ms"].get<double>(), summary["median_tokens_per_s"].get<double>());
    ctx.store->finish_run(ctx.run_id, "finished", 0, "");
    require_recorded(*ctx.store, {ctx.run_id}, "run " + ctx.run_id);  // exit 5 if its rows are lost
    ctx.store->checkpoint();
}

// A failure of a started run recorded with rank and step (main then aborts MPI); returns its exit code.
int record_run_failure(RunContext& ctx, int64_t step) {
    const Error e = current_exception_as_error();
    std::fprintf(stderr, "prophet: rank %d: %s\n", ctx.comm->rank(), e.what());
    ctx.watch->record_failure(e.exit_code(), e.what(), step);
    return e.exit_code();
}

}  // namespace

int run_train(const TrainArgs& args, int* argc, char*** argv) {
    const bool root_env = env_world_rank() == 0;
    if (args.common.help_config) {
        if (root_env) print_schema(train_schema(), "train");
        return kExitOk;
    }
    std::unique_ptr<RunContext> ctx;
    try {
        ctx = start_run("train", args.common, argc, argv);
    } catch (...) {  // every exception, not only prophet::Error: nothing may escape without its exit code
        return report_start_error(current_exception_as_error(), env_world_rank());
    }
    if (args.common.dry_run) {
        if (root_env) print_train_dry_run(*ctx);
        return kExitOk;
    }
    const bool root = ctx->comm->rank() == 0;
    int64_t step = 0;
    try {
        Trainer trainer(*ctx->comm, ctx->settings, checkpoint_config_hash(ctx->config));
        trainer.set_timeline(args.timeline);
        if (!args.resume.empty()) resume_training(*ctx, trainer, args.resume, root);
        if (root && !args.common.json) print_parameter_table(*ctx, trainer, stderr);
        const std::string checkpoint_dir = ctx->settings.checkpoint_dir.empty()
                                               ? "results/ckpt/" + ctx->run_id
                                               : ctx->settings.checkpoint_dir;
        const LoopResult r = run_loop(*ctx, trainer, args.common, args.save, false, checkpoint_dir);
        step = trainer.next_step();
        const Traffic traffic = gather_traffic(*ctx->comm, trainer.sent_bytes());  // collective
        if (root) finish_training(*ctx, r, step, traffic, args.common.json);
    } catch (...) {  // every exception is recorded with rank and step; main then aborts MPI (exit code != 0)
        return record_run_failure(*ctx, std::max(step, ctx->watch->step()));
    }
    ctx->comm->barrier();
    return kExitOk;
}

namespace {

// Everything about a profile's flags and config that can be wrong, checked before the run starts (nothing written):
// a trace records every routed token, so dropped tokens would make its counts disagree with tokens x top-k.
// Returns the --ops-shape models, each parsed against the config's.
std::vector<ModelConfig> check_profile_config(const ProfileArgs& args) {
    if (args.grid_passes) {
        if (!args.calibrate)
            throw_config_error("--grid-passes", std::to_string(*args.grid_passes), "only applies with --calibrate",
                               "add --calibrate or drop --grid-passes");
        check_grid_passes(*args.grid_passes);
    }
    const Config config = resolve_config(train_schema(), args.common);
    if (config.get_float("model.capacity_factor") > 0)
        throw_config_error("model.capacity_factor", std::to_string(config.get_float("model.capacity_factor")),
                           "must be 0 for prophet profile: a trace records every routed token, and dropped "
                           "tokens would make its counts disagree with tokens x top-k",
                           "--set model.capacity_factor=0");
    std::vector<ModelConfig> shapes;
    if (args.ops_shapes.empty()) return shapes;
    if (!args.calibrate)
        throw_config_error("--ops-shape", args.ops_shapes.front(), "only applies with --calibrate",
                           "add --calibrate or drop --ops-shape");
    const ModelConfig model = train_settings_from(config, env_world_size()).model;  // start_run's, from the same
    for (const std::string& text : args.ops_shapes) shapes.push_back(parse_ops_shape(text, model));
    return shapes;
}

// The directories above `path` (the working directory when it has none).
void create_parent_directories(const std::string& path) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::filesystem::create_directories(parent.empty() ? std::filesystem::path(".") : parent);
}

// The run's routing trace: every step's counts and transitions, in order.
Trace profile_trace(const RunContext& ctx, const LoopResult& r) {
    Trace trace;
    trace.meta = routing_trace_meta(ctx.settings.model, ctx.comm->size(), static_cast<int>(r.steps.size()),
                                    "profile:" + ctx.run_id);
    for (const StepStats& st : r.steps) {
        trace.counts.insert(trace.counts.end(), st.counts.begin(), st.counts.end());
        trace.transitions.insert(trace.transitions.end(), st.transitions.begin(), st.transitions.end());
    }
    return trace;
}

// The root writes the trace file and saves the trace in the store; out gets both names.
void save_profile_trace(RunContext& ctx, const Trace& trace, size_t steps, const std::string& trace_out,
                        nlohmann::json& out) {
    validate_trace(trace, trace.meta.source);
    const std::string path = trace_out.empty() ? "results/traces/" + ctx.run_id + ".ptrace" : trace_out;
    create_parent_directories(path);
    write_trace_file(trace, path);
    const std::string trace_id = ctx.store->save_trace(trace, ctx.run_id);
    out["trace_file"] = path;
    out["trace_id"] = trace_id;
    std::fprintf(stderr, "prophet: routing trace of %zu iterations: %s (store trace:%s)\n", steps, path.c_str(),
                 trace_id.c_str());
}

// --calibrate: every rank measures; the root fits the per-op model to this run and writes the cluster file.
void calibrate_profile(RunContext& ctx, Trainer& trainer, const ProfileArgs& args,
                       const std::vector<ModelConfig>& further_shapes, bool root, nlohmann::json& out) {
    const int D = ctx.comm->size();
    if (root) std::fprintf(stderr, "prophet: calibrating: communication and compute, then the per-op GEMM grid\n");
    // the emulated link, if any, and the per-op model's [ops]
    const Calibration cal = calibrate_machine(trainer.comm(), trainer.model(), ctx.settings);
    // the per-op tables on the unpaced transport: the model adds the emulated link on top (calibrate_ops.h); the
    // root shows the GEMM grid's progress (most of the calibration's time)
    std::optional<Progress> grid;
    GridProgress on_grid;
    if (root)
        on_grid = [&grid](int done, int total) {
            if (!grid) grid.emplace("GEMM grid timing", total);
            grid->update(done);
        };
    sim::OpTables ops = calibrate_op_tables(*ctx.comm, ctx.settings, further_shapes,
                                            args.grid_passes.value_or(kDefaultGemmGridPasses), on_grid);
    if (grid) grid->finish();
    if (!root) return;
    const sim::RecordedRun own = sim::load_recorded_run(*ctx.store, ctx.run_id);
    ops = sim::fit_to_recordings(ops, {&own});
    ClusterSpec cluster = calibration_cluster(cal, D);
    const std::string path =
        args.cluster_out.empty() ? "results/clusters/calibrated-" + std::to_string(D) + "rank.toml" : args.cluster_out;
    create_parent_directories(path);
    write_cluster_file(cluster, cal, path, sim::op_tables_to_toml(ops));
    ctx.store->put_event(ctx.run_id, 0, 0, "info", "calibration", path, calibration_json(cal));
    out["cluster_file"] = path;
    out["calibration"] = nlohmann::json::parse(calibration_json(cal));
    std::fprintf(stderr, "prophet: calibrated cluster file %s\n", path.c_str());
}

}  // namespace

int run_profile(const ProfileArgs& args, int* argc, char*** argv) {
    const bool root_env = env_world_rank() == 0;
    if (inference_requested()) return run_inference(args.common, env_world_size(), env_world_rank(), argc, argv);
    if (args.common.help_config) {
        if (root_env) print_schema(train_schema(), "profile");
        return kExitOk;
    }
    std::unique_ptr<RunContext> ctx;
    std::vector<ModelConfig> further_shapes;  // --ops-shape
    try {
        further_shapes = check_profile_config(args);
        ctx = start_run("profile", args.common, argc, argv);
    } catch (...) {  // every exception, not only prophet::Error: nothing may escape without its exit code
        return report_start_error(current_exception_as_error(), env_world_rank());
    }
    if (args.common.dry_run) {
        if (root_env)
            std::printf("dry run: would profile %lld iterations on %d rank(s)%s, recording into %s\n",
                        static_cast<long long>(ctx->settings.steps), env_world_size(),
                        args.calibrate ? " and calibrate" : "", ctx->settings.store_path.c_str());
        return kExitOk;
    }
    const bool root = ctx->comm->rank() == 0;
    try {
        Trainer trainer(*ctx->comm, ctx->settings, checkpoint_config_hash(ctx->config));
        trainer.set_timeline(args.calibrate);  // the calibration fits the per-op model's scales on this run's ops
        if (root && !args.common.json) print_parameter_table(*ctx, trainer, stderr);
        const LoopResult r = run_loop(*ctx, trainer, args.common, false, true, "");
        const Trace trace = profile_trace(*ctx, r);
        nlohmann::json out = {{"run_id", ctx->run_id}};
        if (root) save_profile_trace(*ctx, trace, r.steps.size(), args.trace_out, out);
        if (args.calibrate) calibrate_profile(*ctx, trainer, args, further_shapes, root, out);
        if (root) {
            if (args.common.json) std::printf("%s\n", out.dump().c_str());
            ctx->store->finish_run(ctx->run_id, "finished", 0, "");
            require_recorded(*ctx->store, {ctx->run_id}, "run " + ctx->run_id);
        }
    } catch (...) {  // every exception is recorded with rank and step; main then aborts MPI (exit code != 0)
        return record_run_failure(*ctx, ctx->watch->step());
    }
    ctx->comm->barrier();
    return kExitOk;
}

}  // namespace prophet::cli
