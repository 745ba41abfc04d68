// cmd_sweep_slurm.cpp: `prophet sweep FILE --launcher slurm` and `prophet sweep FILE --status`: output and flow;
// the script, shards and queue live in lib/sweep/launch_slurm.cpp, the merge in lib/store/merge.cpp.
#include "cmd_sweep_slurm.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/names.h"
#include "core/process.h"
#include "store/merge.h"
#include "sweep/launch_slurm.h"

namespace prophet::cli {

namespace fs = std::filesystem;

namespace {

std::vector<int> unfinished(const sweep::SweepProgress& progress) {
    std::vector<int> out;
    for (const auto& [point, state] : progress.state)
        if (state != "finished") out.push_back(point);
    return out;
}

// merges every shard into the store (idempotent); returns the runs added
int64_t merge_shards(const sweep::SweepProgress& progress, const std::string& store_path) {
    if (progress.shards.empty()) return 0;
    return merge_stores(progress.shards, store_path).runs_added;
}

nlohmann::json progress_json(const sweep::SweepProgress& p) {
    nlohmann::json points = nlohmann::json::object();
    for (const auto& [point, state] : p.state) points[std::to_string(point)] = state;
    return {{"finished", p.finished}, {"failed", p.failed}, {"missing", p.missing}, {"points", points},
            {"shards", p.shards}};
}

// a resubmission while the sweep's jobs are still queued would run their points twice
void check_none_queued(const sweep::SweepSpec& spec) {
    bool available = false;
    const std::vector<std::string> queued = sweep::queued_jobs(spec, &available);
    if (!queued.empty())
        throw Error(kExitUsage, "prophet sweep: " + std::to_string(queued.size()) + " job(s) named " +
                                    sweep::job_name(spec) + " are still in the queue (first: " + queued[0] +
                                    "); wait for them (prophet sweep --status) or scancel them, then resubmit");
}

// writes the job's sbatch script into shard_dir as <sweep name>-<unix seconds>.sbatch; returns its path
std::string write_batch_script(const sweep::SweepSpec& spec, const sweep::BatchJob& job, const std::string& shard_dir) {
    fs::create_directories(shard_dir);
    const auto stamp =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    check_file_name("sweep.name", spec.name);  // a file name in shard_dir: no separator, no leading dot
    const std::string script_path = shard_dir + "/" + spec.name + "-" + std::to_string(stamp) + ".sbatch";
    write_file_atomically(script_path, job.script);
    return script_path;
}

}  // namespace

int run_sweep_slurm(const SweepArgs& args, const sweep::SweepSpec& spec, const std::string& store_path) {
    const sweep::SlurmSpec slurm = sweep::parse_slurm_spec(args.file);
    const std::string shard_dir = fs::absolute(sweep::shard_directory(slurm, store_path)).string();
    const std::vector<sweep::SweepPoint> points = sweep::expand_points(spec);
    sweep::SweepProgress progress = sweep::read_progress(spec, points, store_path, shard_dir);
    const std::vector<int> to_run = unfinished(progress);
    if (!args.common.dry_run) check_none_queued(spec);
    if (to_run.empty()) {
        const int64_t added = args.common.dry_run ? 0 : merge_shards(progress, store_path);
        if (args.common.json)
            std::printf("%s\n", nlohmann::json{{"points", points.size()}, {"submitted_points", nlohmann::json::array()},
                                               {"merged_runs", added}, {"store", store_path}}
                                    .dump(2)
                                    .c_str());
        else
            std::fprintf(stderr, "prophet sweep: %s: all %zu points finished; nothing to submit (store %s)\n",
                         spec.name.c_str(), points.size(), store_path.c_str());
        return kExitOk;
    }
    const sweep::BatchJob job = sweep::make_batch_job(spec, slurm, points, to_run, fs::absolute(args.file).string(),
                                                      self_binary(), fs::current_path().string(), shard_dir);
    if (args.common.dry_run) {
        if (args.common.json)
            std::printf("%s\n", nlohmann::json{{"points", points.size()}, {"submitted_points", to_run},
                                               {"tasks", job.tasks.size()}, {"script", job.script}}
                                    .dump(2)
                                    .c_str());
        else
            std::printf("%s", job.script.c_str());
        return kExitOk;
    }
    const std::string script_path = write_batch_script(spec, job, shard_dir);
    std::fprintf(stderr, "prophet sweep: %s: submitting %zu of %zu points as %zu array task(s): %s\n",
                 spec.name.c_str(), to_run.size(), points.size(), job.tasks.size(), script_path.c_str());
    const std::string job_id = sweep::submit_batch(script_path, args.wait);
    std::fprintf(stderr, "prophet sweep: job %s%s\n", job_id.c_str(), args.wait ? " finished" : " submitted");
    nlohmann::json out = {{"points", points.size()}, {"submitted_points", to_run}, {"tasks", job.tasks.size()},
                          {"job_id", job_id},        {"script_path", script_path}, {"store", store_path}};
    int rc = kExitOk;
    if (args.wait) {
        progress = sweep::read_progress(spec, points, store_path, shard_dir);
        out["merged_runs"] = merge_shards(progress, store_path);
        out["progress"] = progress_json(progress);
        std::fprintf(stderr, "prophet sweep: %s: %d finished, %d failed, %d missing; shards merged into %s\n",
                     spec.name.c_str(), progress.finished, progress.failed, progress.missing, store_path.c_str());
        if (progress.failed + progress.missing > 0) rc = kExitRunFailed;
    }
    if (args.common.json) std::printf("%s\n", out.dump(2).c_str());
    return rc;
}

int run_sweep_status(const SweepArgs& args, const sweep::SweepSpec& spec, const std::string& store_path) {
    const sweep::SlurmSpec slurm = sweep::parse_slurm_spec(args.file);
    const std::string shard_dir = sweep::shard_directory(slurm, store_path);
    const std::vector<sweep::SweepPoint> points = sweep::expand_points(spec);
    const sweep::SweepProgress progress = sweep::read_progress(spec, points, store_path, shard_dir);
    bool available = false;
    const std::vector<std::string> queued = sweep::queued_jobs(spec, &available);
    if (args.common.json) {
        nlohmann::json out = progress_json(progress);
        out["store"] = store_path;
        out["queue"] = available ? nlohmann::json(queued) : nlohmann::json(nullptr);
        std::printf("%s\n", out.dump(2).c_str());
        return kExitOk;
    }
    std::printf("sweep %s: %zu points: %d finished, %d failed, %d missing (store %s, %zu shard(s) in %s)\n",
                spec.name.c_str(), points.size(), progress.finished, progress.failed, progress.missing,
                store_path.c_str(), progress.shards.size(), shard_dir.c_str());
    for (const auto& [point, state] : progress.state)
        if (state != "finished") std::printf("  point %d: %s\n", point, state.c_str());
    if (!available)
        std::printf("queue: squeue not available here\n");
    else
        std::printf("queue: %zu job(s) named %s%s\n", queued.size(), sweep::job_name(spec).c_str(),
                    queued.empty() ? "" : ":");
    for (const std::string& line : queued) std::printf("  %s\n", line.c_str());
    return kExitOk;
}

}  // namespace prophet::cli
