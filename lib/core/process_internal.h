// process_internal.h: the pieces of process.cpp that coprocess.cpp shares (not for other callers).
#pragma once

#include <sys/types.h>

#include <string>

namespace prophet {

// argv[0] as execv needs it: as given when it holds a '/', else the first executable match on PATH; "" if none.
std::string find_program(const std::string& name);

// In the forked child, before exec (only async-signal-safe calls): own process group, SIGTERM when the parent
// dies, default SIGTERM/SIGINT, SIGPIPE ignored, stdin/stdout/stderr from the fds; close_other_fds closes every
// fd above 2 first. Exits 127 when exec fails.
[[noreturn]] void exec_child(const char* program, char* const* argv, pid_t parent, int in_fd, int out_fd, int err_fd,
                             bool close_other_fds);

}  // namespace prophet
