// trace_bounds_test.cpp: a small trace input cannot make prophet allocate gigabytes or work for hours (issue 14,
// items 3-4). Each reader runs in a child process under an address-space limit (RLIMIT_AS, 1 GiB above what the
// child already maps) and an alarm, so the test itself stays bounded when the bound is missing: the child then
// ends with std::bad_alloc or SIGALRM instead of the expected prophet::Error.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <new>
#include <string>

#include "trace/trace.h"
#include "trace_test_util.h"

namespace prophet {
namespace {

using testing::ScratchFile;
using testing::write_bytes;

struct ChildResult {
    int exit_code = -1;  // the prophet::Error's exit code; 90: no error; 91: std::bad_alloc; -1: killed
    int signal = 0;      // the signal that ended the child, 0 if it exited
    std::string message;
};

uint64_t mapped_bytes() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
    return 0;
}

// Runs `body` in a child with 1 GiB more address space than it starts with and `seconds` of wall time.
ChildResult run_bounded(const std::function<void()>& body, unsigned seconds) {
    int pipe_fd[2];
    EXPECT_EQ(pipe(pipe_fd), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fd[0]);
        const rlim_t limit = mapped_bytes() + (1ull << 30);
        const rlimit rl = {limit, limit};
        setrlimit(RLIMIT_AS, &rl);
        alarm(seconds);
        int code = 90;
        std::string message;
        try {
            body();
        } catch (const Error& e) {
            code = e.exit_code();
            message = e.what();
        } catch (const std::bad_alloc&) {
            code = 91;
            message = "std::bad_alloc";
        }
        (void)!write(pipe_fd[1], message.data(), message.size());
        _exit(code);
    }
    close(pipe_fd[1]);
    ChildResult r;
    char buffer[4096];
    for (ssize_t n; (n = read(pipe_fd[0], buffer, sizeof buffer)) > 0;) r.message.append(buffer, static_cast<size_t>(n));
    close(pipe_fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    return r;
}

void expect_refused(const ChildResult& r, int exit_code, std::initializer_list<std::string> words) {
    EXPECT_EQ(r.signal, 0) << "killed by signal " << r.signal << (r.signal == SIGALRM ? " (ran past its time)" : "");
    EXPECT_EQ(r.exit_code, exit_code) << r.message;
    for (const std::string& word : words)
        EXPECT_NE(r.message.find(word), std::string::npos) << "missing \"" << word << "\" in: " << r.message;
}

// Issue 14 item 3: 197 bytes declaring num_iterations = 2e9 allocated 16 GB before reading a row.
TEST(TraceBounds, CsvDeclaringTwoBillionIterationsIsRefusedBeforeAllocating) {
    ScratchFile file("huge.csv");
    const std::string text =
        "# prophet trace csv v1\n"
        "# num_iterations=2000000000 num_layers=1 num_devices=1 num_experts=1 top_k=1 tokens_per_iteration=1 "
        "d_model=0 d_ffn=0 seq_len=0 source=\n"
        "iteration,layer,device,expert,tokens\n"
        "0,0,0,0,1\n";
    write_bytes(file.path(), text);
    for (const auto& read : std::initializer_list<std::function<void()>>{[&] { read_trace_csv(file.path()); },
                                                                         [&] { load_trace(file.path()); }})
        expect_refused(run_bounded(read, 60), kExitConfig, {file.path(), "num_iterations", "bytes"});
}

// Sparse rows may leave most cells out, but not all but one of 2^30: refused naming the sizes and the limit.
TEST(TraceBounds, CsvDeclaringFarMoreCellsThanItsBytesCanMeanIsRefused) {
    ScratchFile file("wide.csv");
    write_bytes(file.path(),
                "# prophet trace csv v1\n"
                "# num_iterations=1 num_layers=1 num_devices=32768 num_experts=32768 top_k=1 tokens_per_iteration=1 "
                "d_model=0 d_ffn=0 seq_len=0 source=\n"
                "iteration,layer,device,expert,tokens\n"
                "0,0,0,0,1\n");
    expect_refused(run_bounded([&] { read_trace_csv(file.path()); }, 60), kExitConfig,
                   {file.path(), "num_devices x num_experts", "1073741824", "at most 4194304"});
}

// A small sparse file within the bound is still read (cells not given are 0).
TEST(TraceBounds, SparseCsvWithinTheBoundIsRead) {
    ScratchFile file("sparse.csv");
    write_bytes(file.path(),
                "# prophet trace csv v1\n"
                "# num_iterations=1 num_layers=1 num_devices=256 num_experts=256 top_k=1 tokens_per_iteration=256 "
                "d_model=0 d_ffn=0 seq_len=0 source=\n"
                "iteration,layer,device,expert,tokens\n"
                "0,0,0,0,256\n");
    const Trace trace = read_trace_csv(file.path());
    EXPECT_EQ(trace.counts.size(), 256u * 256u);
    EXPECT_EQ(trace.counts[0], 256);
}

// Issue 14 item 3: a generator TOML could ask for 2^31 counts plus 2^30 transitions (24 GiB).
TEST(TraceBounds, GeneratorAskingForGigabytesIsRefusedWithExitFour) {
    const std::string text = "[trace]\ngenerator = \"uniform\"\nnum_experts = 32768\nnum_devices = 32768\n"
                             "tokens_per_iteration = 32768\nnum_iterations = 1\nnum_layers = 2\n";
    expect_refused(run_bounded([&] { generate_trace_from_toml_string(text, "big.toml"); }, 60), kExitResource,
                   {"big.toml", "trace.num_iterations", "2^28"});
}

// Issue 14 item 4: 8 lines asking for 2^40 tokens per iteration kept the generator busy for hours (one draw per
// token); refused at once. The 60 s alarm is only the bound of a regression; the refusal takes milliseconds.
TEST(TraceBounds, GeneratorAskingForHoursOfDrawsIsRefusedWithExitFour) {
    const std::string text = "[trace]\ngenerator = \"zipf\"\nnum_experts = 8\nnum_devices = 4\ntop_k = 2\n"
                             "tokens_per_iteration = 1099511627776\nnum_iterations = 4\nnum_layers = 4\n";
    expect_refused(run_bounded([&] { generate_trace_from_toml_string(text, "slow.toml"); }, 60), kExitResource,
                   {"slow.toml", "trace.tokens_per_iteration", "1099511627776", "2^32"});
    // the same through load_trace, as `trace info`, `plan` and `sweep` read it
    ScratchFile file("slow.toml");
    write_bytes(file.path(), text);
    expect_refused(run_bounded([&] { load_trace(file.path()); }, 60), kExitResource, {file.path(), "2^32"});
}

// The shipped generators stay far inside both limits.
TEST(TraceBounds, LargestShippedGeneratorIsWithinTheLimits) {
    const Trace trace = load_trace(testing::shipped("zipf-e16-k2.toml"));
    EXPECT_GT(trace.counts.size(), 0u);
}

}  // namespace
}  // namespace prophet
