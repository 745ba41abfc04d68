// coprocess.cpp: see coprocess.h.
#include "core/coprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/process_internal.h"

namespace prophet {

std::vector<std::string> split_command_line(const std::string& line, const std::string& key) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) words.push_back(word);
            word.clear();
            in_word = false;
            continue;
        }
        in_word = true;
        if (c == '\\' && i + 1 < line.size()) {
            word += line[++i];
        } else if (c == '\'' || c == '"') {
            const size_t close = line.find(c, i + 1);
            size_t j = i + 1;
            for (; j < line.size() && line[j] != c; ++j) {
                if (c == '"' && line[j] == '\\' && j + 1 < line.size() && (line[j + 1] == '"' || line[j + 1] == '\\'))
                    ++j;
                word += line[j];
            }
            if (close == std::string::npos || j >= line.size())
                throw_config_error(key, line, std::string("has an unclosed ") + c + " quote",
                                   "close the quote (docs/policies.md: quoting)");
            i = j;
        } else {
            word += c;
        }
    }
    if (in_word) words.push_back(word);
    if (words.empty()) throw_config_error(key, line, "names no command", "--set " + key + "=\"python3 my_policy.py\"");
    return words;
}

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_in(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// milliseconds left until the deadline, rounded up; 0 once past it
int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>((left + 999) / 1000);
}

}  // namespace

CoProcess::CoProcess(const std::vector<std::string>& args, const std::string& key, double grace_s) : grace_s_(grace_s) {
    const std::string program = args.empty() ? "" : find_program(args[0]);
    if (program.empty() || access(program.c_str(), X_OK) != 0)
        throw_config_error(key, args.empty() ? "" : args[0], "is not an executable file nor found on PATH",
                           "give the program's path, e.g. --set " + key + "=\"/usr/bin/python3 policy.py\"");
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int in_pipe[2], out_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) != 0)
        throw Error(kExitRunFailed, std::string("run failed: pipe: ") + std::strerror(errno));
    if (pipe2(out_pipe, O_CLOEXEC) != 0) {
        close(in_pipe[0]);
        close(in_pipe[1]);
        throw Error(kExitRunFailed, std::string("run failed: pipe: ") + std::strerror(errno));
    }
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) exec_child(program.c_str(), argv.data(), parent, in_pipe[0], out_pipe[1], 2, true);
    const int fork_errno = errno;
    close(in_pipe[0]);
    close(out_pipe[1]);
    to_child_ = in_pipe[1];
    from_child_ = out_pipe[0];
    if (pid_ < 0) {
        close(to_child_);
        close(from_child_);
        throw Error(kExitRunFailed, "run failed: cannot start " + args[0] + ": fork: " + std::strerror(fork_errno));
    }
    setpgid(pid_, pid_);
    fcntl(to_child_, F_SETFL, fcntl(to_child_, F_GETFL) | O_NONBLOCK);
    fcntl(from_child_, F_SETFL, fcntl(from_child_, F_GETFL) | O_NONBLOCK);
}

CoProcess::~CoProcess() {
    if (to_child_ >= 0) close(to_child_);  // EOF on its stdin: a well-behaved child exits
    const Clock::time_point deadline = deadline_in(grace_s_);
    while (!reaped_ && Clock::now() < deadline) {
        if (waitpid(pid_, &wait_status_, WNOHANG) == pid_)
            reaped_ = true;
        else
            usleep(2000);
    }
    kill(-pid_, SIGKILL);  // the group: whatever it started too
    if (!reaped_)
        while (waitpid(pid_, &wait_status_, 0) < 0 && errno == EINTR) {
        }
    if (from_child_ >= 0) close(from_child_);
}

CoProcess::Status CoProcess::write_line(const std::string& text, double timeout_s) {
    const Clock::time_point deadline = deadline_in(timeout_s);
    const std::string data = text + "\n";
    size_t done = 0;
    // a write to a child that has exited must fail (EPIPE), not kill this process: SIGPIPE blocked meanwhile
    sigset_t pipe_set, previous;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &previous);
    Status status = Status::kOk;
    while (done < data.size()) {
        const ssize_t n = write(to_child_, data.data() + done, data.size() - done);
        if (n > 0) {
            done += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN) {
            status = Status::kClosed;
            break;
        }
        pollfd pfd{to_child_, POLLOUT, 0};
        const int left = ms_left(deadline);
        if (left == 0 || (poll(&pfd, 1, left) == 0)) {
            status = Status::kTimeout;
            break;
        }
    }
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {  // drop the SIGPIPE an EPIPE left pending
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return status;
}

CoProcess::Status CoProcess::read_line(std::string* line, double timeout_s, size_t max_bytes) {
    const Clock::time_point deadline = deadline_in(timeout_s);
    char chunk[65536];
    for (;;) {
        const size_t newline = buffer_.find('\n');
        if (newline != std::string::npos) {
            *line = buffer_.substr(0, newline);
            buffer_.erase(0, newline + 1);
            return Status::kOk;
        }
        if (buffer_.size() > max_bytes) {
            *line = buffer_.substr(0, max_bytes);
            return Status::kClosed;
        }
        const ssize_t n = read(from_child_, chunk, sizeof chunk);
        if (n > 0) {
            buffer_.append(chunk, static_cast<size_t>(n));
            continue;
        }
        if (n == 0) return Status::kClosed;
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return Status::kClosed;
        pollfd pfd{from_child_, POLLIN, 0};
        const int left = ms_left(deadline);
        if (left == 0 || poll(&pfd, 1, left) == 0) return Status::kTimeout;
    }
}

std::string CoProcess::exit_description() {
    if (!reaped_) {
        // the pipe closed: give the child a moment to finish exiting before saying how
        for (int i = 0; i < 100 && !reaped_; ++i) {
            if (waitpid(pid_, &wait_status_, WNOHANG) == pid_)
                reaped_ = true;
            else
                usleep(2000);
        }
        if (!reaped_) return "still running (it closed its stdout)";
    }
    if (WIFEXITED(wait_status_)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status_));
    if (WIFSIGNALED(wait_status_)) return "was killed by signal " + std::to_string(WTERMSIG(wait_status_));
    return "ended";
}

}  // namespace prophet
