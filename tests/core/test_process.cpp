// test_process.cpp: run_child starts its child in a process group of its own (so a signal can reach the child and
// everything it started, and a terminal's Ctrl-C does not bypass the parent), stops it at a wall-clock limit
// (SIGTERM to the group, SIGKILL after the grace), and the child starts with SIGPIPE ignored.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "core/process.h"

using namespace prophet;

TEST(RunChild, ChildLeadsItsOwnProcessGroup) {
    // $$ is the shell's pid; its process group id is the 5th field of /proc/$$/stat (after "pid (comm) state ppid")
    const ChildResult r = run_child({"sh", "-c", "echo $$; cut -d' ' -f5 /proc/$$/stat"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const size_t nl = r.out.find('\n');
    ASSERT_NE(nl, std::string::npos) << r.out;
    const long pid = std::stol(r.out.substr(0, nl)), pgid = std::stol(r.out.substr(nl + 1));
    EXPECT_EQ(pgid, pid);
    EXPECT_NE(pgid, static_cast<long>(getpgrp()));
    EXPECT_FALSE(r.timed_out);
}

TEST(RunChild, TimeLimitStopsTheWholeGroup) {
    ChildOptions o;
    o.time_limit_s = 0.5;
    o.kill_grace_s = 2;
    const auto start = std::chrono::steady_clock::now();
    // the grandchild sleep shares the group; were only sh stopped, it would hold the pipe open for 60 s
    const ChildResult r = run_child({"sh", "-c", "sleep 60; echo late"}, o);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(r.timed_out);
    EXPECT_EQ(r.exit_code, 128 + 15) << r.err;  // SIGTERM
    EXPECT_EQ(r.out.find("late"), std::string::npos);
    EXPECT_LT(waited, 30.0);  // generous: 0.5 s limit plus 2 s grace on a loaded machine
}

TEST(RunChild, GraceEndsWithSigkill) {
    ChildOptions o;
    o.time_limit_s = 0.3;
    o.kill_grace_s = 0.5;
    const ChildResult r = run_child({"sh", "-c", "trap '' TERM; sleep 60"}, o);
    EXPECT_TRUE(r.timed_out);
    EXPECT_EQ(r.exit_code, 128 + 9) << r.err;  // SIGKILL: the shell ignored SIGTERM
}

TEST(RunChild, ChildStartsWithSigpipeIgnored) {
    // SigIgn in /proc/self/status is a hex mask; SIGPIPE (13) is bit 12
    const ChildResult r = run_child({"sh", "-c", "grep SigIgn /proc/self/status | cut -f2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const unsigned long mask = std::stoul(r.out, nullptr, 16);
    EXPECT_TRUE(mask & (1ul << 12)) << r.out;
}

// shell_quoted: /bin/sh reads the quoted word back as the original string, quotes, spaces and $ included.
TEST(ShellQuoted, ShReadsTheWordBackUnchanged) {
    EXPECT_EQ(prophet::shell_quoted("it's"), "'it'\\''s'");
    for (const std::string s : {"plain", "two words", "it's", "$HOME `x` \"q\" \\", ""}) {
        const prophet::ChildResult r = prophet::run_child({"/bin/sh", "-c", "printf %s " + prophet::shell_quoted(s)});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, s);
    }
}
