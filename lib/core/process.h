// process.h: running a child process (prophet's own children: `prophet train` points of a sweep, the runs of
// `prophet ablate`) and finding this binary.
//
// A child ends with its parent: it runs in a process group of its own (so a signal reaches it and whatever it
// started, e.g. mpirun's ranks) with PR_SET_PDEATHSIG = SIGTERM (so a parent killed with SIGKILL still stops it,
// and prophet train records its run `killed`), and with SIGPIPE ignored (a write to the dead parent's pipe fails
// instead of killing it before it can record itself).
#pragma once

#include <string>
#include <vector>

namespace prophet {

struct ChildOptions {
    double time_limit_s = 0;   // > 0: wall-clock limit; past it SIGTERM goes to the child's process group
    double kill_grace_s = 10;  // then SIGKILL to the group this many seconds after that SIGTERM
};

struct ChildResult {
    int exit_code = -1;  // 127: could not start; 128 + N: killed by signal N
    std::string out, err;
    bool timed_out = false;  // stopped at ChildOptions::time_limit_s
};

// Runs argv (PATH lookup for argv[0]) with stdin from /dev/null and stdout / stderr captured; both pipes are read
// together (poll) so a child filling one cannot stall on the other.
ChildResult run_child(const std::vector<std::string>& args, const ChildOptions& options = {});

// While one lives, SIGTERM and SIGINT to this process are forwarded to the process group of the child run_child
// is running (if any) and remembered (received()), so the caller can record the point in flight and stop; a
// second SIGTERM / SIGINT ends this process at once (the default action; its child then gets PR_SET_PDEATHSIG).
// The destructor restores the previous handlers. One at a time per process.
class StopSignalForwarder {
  public:
    StopSignalForwarder();
    ~StopSignalForwarder();
    StopSignalForwarder(const StopSignalForwarder&) = delete;
    StopSignalForwarder& operator=(const StopSignalForwarder&) = delete;
    static int received();  // 0, or the first SIGTERM / SIGINT received while one lived
};

// The last non-blank line of text ("" if none).
std::string last_line(const std::string& text);

// s as one word for /bin/sh: in single quotes, each ' written '\'' ("it's" -> 'it'\''s').
std::string shell_quoted(const std::string& s);

// This process's binary (/proc/self/exe), so children run the same prophet; throws exit 1 where it cannot resolve.
std::string self_binary();

}  // namespace prophet
