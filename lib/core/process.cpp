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

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds_of(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Forks and execs program with stdin from /dev/null and stdout/stderr into fresh pipes; out_fd / err_fd get the
// read ends. Returns the child's pid (its own process group), or -1 with r.exit_code 127 and r.err set.
pid_t start_child(const std::string& program, const std::vector<std::string>& args, int& out_fd, int& err_fd,
                  ChildResult& r) {
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
        return -1;
    }
    setpgid(pid, pid);  // also here: whichever of parent and child runs first, the group exists before a signal
    out_fd = out_pipe[0];
    err_fd = err_pipe[0];
    return pid;
}

// The time limit's escalation, one stage each time next_action comes: 0 running -> 1 SIGTERM sent (timed out)
// -> 2 SIGKILL sent kill_grace_s later -> 3 gave up reading the pipes 5 s after that.
struct TimeLimit {
    bool limited = false;
    int stage = 0;
    Clock::time_point next_action;

    // poll's timeout in ms until the next stage (-1: none); advances the stage when it has come (then 0)
    int poll_timeout_ms(pid_t pid, const ChildOptions& options, ChildResult& r) {
        if (!limited) return -1;
        const auto now = Clock::now();
        if (now < next_action)
            return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_action - now).count() +
                                    1);
        if (stage == 0) {
            r.timed_out = true;
            kill(-pid, SIGTERM);
            next_action = now + seconds_of(options.kill_grace_s);
        } else if (stage == 1) {
            kill(-pid, SIGKILL);
            next_action = now + std::chrono::seconds(5);  // a process outside the group may hold a pipe
        }
        ++stage;
        return 0;
    }
};

// Reads what is ready on fds into sinks, closing a pipe at its end or on an error; returns the pipes closed.
int read_ready(pollfd (&fds)[2], std::string* const (&sinks)[2]) {
    char buffer[65536];
    int closed = 0;
    for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
        if (n > 0) {
            sinks[i]->append(buffer, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
            close(fds[i].fd);
            fds[i].fd = -1;
            ++closed;
        }
    }
    return closed;
}

// Collects the child's stdout and stderr into r until both pipes close or the time limit gives up on them.
void drain_child(pid_t pid, int out_fd, int err_fd, const ChildOptions& options, ChildResult& r) {
    TimeLimit limit;
    limit.limited = options.time_limit_s > 0;
    limit.next_action = Clock::now() + seconds_of(options.time_limit_s);
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    std::string* const sinks[2] = {&r.out, &r.err};
    int open_fds = 2;
    while (open_fds > 0 && limit.stage < 3) {
        const int timeout_ms = limit.poll_timeout_ms(pid, options, r);
        if (timeout_ms == 0) continue;
        const int ready = poll(fds, 2, timeout_ms);
        if (ready < 0) {
            if (errno == EINTR) continue;
            break;
        }
        open_fds -= read_ready(fds, sinks);
    }
    for (pollfd& f : fds)
        if (f.fd >= 0) close(f.fd);
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& args, const ChildOptions& options) {
    ChildResult r;
    const std::string program = args.empty() ? "" : find_program(args[0]);
    if (program.empty()) {
        r.exit_code = 127;
        r.err = "cannot run " + (args.empty() ? std::string("(no command)") : args[0]) + ": not found on PATH";
        return r;
    }
    int out_fd = -1, err_fd = -1;
    const pid_t pid = start_child(program, args, out_fd, err_fd, r);
    if (pid < 0) return r;
    g_child_group.store(pid);
    if (g_stop_signal != 0) kill(-pid, g_stop_signal);  // a stop that came while the child was starting
    drain_child(pid, out_fd, err_fd, options, r);
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
