// cmd_ablate.cpp: `prophet ablate` (see cmd_ablate.h): child processes, the store record, the table.
#include "cmd_ablate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/process.h"
#include "core/testbed.h"
#include "core/timer.h"
#include "train/train_config.h"

namespace prophet::cli {

namespace {

// The paper's variants (Fig 14), in its incremental order. "scheduler" has no planner of Pro-Prophet's: the
// FasterMoE placement (every hot expert shadowed), planned ahead like every policy under the scheduler.
struct Variant {
    const char* name;
    std::vector<std::string> sets;
    const char* what;
};
const std::vector<Variant>& variants() {
    static const std::vector<Variant> v = {
        {"none", {"balance.policy=static", "schedule.mode=none"}, "static expert parallelism"},
        {"planner", {"balance.policy=prophet", "balance.cost_eq=6", "schedule.mode=none"},
         "Pro-Prophet's planner (Eq 6: transfers counted as exposed), Trans/Agg blocking"},
        {"scheduler", {"balance.policy=fastermoe", "schedule.mode=blockwise"},
         "FasterMoE's placement with the block-wise scheduler"},
        {"planner+scheduler", {"balance.policy=prophet", "balance.cost_eq=6", "schedule.mode=blockwise"},
         "planner (Eq 6) and scheduler, not coupled"},
        {"full", {"balance.policy=prophet", "balance.cost_eq=8", "schedule.mode=blockwise"},
         "planner under Eq 8 (it knows the scheduler hides transfers) and scheduler"},
    };
    return v;
}

// The paper's Fig 14 (MoE-GPT-M, HPWNV): each step's speedup over the previous one.
const std::map<std::string, std::pair<double, double>> kPaperIncremental = {
    {"planner", {1.26, 1.12}}, {"planner+scheduler", {1.14, 1.01}}, {"full", {1.03, 1.02}}};

// The last lines of a child's stderr, for the failure report.
std::string tail_lines(const std::string& text, size_t n) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::string out;
    for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += lines[i] + "\n";
    return out;
}

struct Stat {
    double mean = 0, sd = 0;
    int n = 0;
};
Stat mean_sd(const std::vector<double>& v) {
    Stat s;
    s.n = (int)v.size();
    if (v.empty()) return s;
    for (double x : v) s.mean += x;
    s.mean /= s.n;
    if (s.n > 1) {
        double ss = 0;
        for (double x : v) ss += (x - s.mean) * (x - s.mean);
        s.sd = std::sqrt(ss / (s.n - 1));
    }
    return s;
}
std::string pm(const Stat& s, int precision = 2) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f ± %.*f", precision, s.mean, precision, s.sd);
    return b;
}

// Mean over the steps >= warmup of a global per-step metric.
double run_mean(Store& store, const std::string& run_id, const std::string& key, int warmup) {
    double sum = 0;
    int n = 0;
    for (const MetricRow& row : store.get_metrics(run_id, key))
        if (row.layer == -1 && row.rank == -1 && row.step >= warmup) {
            sum += row.value;
            ++n;
        }
    return n ? sum / n : std::nan("");
}

// The variants --variants names (all when empty), in the paper's order; an unknown name is a usage error.
std::vector<const Variant*> chosen_variants(const std::vector<std::string>& names) {
    std::vector<const Variant*> chosen;
    for (const Variant& v : variants())
        if (names.empty() || std::find(names.begin(), names.end(), v.name) != names.end()) chosen.push_back(&v);
    for (const std::string& name : names) {
        bool known = false;
        for (const Variant& v : variants()) known |= name == v.name;
        if (!known)
            throw Error(kExitUsage, "usage error: --variants: unknown variant '" + name +
                                        "'; allowed: none, planner, scheduler, planner+scheduler, full");
    }
    return chosen;
}

// One recorded child run: its means over the steps after the warmup.
struct Row {
    std::string run_id;
    int64_t seed;
    double step_ms, trans_exposed, agg_exposed, trans, agg;
};

// The state of one `prophet ablate`: where runs are recorded and how far it got.
struct Ablation {
    const AblateArgs& args;
    Store& store;
    std::string ablate_id, experiment, store_path, binary;
    int total = 0, done = 0, failed = 0;
    int64_t t_start = 0;
    std::map<std::string, std::vector<Row>> rows = {};  // variant -> runs
};

// `prophet train` of variant v at `seed`: one rank pinned per core, or --oversubscribe unpinned when ranks
// outnumber cores (docs/testbed.md)
std::vector<std::string> child_command(const Ablation& a, const Variant& v, int64_t seed) {
    std::vector<std::string> cmd = mpirun_launcher(a.args.ranks, usable_cores());
    cmd.push_back(a.binary);
    cmd.push_back("train");
    for (const std::string& f : a.args.common.config_files) {
        cmd.push_back("--config");
        cmd.push_back(f);
    }
    auto set = [&](const std::string& kv) {
        cmd.push_back("--set");
        cmd.push_back(kv);
    };
    for (const std::string& s : a.args.common.sets) set(s);
    for (const std::string& s : v.sets) set(s);
    set("run.seed=" + std::to_string(seed));
    set("run.experiment=" + value_to_toml(Value(a.experiment)));  // a TOML string, escaped
    set("store.path=" + value_to_toml(Value(a.store_path)));
    cmd.push_back("--json");
    if (a.args.timeline) cmd.push_back("--timeline");
    return cmd;
}

