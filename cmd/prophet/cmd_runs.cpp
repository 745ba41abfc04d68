// cmd_runs.cpp: `prophet runs [show RUN | compare RUN RUN...]`: what the store holds, for people (tables) and
// scripts (--json).
#include "cmd_runs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "store/run_health.h"

namespace prophet::cli {

namespace {

const std::vector<std::string> kStatuses = {"running", "finished", "failed", "killed", "interrupted", "lost",
                                            "resumed"};

// A params value is TOML text: a string comes quoted.
std::string unquote(const std::string& v) {
    return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
}

std::string param(const std::vector<std::pair<std::string, std::string>>& params, const std::string& key) {
    for (const auto& [k, v] : params)
        if (k == key) return unquote(v);
    return "";
}

std::string duration_text(const RunRow& r) {
    if (!r.ended_ms) return "-";
    const double s = static_cast<double>(*r.ended_ms - r.started_ms) / 1000.0;
    return s < 120 ? fmt(s) + " s" : fmt(s / 60) + " min";
}

nlohmann::json optional_json(const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json run_json(const RunRow& r, const std::string& policy) {
    return {{"run_id", r.run_id},
            {"status", r.status},
            {"experiment", r.info.experiment},
            {"command", r.info.command},
            {"policy", policy},
            {"world_size", r.info.world_size},
            {"backend", r.info.backend},
            {"simulated", r.info.simulated},
            {"seed", r.info.seed},
            {"parent_id", r.info.parent_id},
            {"started_ms", r.started_ms},
            {"ended_ms", optional_json(r.ended_ms)},
            {"heartbeat_ms", optional_json(r.heartbeat_ms)},
            {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json()},
            {"error", r.error},
            {"host", r.host},
            {"pid", optional_json(r.pid)},
            {"resumed_from_step", optional_json(r.resumed_from_step)},
            {"resumed_by", r.resumed_by},
            {"config_hash", r.info.config_hash},
            {"git_sha", r.info.git_sha},
            {"git_dirty", r.info.git_dirty},
            {"prophet_version", r.info.prophet_version}};
}

// Per metric key: steps recorded and the global (rank -1, layer -1) value of the last step and the median.
struct MetricSummary {
    int64_t rows = 0, last_step = -1;
    double last = std::nan(""), median = std::nan("");
};

std::map<std::string, MetricSummary> summarize_metrics(Store& store, const std::string& run_id) {
    std::map<std::string, std::vector<std::pair<int64_t, double>>> global;
    std::map<std::string, MetricSummary> out;
    for (const MetricRow& m : store.get_metrics(run_id)) {
        ++out[m.key].rows;
        if (m.rank == -1 && m.layer == -1) global[m.key].emplace_back(m.step, m.value);
    }
    for (auto& [key, series] : global) {
        MetricSummary& s = out[key];
        s.last_step = series.back().first;  // get_metrics orders by step
        s.last = series.back().second;
        std::vector<double> values;
        for (const auto& [step, v] : series)
            if (!std::isnan(v)) values.push_back(v);
        if (values.empty()) continue;
        std::sort(values.begin(), values.end());
        const size_t n = values.size();
        s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    }
    return out;
}

nlohmann::json number_json(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }

int list_runs(Store& store, const RunsArgs& args) {
    RunFilter filter{args.experiment, args.status, args.policy, args.limit};
    const std::vector<RunRow> rows = store.list_runs(filter);
    if (args.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const RunRow& r : rows) out.push_back(run_json(r, param(store.get_params(r.run_id), "balance.policy")));
        std::printf("%s\n", out.dump(2).c_str());
        return kExitOk;
    }
    if (rows.empty()) {
        std::fprintf(stderr, "prophet runs: no run in %s matches%s%s%s\n", store.path().c_str(),
                     args.experiment.empty() ? "" : (" --experiment " + args.experiment).c_str(),
                     args.policy.empty() ? "" : (" --policy " + args.policy).c_str(),
                     args.status.empty() ? "" : (" --status " + args.status).c_str());
        return kExitOk;
    }
    std::printf("%-16s  %-11s  %-24s  %-8s  %-16s  %5s  %-23s  %9s  %4s\n", "run_id", "status", "experiment",
                "command", "policy", "ranks", "started", "duration", "exit");
    for (const RunRow& r : rows) {
        const std::string policy = param(store.get_params(r.run_id), "balance.policy");
        std::printf("%-16s  %-11s  %-24s  %-8s  %-16s  %5d  %-23s  %9s  %4s\n", r.run_id.c_str(), r.status.c_str(),
                    r.info.experiment.substr(0, 24).c_str(), r.info.command.substr(0, 8).c_str(),
                    (policy.empty() ? "-" : policy.substr(0, 16)).c_str(), r.info.world_size,
                    format_utc_ms(r.started_ms).c_str(), duration_text(r).c_str(),
                    r.exit_code ? std::to_string(*r.exit_code).c_str() : "-");
    }
    if (static_cast<int>(rows.size()) == args.limit)
        std::fprintf(stderr, "prophet runs: showing the newest %d; --limit 0 lists all\n", args.limit);
    return kExitOk;
}

int show_run(Store& store, const std::string& run_id, bool json) {
    const RunRow r = store.get_run(run_id);  // exit 3 naming the run when absent
    const auto params = store.get_params(run_id);
    const auto metrics = summarize_metrics(store, run_id);
    std::map<std::string, int64_t> events;
    for (const EventRow& e : store.get_events(run_id)) ++events[e.kind];
    const std::vector<TraceRow> traces = store.list_traces(run_id);
    if (json) {
        nlohmann::json out = run_json(r, param(params, "balance.policy"));
        out["params"] = nlohmann::json::object();
        for (const auto& [k, v] : params) out["params"][k] = v;
        out["metrics"] = nlohmann::json::object();
        for (const auto& [key, m] : metrics)
            out["metrics"][key] = {{"rows", m.rows}, {"last_step", m.last_step}, {"last", number_json(m.last)},
                                   {"median", number_json(m.median)}};
        out["events"] = events;
        out["traces"] = nlohmann::json::array();
        for (const TraceRow& t : traces) out["traces"].push_back(t.trace_id);
        std::printf("%s\n", out.dump(2).c_str());
        return kExitOk;
    }
    std::printf("run %s: %s\n", r.run_id.c_str(), r.status.c_str());
    auto line = [](const char* key, const std::string& value) {
        if (!value.empty()) std::printf("  %-18s %s\n", key, value.c_str());
    };
    line("experiment", r.info.experiment);
    line("command", r.info.command);
    line("policy", param(params, "balance.policy"));
    line("ranks, backend", std::to_string(r.info.world_size) + ", " + r.info.backend +
                               (r.info.simulated ? " (simulated)" : ""));
    line("seed", std::to_string(r.info.seed));
    line("started", format_utc_ms(r.started_ms));
    if (r.ended_ms) line("ended", format_utc_ms(*r.ended_ms) + " (" + duration_text(r) + ")");
    if (r.heartbeat_ms) line("last heartbeat", format_utc_ms(*r.heartbeat_ms));
    if (r.exit_code) line("exit code", std::to_string(*r.exit_code));
    line("error", r.error);
    line("process", r.pid ? "pid " + std::to_string(*r.pid) + " on " + r.host : r.host);
    line("parent", r.info.parent_id);
    if (r.resumed_from_step) line("resumed from step", std::to_string(*r.resumed_from_step));
    line("resumed by", r.resumed_by);
    line("config_hash", r.info.config_hash);
    line("git", r.info.git_sha + (r.info.git_dirty ? " (dirty)" : ""));
    line("prophet", r.info.prophet_version);
    std::printf("params (%zu):\n", params.size());
    for (const auto& [k, v] : params) std::printf("  %s = %s\n", k.c_str(), v.c_str());
    std::printf("metrics (%zu keys; global value at the last step, median over steps):\n", metrics.size());
    for (const auto& [key, m] : metrics)
        std::printf("  %-20s %6lld rows  last %-10s median %s\n", key.c_str(), static_cast<long long>(m.rows),
                    std::isnan(m.last) ? "-" : fmt(m.last, 5).c_str(), std::isnan(m.median) ? "-" : fmt(m.median, 5).c_str());
    if (!events.empty()) {
        std::string text;
        for (const auto& [kind, n] : events) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
        std::printf("events: %s\n", text.c_str());
    }
    for (const TraceRow& t : traces) std::printf("trace %s\n", t.trace_id.c_str());
    return kExitOk;
}

// Runs side by side: their rows, params and metric summaries, index i for ids[i].
struct Comparison {
    std::vector<std::string> ids;
    std::vector<RunRow> runs;
    std::vector<std::map<std::string, std::string>> params;
    std::vector<std::map<std::string, MetricSummary>> metrics;
    std::set<std::string> keys, metric_keys;
    std::vector<std::string> differing;  // only the params that differ: the point of a comparison

