#include "cmd_infer.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "comm/comm.h"
#include "core/error.h"
#include "kernels/blas.h"
#include "serve/serve_config.h"
#include "serve/serve_loop.h"
#include "serve/serve_record.h"
#include "serve/serve_sim.h"
#include "train/failure_watch.h"
#include "train/fault_inject.h"

namespace prophet::cli {

namespace {

bool g_inference = false;  // --inference of the profile subcommand

void print_tails(const serve::RunTails& t, FILE* out) {
    std::fprintf(out, "%-7s %-6s | %8s %8s %8s %12s  (ms; per-layer max over ranks, over batches)\n", "layer", "kind",
                 "p50", "p95", "p99", "mean-of-max");
    auto row = [&](const std::string& layer, const char* kind, const serve::TailSummary& s) {
        std::fprintf(out, "%-7s %-6s | %8.3f %8.3f %8.3f %12.3f\n", layer.c_str(), kind, s.p50, s.p95, s.p99,
                     s.mean_of_max);
    };
    for (size_t l = 0; l < t.expert.size(); ++l) {
        row(std::to_string(l), "expert", t.expert[l]);
        row(std::to_string(l), "a2a", t.a2a[l]);
    }
    row("sum", "expert", t.expert_sum);
    row("sum", "a2a", t.a2a_sum);
    row("sum", "layer", t.layer_sum);
    row("-", "fwd", t.forward);
}

nlohmann::json tail_json(const serve::TailSummary& s) {
    return {{"p50", s.p50}, {"p95", s.p95}, {"p99", s.p99}, {"mean_of_max", s.mean_of_max}, {"max", s.max}};
}

// serve.sim_clusters: the recorded routing served again on each simulated cluster, one child run each
void simulate_on_clusters(Store& store, const std::string& parent, const Config& config, const CommonArgs& args,
                          const serve::ServeSettings& s, const serve::ServeRun& real, int D) {
    const double tokens_per_device = static_cast<double>(s.base.model.B) / D * s.base.model.T;
    const double scale = static_cast<double>(s.sim_tokens_per_device) / tokens_per_device;
    for (const std::string& path : s.sim_clusters) {
        const CostModel cost = serve::simulated_cost_model(path, D, s.sim_d_model, s.sim_d_ffn, s.sim_bytes_per_elem,
                                                           s.sim_tokens_per_device);
        const int nodes = std::max(1, D / std::max(1, cost.cluster.devices_per_node));
        const serve::ServeRun sim = serve::simulate_serving(real, s.base.policy, cost, s.base.balance, nodes, scale);
        RunInfo info = make_run_info("profile --inference (simulated)", config, args);
        info.experiment = s.base.experiment;
        info.seed = s.base.seed;
        info.world_size = D;
        info.backend = "sim";
        info.simulated = true;
        info.parent_id = parent;
        std::string id;
        store.transaction([&] {
            id = store.begin_run(info);
            auto params = config.flat();
            params.emplace_back("serve.sim_cluster", "\"" + path + "\"");
            params.emplace_back("serve.sim_cluster_name", "\"" + cost.cluster.name + "\"");
            store.put_params(id, params);
        });
        serve::record_serve_run(store, id, s, sim);
        store.finish_run(id, "finished", 0, "");
        const serve::RunTails t = serve::run_tails(sim);
        std::fprintf(stderr,
                     "prophet: simulated on %s (run %s): MoE part p50 %.3f ms, p99 %.3f ms, mean-of-max %.3f ms; "
                     "all-to-all mean-of-max %.3f ms (token path %s)\n",
                     cost.cluster.name.c_str(), id.c_str(), t.layer_sum.p50, t.layer_sum.p99, t.layer_sum.mean_of_max,
                     t.a2a_sum.mean_of_max, sim.token_path.c_str());
    }
}

// Root: opens the store and begins the run (its params: the config and the BLAS build); returns the run id.
std::string begin_inference_run(Store& store, const Config& config, const CommonArgs& args,
                                const serve::ServeSettings& settings, const Communicator& comm) {
    std::string run_id;
    RunInfo info = make_run_info("profile --inference", config, args);
    info.experiment = settings.base.experiment;
    info.seed = settings.base.seed;
    info.world_size = comm.size();
    info.backend = std::string("cpu-") + comm.name();
    store.transaction([&] {
        run_id = store.begin_run(info);
        auto params = config.flat();
        params.emplace_back("blas", blas_config());
        store.put_params(run_id, params);
    });
    std::fprintf(stderr, "prophet: inference run %s: %d rank(s), policy %s, %s\n", run_id.c_str(), comm.size(),
                 settings.base.policy.c_str(),
                 settings.out_of_sample ? "out-of-sample (data B)" : "in-sample (data A)");
    return run_id;
}

// The --json summary line prophet sweep's real engine reads (median_step_ms = median forward time).
void print_summary_json(const std::string& run_id, const serve::ServeSettings& settings, const serve::ServeRun& run,
                        const serve::RunTails& tails, int ranks, double median_ms, double final_loss) {
    nlohmann::json layers = nlohmann::json::array();
    for (size_t l = 0; l < tails.expert.size(); ++l)
        layers.push_back({{"layer", l}, {"expert", tail_json(tails.expert[l])}, {"a2a", tail_json(tails.a2a[l])}});
    const double tokens = static_cast<double>(settings.base.model.B) * settings.base.model.T;
    const nlohmann::json summary = {{"summary", true},
                                    {"run_id", run_id},
                                    {"policy", settings.base.policy},
                                    {"ranks", ranks},
                                    {"steps", run.measured.size()},
                                    {"out_of_sample", settings.out_of_sample},
                                    {"final_loss", final_loss},
                                    {"median_step_ms", median_ms},
                                    {"median_tokens_per_s", tokens / (median_ms * 1e-3)},
                                    {"offline_plan_s", run.offline_plan_s},
                                    {"layers", layers},
                                    {"expert_sum", tail_json(tails.expert_sum)},
                                    {"a2a_sum", tail_json(tails.a2a_sum)},
                                    {"layer_sum", tail_json(tails.layer_sum)},
                                    {"forward", tail_json(tails.forward)}};
    std::printf("%s\n", summary.dump().c_str());
}

// When the run moved tokens between layers (balance.token_path): bytes and median time per batch, on stderr.
void print_token_path(const serve::ServeRun& run) {
    if (run.measured.front().token_path_ms.empty()) return;
    std::vector<double> path_ms;
    double bytes = 0;
    for (const serve::BatchResult& b : run.measured) {
        path_ms.push_back(0);
        for (size_t l = 0; l < b.token_path_ms.size(); ++l) {
            path_ms.back() += b.token_path_ms[l];
            bytes += static_cast<double>(b.token_path_bytes[l]) / static_cast<double>(run.measured.size());
        }
    }
    std::fprintf(stderr,
                 "prophet: layer-to-layer token path moved on the ranks after each forward: %.4g bytes "
                 "and median %.3f ms per batch over its %zu layer boundaries\n",
                 bytes, serve::percentile(path_ms, 50), run.measured.front().token_path_ms.size());
}

// Root, after serving: records the run, prints its tails (or the JSON summary), then the simulated clusters.
void finish_inference_run(Store& store, const std::string& run_id, const Config& config, const CommonArgs& args,
                          const serve::ServeSettings& settings, const serve::ServeRun& run, int ranks) {
    serve::record_serve_run(store, run_id, settings, run);
    const serve::RunTails tails = serve::run_tails(run);
    std::vector<double> forward, loss;
    for (const serve::BatchResult& b : run.measured) forward.push_back(b.forward_ms), loss.push_back(b.loss);
    const double median_ms = serve::percentile(forward, 50);
    if (args.json) {
        print_summary_json(run_id, settings, run, tails, ranks, median_ms, loss.back());
    } else {
        print_tails(tails, stdout);
    }
    std::fprintf(stderr, "prophet: run %s finished: %zu measured batches, median forward %.3f ms\n", run_id.c_str(),
                 run.measured.size(), median_ms);
    print_token_path(run);
    store.finish_run(run_id, "finished", 0, "");
    require_recorded(store, {run_id}, "run " + run_id);
    simulate_on_clusters(store, run_id, config, args, settings, run, ranks);
    store.checkpoint();
}

// Inside the catch of run_inference: the error with its rank on stderr, recorded on the run (by the failure
// watch, or directly before it exists); returns the exit code.
int record_inference_failure(int rank, FailureWatch* watch, Store* store, const std::string& run_id) {
    const Error e = current_exception_as_error();
    std::fprintf(stderr, "prophet: rank %d: %s\n", rank, e.what());
    if (watch) {
        watch->record_failure(e.exit_code(), e.what(), watch->step());
    } else if (store && !run_id.empty()) {
        try {
            store->finish_run(run_id, "failed", e.exit_code(), e.what());
        } catch (const std::exception&) {
            // the original error is what the user needs to see
        }
    }
    return e.exit_code();
}

void print_dry_run(const serve::ServeSettings& settings, int world_size) {
    std::printf(
        "dry run: would profile %d batches, then serve %d + %d batches (%s) on %d rank(s) with "
        "balance.policy=%s, recording into %s\n",
        settings.profile_iterations, settings.warmup, settings.iterations,
        settings.out_of_sample ? "out-of-sample, data B" : "in-sample, data A", world_size,
        settings.base.policy.c_str(), settings.base.store_path.c_str());
}

}  // namespace

void add_inference_flag(CLI::App* profile) {
    profile->add_flag("--inference", g_inference,
                      "forward-only expert-parallel inference: profile routing on data A, plan the policy's "
                      "placement, measure per-layer expert and all-to-all tail latencies (serve.* keys; "
                      "docs/serving.md)");
}

bool inference_requested() { return g_inference; }

int run_inference(const CommonArgs& args, int world_size, int world_rank, int* argc, char*** argv) {
    const bool root_env = world_rank == 0;
    if (args.help_config) {
        if (root_env) print_schema(serve::serve_schema(), "profile --inference");
        return kExitOk;
    }
    Config config(serve::serve_schema());
    serve::ServeSettings settings;
    FaultPlan fault;  // debug.* (test-only); a step is a batch, counted over profile, warm-up and measured batches
    try {
        config = resolve_config(serve::serve_schema(), args);
        settings = serve::serve_settings_from(config, world_size);
        fault = fault_plan_from(config, world_size);
    } catch (...) {  // every exception, not only prophet::Error
        return report_start_error(current_exception_as_error(), world_rank);
    }
    if (args.dry_run) {
        if (root_env) print_dry_run(settings, world_size);
        return kExitOk;
    }
    bool is_mpi = false;
    std::unique_ptr<Communicator> comm = make_world_communicator(argc, argv, &is_mpi);
    comm->set_timeout_s(settings.base.comm_timeout_s);
    blas_set_num_threads(settings.base.threads);
    const bool root = comm->rank() == 0;
    std::unique_ptr<Store> store;
    std::string run_id;
    std::unique_ptr<FailureWatch> watch;  // records the run when an error or a signal ends it
    try {
        if (root) {
            store = std::make_unique<Store>(Store::open(settings.base.store_path));
            run_id = begin_inference_run(*store, config, args, settings, *comm);
        }
        // every rank learns the run id, so that any rank can record a failure (FailureWatch::record_failure)
        char id[32] = {0};
        std::snprintf(id, sizeof id, "%s", run_id.c_str());
        comm->broadcast(id, sizeof id, 0);
        run_id = id;
        watch = std::make_unique<FailureWatch>(*comm, settings.base.store_path, run_id);
        int64_t batches_done = 0;
        maybe_inject_fault(fault, comm->rank(), batches_done);
        const serve::BatchCallback progress = [&](const std::string& phase, int index, const serve::BatchResult& b) {
            watch->set_step(++batches_done);
            maybe_inject_fault(fault, comm->rank(), batches_done);
            if (!root || args.json || phase != "measure") return;
            if (index % settings.base.log_every == 0 || index + 1 == settings.iterations)
                std::fprintf(stderr, "  batch %4d | forward %8.3f ms | loss %.4f\n", index, b.forward_ms, b.loss);
        };
        const serve::ServeRun run = serve::run_serving(*comm, settings, progress);
        if (root) finish_inference_run(*store, run_id, config, args, settings, run, comm->size());
    } catch (...) {  // every exception is recorded with rank and step; main then aborts MPI (exit code != 0)
        return record_inference_failure(comm->rank(), watch.get(), store.get(), run_id);
    }
    comm->barrier();
    return kExitOk;
}

}  // namespace prophet::cli