// The run id of a child's --json summary line ("" when there is none).
std::string summary_run_id(const std::string& out) {
    std::string run_id;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("summary", false)) run_id = j.value("run_id", "");
    }
    return run_id;
}

// Runs variant v once at `seed`, tags the child's run with the variant and keeps its means; a failed child is
// counted and reported, a stop signal ends the ablation.
void run_variant(Ablation& a, const Variant& v, int64_t seed) {
    const ChildResult r = run_child(child_command(a, v, seed));  // core/process.h, as the sweep runs its points
    if (const int stop = StopSignalForwarder::received())
        throw Error(128 + stop, "prophet ablate: stopped by signal " + std::to_string(stop) +
                                    " (forwarded to the running child, whose run records itself killed); "
                                    "the runs finished before are in the store");
    ++a.done;
    const std::string run_id = summary_run_id(r.out);
    const double elapsed_s = static_cast<double>(now_ns() - a.t_start) * 1e-9;
    const double eta_s = elapsed_s / a.done * (a.total - a.done);
    if (r.exit_code != 0 || run_id.empty()) {
        ++a.failed;
        std::fprintf(stderr, "[%d/%d] seed %lld %s: FAILED (exit %d)\n%s", a.done, a.total,
                     static_cast<long long>(seed), v.name, r.exit_code, tail_lines(r.err, 5).c_str());
        return;
    }
    a.store.put_params(run_id, {{"ablate.variant", v.name}, {"ablate.id", a.ablate_id}});
    const int warmup = a.args.warmup;
    Row row{run_id,
            seed,
            run_mean(a.store, run_id, "step_ms", warmup),
            run_mean(a.store, run_id, "trans_exposed_ms", warmup),
            run_mean(a.store, run_id, "agg_exposed_ms", warmup),
            run_mean(a.store, run_id, "trans_ms", warmup),
            run_mean(a.store, run_id, "agg_ms", warmup)};
    a.rows[v.name].push_back(row);
    std::fprintf(stderr,
                 "[%d/%d] seed %lld %-17s %8.2f ms/step  exposed Trans %6.2f Agg %6.2f ms  (run %s, ETA %.0f s)\n",
                 a.done, a.total, static_cast<long long>(seed), v.name, row.step_ms, row.trans_exposed, row.agg_exposed,
                 run_id.c_str(), eta_s);
}

// The table (or the --json variants array, returned) of mean ± sd across seeds per variant; the speedup over
// none is taken per seed first.
nlohmann::json print_variant_table(Ablation& a, const std::vector<const Variant*>& chosen, int64_t steps) {
    const AblateArgs& args = a.args;
    std::map<int64_t, double> none_ms;
    for (const Row& r : a.rows["none"]) none_ms[r.seed] = r.step_ms;
    nlohmann::json out = nlohmann::json::array();
    if (!args.common.json) {
        std::printf(
            "prophet ablate: %d runs (%d failed), %d seeds, %d ranks, %lld steps each (first %d left out); "
            "mean ± sd across seeds\n",
            a.done, a.failed, args.seeds, args.ranks, static_cast<long long>(steps), args.warmup);
        std::printf(
            "| variant | runs | step ms | x none | exposed Trans ms | exposed Agg ms | Trans ms | Agg ms | "
            "paper Fig 14 (k=1 / k=2, incremental) |\n|---|---|---|---|---|---|---|---|---|\n");
    }
    for (const Variant* v : chosen) {
        const std::vector<Row>& rs = a.rows[v->name];
        std::vector<double> ms, speed, te, ae, tb, ab;
        for (const Row& r : rs) {
            ms.push_back(r.step_ms);
            if (none_ms.count(r.seed)) speed.push_back(none_ms[r.seed] / r.step_ms);
            te.push_back(r.trans_exposed);
            ae.push_back(r.agg_exposed);
            tb.push_back(r.trans);
            ab.push_back(r.agg);
        }
        const auto paper = kPaperIncremental.find(v->name);
        char paper_text[64] = "";
        if (paper != kPaperIncremental.end())
            std::snprintf(paper_text, sizeof paper_text, "%.2fx / %.2fx", paper->second.first, paper->second.second);
        const Stat s_ms = mean_sd(ms), s_sp = mean_sd(speed), s_te = mean_sd(te), s_ae = mean_sd(ae),
                   s_tb = mean_sd(tb), s_ab = mean_sd(ab);
        const int runs = static_cast<int>(rs.size());
        if (args.common.json) {
            out.push_back({{"variant", v->name},
                           {"runs", runs},
                           {"step_ms_mean", s_ms.mean},
                           {"step_ms_sd", s_ms.sd},
                           {"speedup_mean", s_sp.mean},
                           {"speedup_sd", s_sp.sd},
                           {"trans_exposed_ms_mean", s_te.mean},
                           {"agg_exposed_ms_mean", s_ae.mean},
                           {"trans_ms_mean", s_tb.mean},
                           {"agg_ms_mean", s_ab.mean}});
        } else {
            std::printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", v->name, runs, pm(s_ms).c_str(),
                        s_sp.n ? pm(s_sp, 3).c_str() : "-", pm(s_te).c_str(), pm(s_ae).c_str(), pm(s_tb).c_str(),
                        pm(s_ab).c_str(), paper_text);
        }
    }
    return out;
}

}  // namespace

