// launch_slurm.cpp: the Slurm launcher of `prophet sweep` (launch_slurm.h, docs/cluster.md).
#include "sweep/launch_slurm.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "core/error.h"
#include "core/join.h"
#include "core/names.h"
#include "core/process.h"
#include "core/toml_text.h"
#include "store/store.h"

namespace prophet::sweep {

namespace fs = std::filesystem;

namespace {

const char* kSlurmKeys[] = {"nodes", "tasks_per_node", "cpus_per_task", "time", "partition",
                            "account", "points_per_task", "max_parallel", "shard_dir"};

int positive_int(const toml::node& node, const std::string& key, int min) {
    const auto v = node.value<int64_t>();
    if (!node.is_integer() || !v || *v < min || *v > 1000000)
        throw_config_error("sweep.slurm." + key, toml_node_text(node),
                           "must be an integer >= " + std::to_string(min),
                           key + " = " + std::to_string(std::max(min, 1)));
    return static_cast<int>(*v);
}

// a value pasted into an #SBATCH line: no whitespace, quotes or shell metacharacters
std::string slurm_word(const toml::node& node, const std::string& key, const std::string& example) {
    const auto* s = node.as_string();
    const std::string v = s ? s->get() : "";
    const bool ok = s && !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.' ||
               c == ',';
    });
    if (!ok)
        throw_config_error("sweep.slurm." + key, toml_node_text(node),
                           "must be a non-empty string of letters, digits and - _ : . ,",
                           key + " = \"" + example + "\"");
    return v;
}

// a value of an #SBATCH line as sbatch reads it: in double quotes, with \ and " escaped by a backslash (sbatch's
// directive parser honours both; a space or # inside the quotes is part of the value)
std::string sbatch_quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

// a directory in --output's file name pattern: a literal % is written %%
std::string output_pattern_literal(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '%' ? std::string("%%") : std::string(1, c);
    return out;
}

// every name and path the batch script holds is one line (a newline would start a script line of its own)
void check_script_inputs(const SweepSpec& spec, const std::string& sweep_file, const std::string& prophet_binary,
                         const std::string& workdir, const std::string& shard_dir) {
    check_file_name("sweep.name", spec.name);
    check_single_line("sweep file", sweep_file);
    check_single_line("prophet binary", prophet_binary);
    check_single_line("working directory", workdir);
    check_single_line("sweep.slurm.shard_dir", shard_dir);
}

}  // namespace

SlurmSpec parse_slurm_spec(const std::string& sweep_file) {
    SlurmSpec spec;
    toml::table root;
    try {
        root = toml::parse_file(sweep_file);
    } catch (const toml::parse_error& e) {
        throw_input_error(sweep_file, std::string("TOML syntax error: ") + std::string(e.description()),
                          "fix the TOML syntax");
    }
    const toml::node* node = root.at_path("sweep.slurm").node();
    if (!node) return spec;
    const toml::table* table = node->as_table();
    if (!table)
        throw_config_error("sweep.slurm", toml_node_text(*node), "must be a table",
                           "[sweep.slurm] with nodes = 1, ...");
    for (const auto& [key, value] : *table) {
        const std::string k(key.str());
        if (std::find(std::begin(kSlurmKeys), std::end(kSlurmKeys), k) == std::end(kSlurmKeys))
            throw_config_error("sweep.slurm." + k, toml_node_text(value), "unknown key",
                               "use only nodes, tasks_per_node, cpus_per_task, time, partition, account, "
                               "points_per_task, max_parallel, shard_dir");
        if (k == "nodes") spec.nodes = positive_int(value, k, 1);
        if (k == "tasks_per_node") spec.tasks_per_node = positive_int(value, k, 1);
        if (k == "cpus_per_task") spec.cpus_per_task = positive_int(value, k, 1);
        if (k == "points_per_task") spec.points_per_task = positive_int(value, k, 1);
        if (k == "max_parallel") spec.max_parallel = positive_int(value, k, 1);
        if (k == "time") spec.time = slurm_word(value, k, "02:00:00");
        if (k == "partition") spec.partition = slurm_word(value, k, "gpu");
        if (k == "account") spec.account = slurm_word(value, k, "my-project");
        if (k == "shard_dir") {
            const auto* s = value.as_string();
            if (!s || s->get().empty())
                throw_config_error("sweep.slurm.shard_dir", toml_node_text(value), "must be a non-empty path",
                                   "shard_dir = \"/shared/results/my-sweep.shards\"");
            check_single_line("sweep.slurm.shard_dir", s->get());
            spec.shard_dir = s->get();
        }
    }
    return spec;
}

