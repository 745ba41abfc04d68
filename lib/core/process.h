// process.h: running a child process (prophet's own children: `prophet train` points of a sweep, the runs of
// `prophet ablate`) and finding this binary.
#pragma once

#include <string>
#include <vector>

namespace prophet {

struct ChildResult {
    int exit_code = -1;  // 127: could not start; 128 + N: killed by signal N
    std::string out, err;
};

// Runs argv (PATH lookup for argv[0]) with stdin from /dev/null and stdout / stderr captured; both pipes are read
// together (poll) so a child filling one cannot stall on the other.
ChildResult run_child(const std::vector<std::string>& args);

// The last non-blank line of text ("" if none).
std::string last_line(const std::string& text);

// This process's binary (/proc/self/exe), so children run the same prophet; throws exit 1 where it cannot resolve.
std::string self_binary();

}  // namespace prophet
