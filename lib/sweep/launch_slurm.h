// launch_slurm.h: `prophet sweep FILE --launcher slurm`: the sweep's missing points as one Slurm job array.
//
// Each array task runs `prophet sweep FILE --points LIST` (the local runner, restricted to its share of points)
// with its OWN shard store <shard dir>/shard-<first point>.db, because SQLite on a shared file system is not
// safe for concurrent writers; `prophet db merge` (lib/store/merge.h) folds the shards into the sweep's store,
// idempotently. A point counts as done when a finished run of it (same sweep name and point hash) is in the store
// or in any shard, so a re-submitted sweep runs only the missing (never run, failed, cancelled) points.
// Multi-rank points (engine "real", ranks > 1) run mpirun inside the allocation, as locally.
// docs/cluster.md has the file format and a worked example.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sweep/sweep.h"

namespace prophet::sweep {

// [sweep.slurm] of a sweep file; every key is optional.
struct SlurmSpec {
    int nodes = 1;
    int tasks_per_node = 0;   // 0: the largest `ranks` of the points (1 for engines sim / model)
    int cpus_per_task = 1;
    std::string time = "01:00:00";  // --time, Slurm's [days-]hours:minutes:seconds
    std::string partition, account;  // empty: the cluster's default
    int points_per_task = 1;         // points one array task runs, one after another
    int max_parallel = 0;            // the array's %N throttle; 0: none
    std::string shard_dir;           // empty: <store>.shards next to the store (must be on a shared file system)
};

// Reads [sweep.slurm] of the sweep file; throws prophet::Error (exit 3) naming key, value and rule.
SlurmSpec parse_slurm_spec(const std::string& sweep_file);

std::string shard_directory(const SlurmSpec& slurm, const std::string& store_path);

// Per point (1-based number): "finished", "failed" (recorded, none finished) or "missing", from the store and
// every *.db shard in shard_dir.
struct SweepProgress {
    std::map<int, std::string> state;
    int finished = 0, failed = 0, missing = 0;
    std::vector<std::string> shards;  // the shard files found
};
SweepProgress read_progress(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                            const std::string& store_path, const std::string& shard_dir);

struct BatchJob {
    std::vector<std::vector<int>> tasks;  // array index -> the 1-based point numbers it runs
    std::string script;                   // the sbatch script text
};

// The batch script for `points` (1-based numbers): #SBATCH resources, the array, and one `prophet sweep` per
// task writing its own shard. `sweep_file`, `prophet_binary` and `workdir` are absolute. Names and paths are
// quoted (double quotes in #SBATCH lines, single quotes in the shell); a control character in any of them, or a
// sweep name that is no file name (core/names.h), is a config error (exit 3) naming the field.
BatchJob make_batch_job(const SweepSpec& spec, const SlurmSpec& slurm, const std::vector<SweepPoint>& points,
                        const std::vector<int>& to_run, const std::string& sweep_file,
                        const std::string& prophet_binary, const std::string& workdir, const std::string& shard_dir);

// Job name of a sweep's arrays: "prophet-<sweep name>" (squeue --name finds them).
std::string job_name(const SweepSpec& spec);

// `sbatch --parsable [--wait] SCRIPT`: the job id. Throws prophet::Error (exit 1) with sbatch's message when the
// job is not accepted. With wait, sbatch's non-zero exit for a failed task is not an error: a failed point exits
// the task's `prophet sweep` with 1 and is recorded in its shard.
std::string submit_batch(const std::string& script_path, bool wait);

// squeue lines "<job id> <state>" of the sweep's jobs still known to Slurm; empty when none. `available` is false
// when squeue cannot run (no Slurm here). Lists every job and keeps those whose name is exactly job_name(spec)
// (`squeue --name` would split a name holding a comma).
std::vector<std::string> queued_jobs(const SweepSpec& spec, bool* available);
// The "<job id> <state>" of the lines "<job id> <state> <job name>" of `squeue_out` whose job name is `name`.
std::vector<std::string> jobs_named(const std::string& squeue_out, const std::string& name);

}  // namespace prophet::sweep
