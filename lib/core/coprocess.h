// coprocess.h: a child process spoken to line by line over its stdin and stdout (an external policy).
//
// Started without a shell (argv as given, PATH lookup for argv[0]), in a process group of its own, every fd of
// this process above 2 closed, stderr shared with this process (its messages reach the user). Every write and
// read has a deadline. The destructor closes its stdin, gives it `grace` to exit, then SIGKILLs the group and
// reaps it: no child outlives the object.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace prophet {

// Splits a command line into argv without a shell: words separated by blanks; '...' keeps everything literally;
// "..." keeps everything but \" and \\ ; a backslash outside quotes takes the next character literally. No
// expansion of $, *, ~ or ;. Throws a config error (exit 3) naming `key` for an unclosed quote or an empty line.
std::vector<std::string> split_command_line(const std::string& line, const std::string& key);

class CoProcess {
  public:
    enum class Status { kOk, kTimeout, kClosed };  // kClosed: the child closed the pipe (exited) or it broke

    // Throws a config error naming `key` when argv[0] is not found; Error(1) when fork or pipe fails.
    CoProcess(const std::vector<std::string>& argv, const std::string& key, double grace_s = 1.0);
    ~CoProcess();
    CoProcess(const CoProcess&) = delete;
    CoProcess& operator=(const CoProcess&) = delete;

    // Writes text + '\n' before the deadline (seconds from now).
    Status write_line(const std::string& text, double timeout_s);
    // Reads one line (without the '\n') before the deadline; lines over max_bytes end the read as kClosed
    // with *line holding the first max_bytes.
    Status read_line(std::string* line, double timeout_s, size_t max_bytes = size_t{1} << 28);
    // "exited with status N" / "killed by signal N" / "still running" (reaps it when it has exited).
    std::string exit_description();
    pid_t pid() const { return pid_; }

  private:
    pid_t pid_ = -1;
    int to_child_ = -1, from_child_ = -1;
    bool reaped_ = false;
    int wait_status_ = 0;
    double grace_s_;
    std::string buffer_;  // read but not yet returned
};

}  // namespace prophet
