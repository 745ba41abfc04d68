// The guard around every child a test starts (cli_util.h): a child that hangs is ended in bounded time and the
// test sees a failing exit code, so a regression that hangs prophet or mpirun fails the test instead of hanging CI.
#include <gtest/gtest.h>

#include <chrono>

#include "../temp_dir_test.h"
#include "cli_util.h"

namespace {

using prophet::testing::CliResult;
using prophet::testing::run_command;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class ChildGuard : public prophet::testing::TempDirTest {};

TEST_F(ChildGuard, AChildThatSleepsPastItsLimitIsStoppedWithExit124) {
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult r = run_command("sleep 300", dir_, 1);
    EXPECT_EQ(r.exit_code, 124) << "timeout(1)'s code for a child it stopped with SIGTERM";
    EXPECT_LT(seconds_since(t0), 60.0);
}

// a child that ignores SIGTERM (a stuck mpirun) gets SIGKILL kChildKillAfterS later; its own children with it
TEST_F(ChildGuard, AChildThatIgnoresSigtermIsKilled) {
    const auto t0 = std::chrono::steady_clock::now();
    const CliResult r = run_command("sh -c 'trap \"\" TERM; while :; do sleep 1; done'", dir_, 1);
    EXPECT_EQ(r.exit_code, 128 + 9);
    EXPECT_GE(seconds_since(t0), 1.0 + prophet::testing::kChildKillAfterS - 0.5);
    EXPECT_LT(seconds_since(t0), 120.0);
}

TEST_F(ChildGuard, AChildWithinItsLimitIsPassedThroughUnchanged) {
    const CliResult r = run_command("sh -c 'echo out; echo err >&2; exit 7'", dir_, 60);
    EXPECT_EQ(r.exit_code, 7);
    EXPECT_EQ(r.out, "out\n");
    EXPECT_EQ(r.err, "err\n");
}

}  // namespace
