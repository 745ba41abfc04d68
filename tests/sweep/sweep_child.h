// sweep_child.h: what the tests that run `prophet sweep` as a separate process share: starting it with its output
// in files, counting rows through an independent read-only connection, and waiting for a process to end.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace prophet::testing {

// `prophet sweep FILE --no-report --json --set store.path=DB`, stdout to LOG and stderr to LOG.err; -1 if it could
// not start.
inline pid_t spawn_sweep(const std::string& file, const std::string& db, const std::string& log) {
    std::vector<std::string> args = {PROPHET_BINARY, "sweep", file, "--no-report", "--json",
                                     "--set",        "store.path=" + db};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (log + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    return rc == 0 ? pid : -1;
}

// The integer result of `sql` (one row, one column) on an independent read-only connection; -1 while the file or
// the table is absent.
inline int count_rows(const std::string& db, const char* sql) {
    sqlite3* con = nullptr;
    int n = -1;
    if (sqlite3_open_v2(db.c_str(), &con, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_busy_timeout(con, 1000);
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(con, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(con);
    return n;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// waitpid with a bound: the exit status, or -1 after SIGKILL when `pid` did not end within `limit`.
inline int wait_bounded(pid_t pid, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0) return -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

// The pids whose parent is `parent` (from /proc/*/stat).
inline std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        const std::string stat = read_file(entry.path().string() + "/stat");
        const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
        if (close == std::string::npos) continue;
        char state = 0;
        int ppid = 0;
        if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent)
            out.push_back(static_cast<pid_t>(std::stoi(name)));
    }
    return out;
}

// True once `pid` no longer exists (or is a zombie), false when it still runs after `limit`.
inline bool wait_gone(pid_t pid, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (kill(pid, 0) != 0 && errno == ESRCH) return true;
        const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
        const size_t close = stat.rfind(')');
        if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

}  // namespace prophet::testing
