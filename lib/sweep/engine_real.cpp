// engine_real.cpp: engine "real": the command line of a point's `prophet train` (or `prophet profile
// --inference`) child, the calibration child of validate_cluster = "calibrate", and the child's summary line.
#include <sstream>

#include "core/error.h"
#include "core/process.h"
#include "sweep/sweep_internal.h"

namespace prophet::sweep::detail {

namespace {

// The start of a child's command line: mpirun for several ranks, then the prophet binary.
std::vector<std::string> child_launcher(int ranks, const SweepOptions& options) {
    std::vector<std::string> cmd;
    if (ranks > 1)  // as root OpenMPI needs --allow-run-as-root; more ranks than cores need --oversubscribe
        cmd = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
    cmd.push_back(options.prophet_binary.empty() ? self_binary() : options.prophet_binary);
    return cmd;
}

}  // namespace

std::vector<std::string> child_command(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options) {
    std::vector<std::string> cmd = child_launcher(p.ranks, options);
    const std::vector<const char*> sub = spec.command == "infer"
                                             ? std::vector<const char*>{"profile", "--inference", "--config"}
                                             : std::vector<const char*>{"train", "--config"};
    for (const char* a : sub) cmd.push_back(a);
    cmd.push_back(resolve_path(spec, spec.train_config));
    cmd.push_back("--json");
    auto set = [&](const std::string& kv) {
        cmd.push_back("--set");
        cmd.push_back(kv);
    };
    set("store.path=" + options.store_path);
    set("run.experiment=" + spec.name);
    set("run.seed=" + std::to_string(p.seed));
    set("balance.policy=" + p.policy);
    for (const auto& [k, v] : spec.set) set(k + "=" + v);
    for (const auto& [k, v] : p.grid) set(k + "=" + v);
    return cmd;
}

// validate_cluster = "calibrate": `prophet profile --calibrate` on the point's ranks, with the sweep's and the
// point's grid keys (they may change the model's shapes), writing `out`; the profile run is recorded in the store
// under the sweep's name. Throws prophet::Error with the child's last stderr line when it fails.
void calibrate_cluster(const SweepSpec& spec, const SweepPoint& p, const SweepOptions& options, const std::string& out) {
    std::vector<std::string> cmd = child_launcher(p.ranks, options);
    for (const std::string& a : {std::string("profile"), std::string("--config"), resolve_path(spec, spec.train_config),
                                 std::string("--calibrate"), std::string("--cluster-out"), out})
        cmd.push_back(a);
    std::vector<std::string> sets = {"store.path=" + options.store_path, "run.experiment=" + spec.name,
                                     "run.seed=" + std::to_string(p.seed)};
    for (const auto& [k, v] : spec.set) sets.push_back(k + "=" + v);
    for (const auto& [k, v] : p.grid) sets.push_back(k + "=" + v);
    for (const std::string& kv : sets) {
        cmd.push_back("--set");
        cmd.push_back(kv);
    }
    const ChildResult child = run_child(cmd);
    if (child.exit_code != 0) {
        const std::string line = last_line(child.err);
        throw Error(child.exit_code, "prophet profile --calibrate exited with code " +
                                         std::to_string(child.exit_code) + (line.empty() ? "" : ": " + line));
    }
}

// The child's final {"summary": true, ...} line of stdout; throws when there is none.
nlohmann::json child_summary(const std::string& out) {
    std::istringstream lines(out);
    std::string line;
    nlohmann::json summary;
    while (std::getline(lines, line)) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.value("summary", false)) summary = std::move(j);
    }
    if (summary.is_null())
        throw Error(kExitRunFailed, "run failed: the prophet train child exited 0 but printed no summary line");
    return summary;
}

}  // namespace prophet::sweep::detail