std::string shard_directory(const SlurmSpec& slurm, const std::string& store_path) {
    return slurm.shard_dir.empty() ? store_path + ".shards" : slurm.shard_dir;
}

std::string job_name(const SweepSpec& spec) { return "prophet-" + spec.name; }

SweepProgress read_progress(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                            const std::string& store_path, const std::string& shard_dir) {
    SweepProgress progress;
    std::error_code ec;
    std::vector<std::string> stores;
    if (fs::is_regular_file(store_path, ec)) stores.push_back(store_path);
    if (fs::is_directory(shard_dir, ec))
        for (const auto& entry : fs::directory_iterator(shard_dir, ec))
            if (entry.path().extension() == ".db") progress.shards.push_back(entry.path().string());
    std::sort(progress.shards.begin(), progress.shards.end());
    stores.insert(stores.end(), progress.shards.begin(), progress.shards.end());
    std::set<std::string> finished, failed;  // point hashes
    for (const std::string& path : stores) {
        if (!has_store_schema(path)) continue;  // an empty file: no runs, and a status never writes a schema
        Store store = Store::open(path);
        for (const RunRow& row : store.list_runs(spec.name)) {
            if (row.info.command != "sweep") continue;
            if (row.status == "finished") finished.insert(row.info.config_hash);
            if (row.status == "failed") failed.insert(row.info.config_hash);
        }
    }
    for (const SweepPoint& p : points) {
        const std::string state = finished.count(p.hash) ? "finished" : failed.count(p.hash) ? "failed" : "missing";
        progress.state[p.index + 1] = state;
        ++(state == "finished" ? progress.finished : state == "failed" ? progress.failed : progress.missing);
    }
    return progress;
}

