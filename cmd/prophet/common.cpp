#include "common.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "comm/comm.h"

namespace prophet::cli {

void add_common_options(CLI::App* command, CommonArgs& args) {
    command->add_option("-c,--config", args.config_files, "TOML config file(s), merged in order")
        ->check(CLI::ExistingFile);
    command->add_option("-s,--set", args.sets, "override one key: --set section.key=value (TOML value; repeatable)");
    command->add_flag("--json", args.json, "machine-readable JSON on stdout (logs stay on stderr)");
    command->add_flag("--dry-run", args.dry_run, "validate everything, print what would run, touch nothing");
    command->add_flag("--help-config", args.help_config, "list every config key with its type, default and meaning");
}

Config resolve_config(const Schema& schema, const CommonArgs& args) {
    Config config(schema);
    for (const std::string& path : args.config_files) config.merge_toml_file(path);
    for (const std::string& assignment : args.sets) config.apply_set(assignment);
    config.check_required();
    // an empty store.path given on purpose (--set store.path=) is a mistake, never "use the default"
    if (config.has("store.path") && config.get_string("store.path").empty())
        throw_config_error("store.path", "\"\"",
                           "must name a file (given empty in " + config.source("store.path") + ")",
                           "--set store.path=results/prophet.db, or leave store.path out for the default");
    return config;
}

CLI::Validator non_negative_number(const std::string& example) {
    return CLI::Validator(
        [example](std::string& text) -> std::string {
            double value = 0;
            size_t used = 0;
            try {
                value = std::stod(text, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == 0 || used != text.size() || !std::isfinite(value))
                return "'" + text + "' is not a number; give a number >= 0, e.g. " + example;
            if (value < 0) return text + " is negative; give a number >= 0, e.g. " + example;
            return "";
        },
        "NUMBER >= 0");
}

int report_start_error(const Error& e, int world_rank) {
    if (world_rank != 0) {
        if (!launched_by_mpi()) return e.exit_code();
        std::this_thread::sleep_for(std::chrono::seconds(3));
        std::fprintf(stderr, "prophet: rank %d: %s\n", world_rank, e.what());
    } else {
        std::fprintf(stderr, "prophet: %s\n", e.what());
    }
    return e.exit_code();
}

void print_schema(const Schema& schema, const std::string& command) {
    std::printf("config keys of `prophet %s` (set in a --config TOML file or with --set key=value):\n%s",
                command.c_str(), schema.describe().c_str());
}

namespace {

std::string run_capture(const std::string& command) {
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return out;
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
    pclose(pipe);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

}  // namespace

std::string git_sha(bool* dirty) {
#ifdef PROPHET_SOURCE_DIR
    const std::string dir = PROPHET_SOURCE_DIR;
#else
    const std::string dir = ".";
#endif
    const std::string sha = run_capture("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
    if (dirty) *dirty = !run_capture("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null").empty();
    return sha.empty() ? "unknown" : sha;
}

std::string hardware_json() {
    nlohmann::json hw;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    hw["host"] = host;
    hw["cpu_threads"] = std::thread::hardware_concurrency();
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
        if (line.rfind("model name", 0) == 0) {
            hw["cpu"] = line.substr(line.find(':') + 2);
            break;
        }
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);)
        if (line.rfind("MemTotal", 0) == 0) {
            std::istringstream in(line.substr(9));
            long kib = 0;
            in >> kib;
            hw["mem_gib"] = kib / 1048576.0;
            break;
        }
    return hw.dump();
}

Store open_existing_store(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error(kExitDatabase, "database error: " + path + ": no such store file; fix: pass --db FILE (runs "
                                   "record into store.path, default results/prophet.db)");
    return Store::open(path);
}

Store open_store_to_read(const std::string& path) {
    // writable: as a writing command opens it (an older schema is migrated); else read-only (store.h), so a
    // read-only file, directory or mount is read, and no message asks to make it writable
    const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
    if (::access(path.c_str(), W_OK) == 0 && ::access(dir.c_str(), W_OK) == 0) return open_existing_store(path);
    return Store::open_read_only(path);
}

RunInfo make_run_info(const std::string& command, const Config& config, const CommonArgs& args) {
    RunInfo info;
    info.command = command;
    info.config_toml = config.canonical_toml();
    info.config_hash = config.hash();
    std::string overrides;
    for (const std::string& s : args.sets) overrides += (overrides.empty() ? "" : " ") + s;
    info.overrides = overrides;
    info.git_sha = git_sha(&info.git_dirty);
#ifdef PROPHET_VERSION
    info.prophet_version = PROPHET_VERSION;
#endif
    info.hardware_json = hardware_json();
    return info;
}

std::string fmt(double value, int precision) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    return buffer;
}

std::string fmt_bytes(double bytes) {
    char buffer[64];
    if (bytes >= 1e9)
        std::snprintf(buffer, sizeof buffer, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6)
        std::snprintf(buffer, sizeof buffer, "%.2f MB", bytes / 1e6);
    else if (bytes >= 1e3)
        std::snprintf(buffer, sizeof buffer, "%.1f kB", bytes / 1e3);
    else
        std::snprintf(buffer, sizeof buffer, "%.0f B", bytes);
    return buffer;
}

}  // namespace prophet::cli
