// cmd_db.cpp: `prophet db check [--db FILE] [--repair] [--stale-after SECONDS] [--json]`.
#include "cmd_db.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "store/run_health.h"

namespace prophet::cli {

namespace {

nlohmann::json verdict_json(const RunVerdict& v) {
    nlohmann::json j = {{"run_id", v.run.run_id},
                        {"experiment", v.run.info.experiment},
                        {"command", v.run.info.command},
                        {"liveness", liveness_name(v.liveness)},
                        {"silent_s", v.silent_ms / 1000},
                        {"host", v.run.host},
                        {"reason", v.reason}};
    j["pid"] = v.run.pid ? nlohmann::json(*v.run.pid) : nlohmann::json(nullptr);
    return j;
}

std::string counts_line(const StoreHealth& h) {
    std::string line;
    int64_t total = 0;
    for (const auto& [status, n] : h.status_counts) {
        line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + status;
        total += n;
    }
    return total == 0 ? "no runs" : line;
}

}  // namespace

CLI::App* add_db_check_command(CLI::App* db, DbCheckArgs& args) {
    CLI::App* cmd = db->add_subcommand(
        "check", "check the store: integrity, schema version, traces, and runs left `running` by a process that died");
    cmd->add_option("--db,--store", args.db, "the SQLite store (store.path)")->capture_default_str();
    cmd->add_flag("--repair", args.repair,
                  "mark every lost run `lost` (ended at its last heartbeat, with a `lost` event)");
    cmd->add_option("--stale-after", args.stale_after_s,
                    "seconds without a heartbeat after which a run that cannot be probed (another host, or recorded "
                    "before schema 2) is lost")
        ->check(non_negative_number("60"))
        ->capture_default_str();
    cmd->add_flag("--json", args.json, "one JSON object on stdout");
    cmd->footer(
        "A `running` run is judged by the lock its process holds (<store>.runlocks/<run>.lock), else by that\n"
        "process (runs.host, runs.pid):\n"
        "  alive  its lock is held (from any PID namespace: a container sharing this host name), or, for a run\n"
        "         recorded without a lock, its process runs on this host: never touched, however old its heartbeat;\n"
        "  lost   its lock is free on this host, or (no lock) its process is gone from this host, or it runs\n"
        "         elsewhere and its heartbeat is older than --stale-after;\n"
        "  fresh  it runs elsewhere and its heartbeat is recent.\n"
        "Every table and index of the schema must be there, and every trace is read back and checked against its\n"
        "meta (a damaged one is named; --repair leaves it).\n"
        "Exit 0 when the store is sound and no run is lost (or --repair closed them), 5 otherwise or when the file\n"
        "is missing, corrupt or not a prophet store. Opening a schema-1 store migrates it to schema 2.\n"
        "`prophet sweep` reaps lost runs the same way before it starts. docs/reliability.md, docs/store.md.\n"
        "Examples:\n"
        "  prophet db check\n"
        "  prophet db check --db results/sweeps/a.db --repair\n"
        "  prophet db check --stale-after 60 --json");
    return cmd;
}

namespace {

void print_health_json(const StoreHealth& health, const std::vector<RunVerdict>& repaired) {
    nlohmann::json out = {{"path", health.path},
                          {"schema_version", health.schema_version},
                          {"opened_at_version", health.opened_at_version},
                          {"integrity", health.integrity},
                          {"missing_schema", health.missing_objects},
                          {"ok", health.ok()}};
    out["status_counts"] = nlohmann::json::object();
    for (const auto& [status, n] : health.status_counts) out["status_counts"][status] = n;
    out["running"] = nlohmann::json::array();
    for (const RunVerdict& v : health.running) out["running"].push_back(verdict_json(v));
    out["traces"] = health.traces;
    out["bad_traces"] = health.bad_traces;
    out["repaired"] = nlohmann::json::array();
    for (const RunVerdict& v : repaired) out["repaired"].push_back(verdict_json(v));
    std::printf("%s\n", out.dump(2).c_str());
}

void print_health_text(const StoreHealth& health, const std::vector<RunVerdict>& repaired) {
    std::string schema = "schema " + std::to_string(health.schema_version);
    if (health.opened_at_version > 0 && health.opened_at_version < health.schema_version)
        schema += " (migrated from " + std::to_string(health.opened_at_version) + ")";
    std::printf("store %s: %s, integrity %s\n", health.path.c_str(), schema.c_str(), health.integrity.c_str());
    for (const std::string& object : health.missing_objects)
        std::printf("missing from the schema: %s\n", object.c_str());
    std::printf("runs: %s\n", counts_line(health).c_str());
    std::printf("traces: %lld, %zu unreadable\n", static_cast<long long>(health.traces), health.bad_traces.size());
    for (const std::string& problem : health.bad_traces) std::printf("bad trace: %s\n", problem.c_str());
    for (const RunVerdict& v : repaired)
        std::printf("repaired %s (%s): marked lost; %s\n", v.run.run_id.c_str(), v.run.info.experiment.c_str(),
                    v.reason.c_str());
    for (const RunVerdict& v : health.running)
        std::printf("running %s (%s): %s\n", v.run.run_id.c_str(), v.run.info.experiment.c_str(), v.reason.c_str());
}

// The exit code of a checked store, with the first problem and its fix on stderr.
int health_exit_code(const StoreHealth& health) {
    if (health.integrity != "ok") {
        std::fprintf(stderr, "prophet db check: %s is damaged (%s); fix: restore it from a backup\n",
                     health.path.c_str(), health.integrity.c_str());
        return kExitDatabase;
    }
    if (!health.missing_objects.empty()) {
        std::string objects;
        for (const std::string& o : health.missing_objects) objects += (objects.empty() ? "" : ", ") + o;
        std::fprintf(stderr,
                     "prophet db check: %s lacks part of its schema (%s): a table was dropped or the file was "
                     "cut; fix: restore it from a backup (the rows of a dropped table are gone)\n",
                     health.path.c_str(), objects.c_str());
        return kExitDatabase;
    }
    if (!health.bad_traces.empty()) {
        std::fprintf(stderr, "prophet db check: %zu trace(s) in %s cannot be read back; fix: save them again "
                             "(prophet trace import) or delete them\n",
                     health.bad_traces.size(), health.path.c_str());
        return kExitDatabase;
    }
    if (!health.ok()) {
        std::fprintf(stderr, "prophet db check: %s holds lost runs still marked running; fix: prophet db check --db %s "
                             "--repair\n",
                     health.path.c_str(), health.path.c_str());
        return kExitDatabase;
    }
    return kExitOk;
}

}  // namespace

int run_db_check(const DbCheckArgs& args) {
    // only --repair writes: without it a read-only store is checked read-only
    Store store = args.repair ? open_existing_store(args.db) : open_store_to_read(args.db);
    const auto stale_after_ms = static_cast<int64_t>(args.stale_after_s * 1000);
    StoreHealth health = check_store(store, stale_after_ms);
    std::vector<RunVerdict> repaired;
    if (args.repair && health.integrity == "ok" && health.missing_objects.empty()) {
        repaired = reap_lost_runs(store, stale_after_ms);
        health = check_store(store, stale_after_ms);
    }
    if (args.json)
        print_health_json(health, repaired);
    else
        print_health_text(health, repaired);
    return health_exit_code(health);
}

}  // namespace prophet::cli
