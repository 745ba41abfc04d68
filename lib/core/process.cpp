// process.cpp: child processes and this binary's path (see process.h).
#include "core/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/process_internal.h"

namespace prophet {

namespace {

// The process group of the child run_child is waiting for (0: none); read by the signal handler.
std::atomic<pid_t> g_child_group{0};
volatile sig_atomic_t g_stop_signal = 0;

void forward_stop(int signal_number) {
    if (g_stop_signal != 0) {  // the second one: end as the default action would
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        sigaction(signal_number, &dfl, nullptr);
        raise(signal_number);
        return;
    }
    g_stop_signal = signal_number;
    const pid_t group = g_child_group.load();
    if (group > 0) kill(-group, signal_number);
}

struct sigaction g_previous_term, g_previous_int;

}  // namespace

std::string find_program(const std::string& name) {
    if (name.find('/') != std::string::npos) return name;
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t begin = 0;
    while (begin <= dirs.size()) {
        const size_t end = std::min(dirs.find(':', begin), dirs.size());
        const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
        const std::string candidate = dir + "/" + name;
        struct stat st {};
        if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
            return candidate;
        begin = end + 1;
    }
    return "";
}

void exec_child(const char* program, char* const* argv, pid_t parent, int in_fd, int out_fd, int err_fd,
                bool close_other_fds) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(128 + SIGTERM);  // the parent died before the prctl
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &dfl, nullptr);
    sigaction(SIGINT, &dfl, nullptr);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (close_other_fds) {  // whatever this process opened without O_CLOEXEC stays out of the child
        const long open_max = sysconf(_SC_OPEN_MAX);
        for (int fd = 3; fd < (open_max > 0 && open_max < 65536 ? open_max : 65536); ++fd) close(fd);
    }
    execv(program, argv);
    const char* message = "cannot run the child: exec failed\n";
    ssize_t ignored = write(2, message, std::strlen(message));
    (void)ignored;
    _exit(127);
}

StopSignalForwarder::StopSignalForwarder() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = forward_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &g_previous_term);
    sigaction(SIGINT, &sa, &g_previous_int);
}

StopSignalForwarder::~StopSignalForwarder() {
    sigaction(SIGTERM, &g_previous_term, nullptr);
    sigaction(SIGINT, &g_previous_int, nullptr);
}

int StopSignalForwarder::received() { return g_stop_signal; }

ChildResult run_child(const std::vector<std::string>& args, const ChildOptions& options) {
    ChildResult r;
    const std::string program = args.empty() ? "" : find_program(args[0]);
    if (program.empty()) {
        r.exit_code = 127;
        r.err = "cannot run " + (args.empty() ? std::string("(no command)") : args[0]) + ": not found on PATH";
        return r;
    }
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
        throw Error(kExitRunFailed, std::string("run failed: cannot create a pipe: ") + std::strerror(errno));
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) exec_child(program.c_str(), argv.data(), parent, null_fd, out_pipe[1], err_pipe[1], false);
    const int fork_errno = errno;
    if (null_fd >= 0) close(null_fd);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (pid < 0) {
        close(out_pipe[0]);
        close(err_pipe[0]);
        r.exit_code = 127;
        r.err = "cannot run " + args[0] + ": fork failed: " + std::strerror(fork_errno);
        return r;
    }
    setpgid(pid, pid);  // also here: whichever of parent and child runs first, the group exists before a signal
    g_child_group.store(pid);
    if (g_stop_signal != 0) kill(-pid, g_stop_signal);  // a stop that came while the child was starting

    using Clock = std::chrono::steady_clock;
    const auto seconds = [](double s) {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    };
    const bool limited = options.time_limit_s > 0;
    Clock::time_point next_action = Clock::now() + seconds(options.time_limit_s);
    int stage = 0;  // time limit: 0 running, 1 SIGTERM sent, 2 SIGKILL sent, 3 gave up reading the pipes
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&r.out, &r.err};
    int open_fds = 2;
    char buffer[65536];
    while (open_fds > 0 && stage < 3) {
        int timeout_ms = -1;
        if (limited) {
            const auto now = Clock::now();
            if (now >= next_action) {
                if (stage == 0) {
                    r.timed_out = true;
                    kill(-pid, SIGTERM);
                    next_action = now + seconds(options.kill_grace_s);
                } else if (stage == 1) {
                    kill(-pid, SIGKILL);
                    next_action = now + std::chrono::seconds(5);  // a process outside the group may hold a pipe
                }
                ++stage;
                continue;
            }
            timeout_ms = static_cast<int>(
                std::chrono::duration_cast<std::chrono::milliseconds>(next_action - now).count() + 1);
        }
        const int ready = poll(fds, 2, timeout_ms);
        if (ready < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) {
                sinks[i]->append(buffer, static_cast<size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    for (pollfd& f : fds)
        if (f.fd >= 0) close(f.fd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (r.timed_out) kill(-pid, SIGKILL);  // whatever of the group outlived its leader
    g_child_group.store(0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return r;
}

std::string last_line(const std::string& text) {
    size_t end = text.find_last_not_of(" \t\r\n");
    if (end == std::string::npos) return "";
    const size_t newline = text.rfind('\n', end);
    const size_t begin = newline == std::string::npos ? 0 : newline + 1;
    return text.substr(begin, end - begin + 1);
}

std::string shell_quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string self_binary() {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw Error(kExitRunFailed, "run failed: cannot resolve /proc/self/exe; fix: run prophet on Linux");
    return self.string();
}

}  // namespace prophet
