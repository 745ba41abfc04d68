// cli_util.h: running the `prophet` binary from tests, as a user would, with stdout and stderr kept apart.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prophet::testing {

struct CliResult {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

// Every child a test starts runs under timeout(1): SIGTERM after kChildLimitS (mpirun passes it on to its ranks,
// prophet records the run `killed`), SIGKILL kChildKillAfterS later if it is still there, both to the child's
// whole process group. A hung child then ends with exit 124 (or 137) and the test fails instead of hanging CI;
// ctest's TIMEOUT (900 s for these modules, tests/CMakeLists.txt) is the outer bound.
inline constexpr int kChildLimitS = 600;
inline constexpr int kChildKillAfterS = 10;

// `command` under the guard above, with `limit_s` instead of kChildLimitS when given: a shell command line.
inline std::string guarded(const std::string& command, int limit_s = kChildLimitS) {
    return "timeout --kill-after=" + std::to_string(kChildKillAfterS) + " " + std::to_string(limit_s) + " " + command;
}

// a file's whole text ("" when it cannot be read)
inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs the shell command line `command` under guarded() from the repository root, stdout captured, stderr into
// `dir`/stderr.txt.
inline CliResult run_command(const std::string& command, const std::filesystem::path& dir,
                             int limit_s = kChildLimitS) {
    const std::string err_path = (dir / "stderr.txt").string();
    const std::string line = std::string("cd '") + PROPHET_SOURCE_DIR + "' && " + guarded(command, limit_s) + " 2>'" +
                             err_path + "'";
    CliResult r;
    FILE* pipe = popen(line.c_str(), "r");
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(err_path);
    r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return r;
}

// Runs `<launcher> prophet <args>` from the repository root (guarded); `dir` holds the captured stderr. launcher
// is empty for a plain run, or e.g. "mpirun -np 4".
inline CliResult run_prophet(const std::string& launcher, const std::string& args, const std::filesystem::path& dir) {
    return run_command(launcher + " '" + PROPHET_BINARY + "' " + args, dir);
}

inline bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// 4 MPI ranks as root on a machine with fewer cores (OpenMPI needs both flags then)
inline constexpr const char* kMpirun4 = "mpirun --allow-run-as-root --oversubscribe -np 4";

// The "loss" of every step line of a `--json` run's stdout, in order.
inline std::vector<double> json_losses(const std::string& out) {
    std::vector<double> losses;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] != '{') continue;
        const auto j = nlohmann::json::parse(line);
        if (j.contains("step") && j.contains("loss")) losses.push_back(j["loss"].get<double>());
    }
    return losses;
}

}  // namespace prophet::testing