BatchJob make_batch_job(const SweepSpec& spec, const SlurmSpec& slurm, const std::vector<SweepPoint>& points,
                        const std::vector<int>& to_run, const std::string& sweep_file,
                        const std::string& prophet_binary, const std::string& workdir, const std::string& shard_dir) {
    int max_ranks = 1;
    for (const SweepPoint& p : points) max_ranks = std::max(max_ranks, p.ranks);
    const int tasks_per_node = slurm.tasks_per_node > 0 ? slurm.tasks_per_node : max_ranks;
    if (max_ranks > slurm.nodes * tasks_per_node)
        throw_config_error("sweep.slurm.tasks_per_node", std::to_string(tasks_per_node),
                           "nodes x tasks_per_node must hold the largest point (" + std::to_string(max_ranks) +
                               " ranks)",
                           "tasks_per_node = " + std::to_string((max_ranks + slurm.nodes - 1) / slurm.nodes));
    check_script_inputs(spec, sweep_file, prophet_binary, workdir, shard_dir);
    BatchJob job;
    for (size_t i = 0; i < to_run.size(); i += slurm.points_per_task)
        job.tasks.emplace_back(to_run.begin() + i,
                               to_run.begin() + std::min(to_run.size(), i + slurm.points_per_task));
    std::ostringstream s;
    s << "#!/bin/bash\n"
      << "# prophet sweep " << shell_quoted(spec.name) << ": " << to_run.size() << " point(s) in " << job.tasks.size()
      << " array task(s), written by `prophet sweep --launcher slurm`\n"
      << "#SBATCH --job-name=" << sbatch_quoted(job_name(spec)) << "\n"
      << "#SBATCH --array=0-" << job.tasks.size() - 1
      << (slurm.max_parallel > 0 ? "%" + std::to_string(slurm.max_parallel) : "") << "\n"
      << "#SBATCH --nodes=" << slurm.nodes << "\n"
      << "#SBATCH --ntasks-per-node=" << tasks_per_node << "\n"
      << "#SBATCH --cpus-per-task=" << slurm.cpus_per_task << "\n"
      << "#SBATCH --time=" << slurm.time << "\n";
    if (!slurm.partition.empty()) s << "#SBATCH --partition=" << slurm.partition << "\n";
    if (!slurm.account.empty()) s << "#SBATCH --account=" << slurm.account << "\n";
    s << "#SBATCH --chdir=" << sbatch_quoted(workdir) << "\n"
      << "#SBATCH --output=" << sbatch_quoted(output_pattern_literal(shard_dir) + "/slurm-%A_%a.out") << "\n"
      << "set -euo pipefail\n"
      << "# array index -> the 1-based sweep points it runs (numbers as in `prophet sweep --dry-run`)\n"
      << "POINTS=(";
    for (const auto& task : job.tasks) s << " " << join_ints(task, ",");
    s << " )\n"
      << "points=\"${POINTS[$SLURM_ARRAY_TASK_ID]}\"\n"
      << "# each task writes its own shard store: SQLite on a shared file system takes no concurrent writers\n"
      << "shard=" << shell_quoted(shard_dir) << "/shard-\"${points%%,*}\".db\n"
      << "exec " << shell_quoted(prophet_binary) << " sweep " << shell_quoted(sweep_file)
      << " --points \"$points\" --no-report --set store.path=\"$shard\"\n";
    job.script = s.str();
    return job;
}

std::string submit_batch(const std::string& script_path, bool wait) {
    std::vector<std::string> cmd = {"sbatch", "--parsable"};
    if (wait) cmd.push_back("--wait");
    cmd.push_back(script_path);
    const ChildResult r = run_child(cmd);
    std::istringstream out(r.out);
    std::string first;
    std::getline(out, first);
    const std::string id = first.substr(0, first.find(';'));  // "<job id>[;cluster]"
    const bool accepted = !id.empty() && std::all_of(id.begin(), id.end(), ::isdigit);
    if (!accepted) {
        const std::string line = last_line(r.err);
        throw Error(kExitRunFailed, "sbatch " + script_path + " exited with code " + std::to_string(r.exit_code) +
                                        (line.empty() ? "" : ": " + line) +
                                        (r.exit_code == 127 ? " (no sbatch on PATH: run on a Slurm login node)" : ""));
    }
    return id;
}

std::vector<std::string> queued_jobs(const SweepSpec& spec, bool* available) {
    // every job, its name compared here: `squeue --name` reads a comma-separated list, so a sweep named "exp,v2"
    // would find the jobs of "prophet-exp" and "v2" instead of its own
    const ChildResult r = run_child({"squeue", "--noheader", "--format=%i %T %j"});
    *available = r.exit_code == 0;
    if (r.exit_code != 0) return {};
    return jobs_named(r.out, job_name(spec));
}

std::vector<std::string> jobs_named(const std::string& squeue_out, const std::string& name) {
    std::vector<std::string> lines;
    std::istringstream in(squeue_out);
    for (std::string line; std::getline(in, line);) {
        const size_t id_end = line.find(' ');
        const size_t state_end = id_end == std::string::npos ? id_end : line.find(' ', id_end + 1);
        if (state_end != std::string::npos && line.compare(state_end + 1, std::string::npos, name) == 0)
            lines.push_back(line.substr(0, state_end));
    }
    return lines;
}

}  // namespace prophet::sweep
