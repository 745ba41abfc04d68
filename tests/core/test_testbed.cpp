// The testbed's pieces (core/testbed.h, docs/testbed.md): the pinned launcher, /proc parsing, CPU lists and the
// busy-machine rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/testbed.h"

using namespace prophet;

namespace {

bool has(const std::vector<std::string>& cmd, const std::vector<std::string>& seq) {
    return std::search(cmd.begin(), cmd.end(), seq.begin(), seq.end()) != cmd.end();
}

}  // namespace

TEST(Testbed, LauncherPinsOneRankPerCoreUnlessRanksOutnumberCores) {
    EXPECT_TRUE(mpirun_launcher(1, 2).empty()) << "one rank runs without mpirun";
    const auto pinned = mpirun_launcher(2, 2);
    EXPECT_EQ(pinned.front(), "mpirun");
    EXPECT_TRUE(has(pinned, {"-np", "2"}));
    EXPECT_TRUE(has(pinned, {"--bind-to", "core"}));
    EXPECT_FALSE(has(pinned, {"--oversubscribe"}));
    EXPECT_TRUE(has(pinned, {"-x", "OPENBLAS_NUM_THREADS=1"}));
    const auto over = mpirun_launcher(4, 2);
    EXPECT_TRUE(has(over, {"-np", "4"}));
    EXPECT_TRUE(has(over, {"--oversubscribe"}));
    EXPECT_TRUE(has(over, {"--bind-to", "none"}));
    EXPECT_FALSE(has(over, {"--bind-to", "core"}));
    EXPECT_TRUE(has(over, {"-x", "OPENBLAS_NUM_THREADS=1"}));
}

TEST(Testbed, ParsesProcStatAndLoadavg) {
    const CpuTimes a = parse_cpu_times("cpu  100 5 50 800 10 1 2 30 0 0\ncpu0 50 2 25 400 5 0 1 15 0 0\n");
    EXPECT_EQ(a.total, 998u);
    EXPECT_EQ(a.steal, 30u);
    const CpuTimes b = parse_cpu_times("cpu  200 5 50 850 10 1 2 80 0 0\n");
    EXPECT_DOUBLE_EQ(steal_fraction(a, b), 50.0 / 200.0);
    EXPECT_DOUBLE_EQ(steal_fraction(a, a), 0.0);
    EXPECT_EQ(parse_cpu_times("cpu  1 2 3 4\n").steal, 0u) << "old kernels have no steal column";
    EXPECT_THROW(parse_cpu_times("intr 5\n"), Error);
    EXPECT_THROW(parse_cpu_times("cpu  1 2\n"), Error);
    EXPECT_DOUBLE_EQ(parse_load1("1.25 0.80 0.40 2/300 4242\n"), 1.25);
    EXPECT_THROW(parse_load1("busy"), Error);
    // the machine this runs on
    EXPECT_GE(read_load1(), 0.0);
    EXPECT_GT(read_cpu_times().total, 0u);
    EXPECT_GE(online_cores(), 1);
    EXPECT_GE(cpus_allowed_count(), 1);
    EXPECT_GE(usable_cores(), 1);
    EXPECT_LE(usable_cores(), online_cores());
    EXPECT_FALSE(cpus_allowed_list().empty());
}

TEST(Testbed, CpuListsAndTheBusyRule) {
    EXPECT_EQ(format_cpu_list({0, 3, 1, 2, 6}), "0-3,6");
    EXPECT_EQ(format_cpu_list({1}), "1");
    EXPECT_EQ(format_cpu_list({4, 4, 5, 9, 10}), "4-5,9-10");
    EXPECT_EQ(format_cpu_list({}), "");
    // 2 ranks on 2 cores: busy above 2 + 0.5 x 2 = 3
    EXPECT_FALSE(machine_busy(3.0, 2, 2));
    EXPECT_TRUE(machine_busy(3.01, 2, 2));
    EXPECT_FALSE(machine_busy(4.0, 8, 1));
    EXPECT_TRUE(machine_busy(5.5, 8, 1));
}
