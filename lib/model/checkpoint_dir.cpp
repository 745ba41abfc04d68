// checkpoint_dir.cpp: the checkpoint directory: atomic save (write a temporary step directory, fsync, rename),
// `latest`, pruning old steps, the writer's lock and resolving a path to a step directory.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>

#include "core/atomic_file.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "model/checkpoint_internal.h"

namespace prophet {

namespace fs = std::filesystem;
using namespace checkpoint_detail;

namespace {

// the step encoded in a directory name "step-<digits>", or -1
int64_t step_of_name(const std::string& name) {
    if (name.size() <= 5 || name.compare(0, 5, "step-") != 0 || name.size() > 5 + 18) return -1;
    int64_t step = 0;
    for (size_t c = 5; c < name.size(); ++c) {
        if (name[c] < '0' || name[c] > '9') return -1;
        step = step * 10 + (name[c] - '0');
    }
    return step;
}

void rename_into_place(const std::string& tmp, const std::string& final_dir) {
    if (::rename(tmp.c_str(), final_dir.c_str()) == 0) return;
    if (errno != ENOTEMPTY && errno != EEXIST) io_error(final_dir, "cannot rename " + tmp + " to it", errno);
    // the same step was saved before: swap atomically, then drop the old copy (now at tmp)
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
        if (errno != EINVAL && errno != ENOSYS) io_error(final_dir, "cannot exchange it with " + tmp, errno);
        const std::string old = final_dir + ".old";  // file system without RENAME_EXCHANGE
        std::error_code ec;
        fs::remove_all(old, ec);
        if (::rename(final_dir.c_str(), old.c_str()) != 0) io_error(final_dir, "cannot move aside", errno);
        if (::rename(tmp.c_str(), final_dir.c_str()) != 0) io_error(final_dir, "cannot rename " + tmp, errno);
        fs::remove_all(old, ec);
        return;
    }
    std::error_code ec;
    fs::remove_all(tmp, ec);
}

}  // namespace

std::string checkpoint_dir_name(int64_t step) {
    char text[32];
    std::snprintf(text, sizeof(text), "step-%08lld", static_cast<long long>(step));
    return text;
}

std::string save_checkpoint(const std::string& dir, int64_t step, const std::vector<TensorView>& tensors,
                            const std::vector<TensorView>& optimizer_tensors,
                            const std::map<std::string, RngState>& rng_states, const CheckpointMeta& meta) {
    PROPHET_ASSERT(step >= 0);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) io_error(dir, "cannot create the checkpoint directory", ec.value());
    const std::string name = checkpoint_dir_name(step);
    const std::string tmp = (fs::path(dir) / (".tmp-" + name)).string();
    const std::string final_dir = (fs::path(dir) / name).string();
    fs::remove_all(tmp, ec);  // left by a save that crashed
    if (ec) io_error(tmp, "cannot remove a stale temporary directory", ec.value());
    if (::mkdir(tmp.c_str(), 0755) != 0) io_error(tmp, "cannot create", errno);

    write_safetensors((fs::path(tmp) / kModelFile).string(), tensors,
                      {{"format", "prophet"}, {"step", std::to_string(step)}, {"config_hash", meta.config_hash}});
    write_safetensors((fs::path(tmp) / kOptimizerFile).string(), optimizer_tensors,
                      {{"format", "prophet-optimizer"},
                       {"step", std::to_string(meta.optimizer_step)},
                       {"checkpoint_step", std::to_string(step)},
                       {"config_hash", meta.config_hash}});
    write_text_file((fs::path(tmp) / kStateFile).string(), state_json_text(step, rng_states, meta));
    sync_directory(tmp);

    rename_into_place(tmp, final_dir);
    sync_directory(dir);
    // a unique temporary created exclusively, renamed over `latest`, directory synced (core/atomic_file.h)
    write_file_atomically((fs::path(dir) / kLatestFile).string(), name + "\n");
    return final_dir;
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep) {
    std::vector<std::string> removed;
    if (keep <= 0) return removed;
    std::error_code ec;
    std::string latest =
        fs::exists(fs::path(dir) / kLatestFile, ec) ? read_text_file((fs::path(dir) / kLatestFile).string()) : "";
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r' || latest.back() == ' '))
        latest.pop_back();
    std::vector<std::pair<int64_t, std::string>> steps;  // (step, name) of every real step directory
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        const int64_t step = step_of_name(name);
        if (step >= 0 && entry.symlink_status(ec).type() == fs::file_type::directory) steps.emplace_back(step, name);
    }
    std::sort(steps.begin(), steps.end(), std::greater<>());  // newest first
    for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i) {
        if (steps[i].second == latest) continue;
        const std::string path = (fs::path(dir) / steps[i].second).string();
        fs::remove_all(path, ec);
        if (ec) io_error(path, "cannot remove an old checkpoint (train.keep_checkpoints)", ec.value());
        removed.push_back(path);
    }
    return removed;
}

FileLock lock_checkpoint_dir(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) io_error(dir, "cannot create the checkpoint directory", ec.value());
    const std::string path = (fs::path(dir) / ".lock").string();
    std::optional<FileLock> lock = FileLock::try_acquire(path, kExitResource);
    if (!lock)
        throw Error(kExitResource, "resource error: checkpoint directory " + dir +
                                       " is in use: another run writes it "
                                       "(it holds " +
                                       path +
                                       "); fix: set train.checkpoint_dir to another directory, or "
                                       "wait for that run to end");
    return std::move(*lock);
}

std::string resolve_checkpoint(const std::string& path) {
    const std::string fix = "pass a checkpoint directory written by prophet, or one of its step-N directories";
    std::error_code ec;
    if (!fs::is_directory(path, ec)) throw_input_error(path, "no such checkpoint directory", fix);
    if (fs::is_regular_file(fs::path(path) / kStateFile, ec)) return path;
    const fs::path latest = fs::path(path) / kLatestFile;
    if (fs::exists(latest, ec)) {
        std::string name = read_text_file(latest.string());
        while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
            throw_input_error(latest.string(), "corrupted: does not name a step directory",
                              "write the name of a complete step directory into it, e.g. step-00000100");
        const fs::path target = fs::path(path) / name;
        if (!fs::is_regular_file(target / kStateFile, ec))
            throw_input_error(latest.string(), "names " + name + " but " + target.string() + " holds no " + kStateFile,
                              "pass a complete step directory instead (ls " + path + ")");
        return target.string();
    }
    int64_t best = -1;
    std::string best_dir;
    for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
        const int64_t step = step_of_name(entry.path().filename().string());
        if (step > best && fs::is_regular_file(entry.path() / kStateFile, ec)) {
            best = step;
            best_dir = entry.path().string();
        }
    }
    if (best < 0) throw_input_error(path, "not a checkpoint: no latest, state.json or step-N directory", fix);
    return best_dir;
}

}  // namespace prophet
