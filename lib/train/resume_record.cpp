// resume_record.cpp: finding the run a checkpoint came from and closing it on --resume.
#include "train/resume_record.h"

#include <cstdio>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "model/checkpoint.h"
#include "store/run_health.h"
#include "store/run_lock.h"

namespace prophet {

namespace {

bool has_run(Store& store, const std::string& run_id) {
    try {
        store.get_run(run_id);
        return true;
    } catch (const Error&) {  // exit 3: no such run
        return false;
    }
}

}  // namespace

std::string checkpoint_source_run(Store& store, const std::string& checkpoint_path) {
    const CheckpointInfo info = inspect_checkpoint(checkpoint_path);
    const auto saved = info.meta.extra.find("run_id");
    if (saved != info.meta.extra.end()) return has_run(store, saved->second) ? saved->second : "";
    // A checkpoint from before extra.run_id, in the default layout results/ckpt/<run_id>/step-N.
    const std::string parent = std::filesystem::path(info.dir).parent_path().filename().string();
    return !parent.empty() && has_run(store, parent) ? parent : "";
}

std::string close_resumed_run(Store& store, const std::string& checkpoint_path, const std::string& new_run,
                              int64_t from_step) {
    const std::string old_run = checkpoint_source_run(store, checkpoint_path);
    if (old_run.empty() || old_run == new_run) {
        std::fprintf(stderr, "prophet: the run that wrote %s is not in %s; nothing to close\n",
                     checkpoint_path.c_str(), store.path().c_str());
        return "";
    }
    const RunRow old = store.get_run(old_run);
    // alive as db check judges it (its run lock held, or its pid here), never by the heartbeat's age
    const bool alive =
        old.status == "running" && judge_running_run(old, 0, std::numeric_limits<int64_t>::max(), current_host(),
                                                     process_gone, probe_run_lock(store.path(), old_run))
                                           .liveness == RunLiveness::kAlive;
    store.link_resume(old_run, new_run, from_step, !alive);
    if (alive)
        std::fprintf(stderr,
                     "prophet: run %s, whose checkpoint this run continues, still runs (pid %lld); left "
                     "running\n",
                     old_run.c_str(), static_cast<long long>(old.pid.value_or(-1)));
    else
        std::fprintf(stderr, "prophet: run %s (%s) resumed by %s\n", old_run.c_str(),
                     old.status == "running" ? "was running, now resumed" : old.status.c_str(), new_run.c_str());
    return old_run;
}

}  // namespace prophet