CLI::App* add_ablate_command(CLI::App& app, AblateArgs& args) {
    CLI::App* cmd = app.add_subcommand(
        "ablate", "Pro-Prophet's ablation on real runs: none / planner / scheduler / planner+scheduler / full over "
                  "N seeds, mean ± sd of the step time and the exposed Trans/Agg time");
    cmd->add_option("--seeds", args.seeds, "number of seeds (run.seed = first .. first + N - 1)")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--first-seed", args.first_seed, "first seed");
    cmd->add_option("--ranks", args.ranks, "ranks per run (mpirun -np D when D > 1)")->check(CLI::Range(1, 4096));
    cmd->add_option("--variants", args.variants, "subset of: none planner scheduler planner+scheduler full")
        ->delimiter(',');
    cmd->add_option("--warmup", args.warmup, "steps left out of each run's means")->check(CLI::Range(0, 1000000));
    cmd->add_flag("--timeline", args.timeline, "record every op of every rank in each run (prophet train --timeline)");
    add_common_options(cmd, args.common);
    std::string footer = "Variants (each a set of train keys on top of --config/--set):\n";
    for (const Variant& v : variants()) {
        std::string sets;
        for (const std::string& s : v.sets) sets += " " + s;
        footer += "  " + std::string(v.name) + ":" + sets + "\n      " + v.what + "\n";
    }
    footer +=
        "Runs go seed by seed, every variant once per seed, so the variants see the same machine state; each run is\n"
        "recorded by its child with the param ablate.variant (report/fig_ablation.py draws them). To see the\n"
        "scheduler at work on CPU ranks, emulate a network: --set comm.link_gbps=2 (docs/scheduler.md).\n"
        "Example:\n  prophet ablate --config experiments/train/ablate-4rank.toml --seeds 5";
    cmd->footer(footer);
    return cmd;
}

int run_ablate(const AblateArgs& args) {
    if (args.common.help_config) {
        print_schema(train_schema(), "ablate");
        return kExitOk;
    }
    const std::vector<const Variant*> chosen = chosen_variants(args.variants);
    // every variant's config must be valid before anything runs
    Config base = resolve_config(train_schema(), args.common);
    for (const Variant* v : chosen) {
        Config c = base;
        for (const std::string& s : v->sets) c.apply_set(s);
        train_settings_from(c, args.ranks);
    }
    const std::string store_path = base.get_string("store.path");
    // the train default ("train") becomes "ablate"; a label set in the config is kept
    const std::string label = base.get_string("run.experiment");
    const std::string experiment = label.empty() || label == "train" ? "ablate" : label;
    const int total = args.seeds * static_cast<int>(chosen.size());
    const int64_t steps = base.get_int("train.steps");
    if (args.common.dry_run) {
        std::printf(
            "dry run: would run %d variants x %d seeds = %d runs of %lld steps on %d rank(s), recording into %s\n",
            static_cast<int>(chosen.size()), args.seeds, total, static_cast<long long>(steps), args.ranks,
            store_path.c_str());
        return kExitOk;
    }
    std::filesystem::create_directories(std::filesystem::path(store_path).parent_path().empty()
                                            ? std::filesystem::path(".")
                                            : std::filesystem::path(store_path).parent_path());
    Store store = Store::open(store_path);
    RunInfo info = make_run_info("ablate", base, args.common);
    info.experiment = experiment;
    info.world_size = args.ranks;
    info.seed = args.first_seed;
    Ablation a{args, store, store.begin_run(info), experiment, store_path, self_binary(), total};
    a.t_start = now_ns();
    const StopSignalForwarder forwarder;  // SIGTERM / SIGINT reach the running child's process group
    for (int i = 0; i < args.seeds; ++i)
        for (const Variant* v : chosen) run_variant(a, *v, args.first_seed + i);
    const nlohmann::json out = print_variant_table(a, chosen, steps);
    const int failed = a.failed;
    if (args.common.json)
        std::printf(
            "%s\n",
            nlohmann::json{{"ablate_id", a.ablate_id}, {"store", store_path}, {"failed", failed}, {"variants", out}}
                .dump()
                .c_str());
    store.finish_run(a.ablate_id, failed ? "failed" : "finished", failed ? kExitRunFailed : 0,
                     failed ? std::to_string(failed) + " of " + std::to_string(total) + " runs failed" : "");
    std::fprintf(stderr, "prophet ablate: run %s recorded in %s\n", a.ablate_id.c_str(), store_path.c_str());
    return failed ? kExitRunFailed : kExitOk;
}

}  // namespace prophet::cli