    std::string value_of(size_t i, const std::string& key) const {
        return params[i].count(key) ? params[i].at(key) : std::string("(unset)");
    }
    MetricSummary metric_of(size_t i, const std::string& key) const {
        const auto it = metrics[i].find(key);
        return it == metrics[i].end() ? MetricSummary{} : it->second;
    }
};

Comparison load_comparison(Store& store, const std::vector<std::string>& ids) {
    Comparison c;
    c.ids = ids;
    for (const std::string& id : ids) {
        c.runs.push_back(store.get_run(id));
        const auto p = store.get_params(id);
        c.params.emplace_back(p.begin(), p.end());
        for (const auto& [k, v] : p) c.keys.insert(k);
        c.metrics.push_back(summarize_metrics(store, id));
        for (const auto& [k, m] : c.metrics.back()) c.metric_keys.insert(k);
    }
    for (const std::string& key : c.keys) {
        std::set<std::string> values;
        for (size_t i = 0; i < ids.size(); ++i) values.insert(c.value_of(i, key));
        if (values.size() > 1) c.differing.push_back(key);
    }
    return c;
}

void print_comparison_json(const Comparison& c) {
    nlohmann::json out = {{"runs", c.ids}};
    out["status"] = nlohmann::json::array();
    for (const RunRow& r : c.runs) out["status"].push_back(r.status);
    out["params"] = nlohmann::json::object();
    for (const std::string& key : c.differing) {
        out["params"][key] = nlohmann::json::array();
        for (size_t i = 0; i < c.ids.size(); ++i) out["params"][key].push_back(c.value_of(i, key));
    }
    out["metrics"] = nlohmann::json::object();
    for (const std::string& key : c.metric_keys) {
        out["metrics"][key] = nlohmann::json::array();
        for (size_t i = 0; i < c.ids.size(); ++i) {
            const MetricSummary m = c.metric_of(i, key);
            out["metrics"][key].push_back({{"last", number_json(m.last)}, {"median", number_json(m.median)}});
        }
    }
    std::printf("%s\n", out.dump(2).c_str());
}

void print_comparison_text(const Comparison& c) {
    std::printf("%-28s", "");
    for (const std::string& id : c.ids) std::printf("  %-20s", id.c_str());
    std::printf("\n%-28s", "status");
    for (const RunRow& r : c.runs) std::printf("  %-20s", r.status.c_str());
    std::printf("\n%-28s", "experiment");
    for (const RunRow& r : c.runs) std::printf("  %-20s", r.info.experiment.substr(0, 20).c_str());
    std::printf("\nparams that differ (%zu of %zu):\n", c.differing.size(), c.keys.size());
    for (const std::string& key : c.differing) {
        std::printf("  %-26s", key.substr(0, 26).c_str());
        for (size_t i = 0; i < c.ids.size(); ++i) std::printf("  %-20s", c.value_of(i, key).substr(0, 20).c_str());
        std::printf("\n");
    }
    std::printf("metrics (median over steps of the global value; last step in brackets):\n");
    for (const std::string& key : c.metric_keys) {
        std::printf("  %-26s", key.substr(0, 26).c_str());
        for (size_t i = 0; i < c.ids.size(); ++i) {
            const MetricSummary m = c.metric_of(i, key);
            const std::string text = std::isnan(m.median) ? "-" : fmt(m.median, 4) + " [" + fmt(m.last, 4) + "]";
            std::printf("  %-20s", text.c_str());
        }
        std::printf("\n");
    }
}

int compare_runs(Store& store, const std::vector<std::string>& ids, bool json) {
    const Comparison c = load_comparison(store, ids);
    if (json)
        print_comparison_json(c);
    else
        print_comparison_text(c);
    return kExitOk;
}

}  // namespace

RunsCommands add_runs_command(CLI::App& app, RunsArgs& args) {
    RunsCommands c;
    c.list = app.add_subcommand("runs", "list the runs of a store; `runs show RUN` and `runs compare RUN RUN...`");
    c.list->require_subcommand(0, 1);
    c.list->add_option("--db,--store", args.db, "the SQLite store (store.path)")->capture_default_str();
    c.list->add_option("--experiment", args.experiment, "only runs of this experiment");
    c.list->add_option("--policy", args.policy, "only runs whose balance.policy is this (e.g. static, prophet)");
    c.list->add_option("--status", args.status, "only runs with this status")->check(CLI::IsMember(kStatuses));
    c.list->add_option("--limit", args.limit, "the newest N runs; 0 = all")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c.list->add_flag("--json", args.json, "JSON on stdout (an array of runs; show and compare: one object)");
    c.list->footer(
        "Statuses: running, finished, failed, killed (a signal ended it), interrupted, lost (its process died\n"
        "without recording the end: prophet db check --repair), resumed (a --resume continued it: see resumed_by).\n"
        "Examples:\n"
        "  prophet runs                                   newest 50 runs of results/prophet.db\n"
        "  prophet runs --experiment skewed-4rank --policy prophet --status finished\n"
        "  prophet runs show 3f2a9c0d1e4b5a67             every field, params, metric summary, events\n"
        "  prophet runs compare 3f2a9c0d1e4b5a67 9e8d7c6b5a493827   params that differ, metrics side by side\n"
        "  prophet runs --db /tmp/smoke.db --json");
    c.show = c.list->add_subcommand("show", "one run: every field, its params, a summary of its metrics, events");
    c.show->add_option("run_id", args.run_ids, "the run (prophet runs lists them)")->required()->expected(1);
    c.show->fallthrough();  // --db and --json may follow the run id
    c.compare = c.list->add_subcommand("compare", "two or more runs side by side: differing params, metrics");
    c.compare->add_option("run_ids", args.run_ids, "the runs")->required()->expected(2, 64);
    c.compare->fallthrough();
    return c;
}

int run_runs(const RunsCommands& c, const RunsArgs& args) {
    Store store = open_store_to_read(args.db);
    if (c.show->parsed()) return show_run(store, args.run_ids.front(), args.json);
    if (c.compare->parsed()) return compare_runs(store, args.run_ids, args.json);
    return list_runs(store, args);
}

}  // namespace prophet::cli
