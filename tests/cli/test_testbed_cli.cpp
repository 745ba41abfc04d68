// The testbed record of a measured run (docs/testbed.md), as a user launches it under mpirun: the params say how
// many ranks on how many cores, whether they were pinned (each rank's CPU list), the BLAS threads, the load at the
// start and the steal time over the run; a start on a busy machine warns once on stderr and leaves an event.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <sstream>
#include <string>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "core/testbed.h"

namespace {

using prophet::testing::have_mpirun;

// key -> value of every testbed.* param of the only train run, and the number of busy_machine events.
std::map<std::string, std::string> testbed_params(const std::string& db, int* busy_events) {
    std::map<std::string, std::string> out;
    sqlite3* h = nullptr;
    if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return out;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, "SELECT key, value FROM params WHERE key LIKE 'testbed.%'", -1, &st, nullptr) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW)
            out[(const char*)sqlite3_column_text(st, 0)] = (const char*)sqlite3_column_text(st, 1);
    sqlite3_finalize(st);
    *busy_events = -1;
    if (sqlite3_prepare_v2(h, "SELECT count(*) FROM events WHERE kind = 'busy_machine' AND level = 'warn'", -1, &st,
                           nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        *busy_events = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

int count_lines_with(const std::string& text, const std::string& needle) {
    std::istringstream lines(text);
    int n = 0;
    for (std::string line; std::getline(lines, line);) n += line.find(needle) != std::string::npos;
    return n;
}

std::string join(const std::vector<std::string>& words) {
    std::string out;
    for (const std::string& w : words) out += w + " ";
    return out;
}

class TestbedCli : public prophet::testing::TempDirTest {
  protected:
    // Runs 2 steps of skewed-4rank on `ranks` ranks under the testbed launcher; returns its testbed params.
    std::map<std::string, std::string> run(int ranks, std::string* err, int* busy_events) {
        const auto r = prophet::testing::run_prophet(
            "timeout -s KILL 300 " + join(prophet::mpirun_launcher(ranks, prophet::usable_cores())),
            "train --config experiments/train/skewed-4rank.toml --set train.steps=2 --json --set store.path=" + db_,
            dir_);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        *err = r.err;
        return testbed_params(db_, busy_events);
    }
};

// The busy rule, the warning line and the event agree with the load the run recorded (whichever side of the
// threshold this machine is on now; tests/core/test_testbed.cpp covers both sides of machine_busy).
void expect_busy_consistent(const std::map<std::string, std::string>& p, const std::string& err, int busy_events) {
    const double load1 = std::stod(p.at("testbed.load1"));
    const bool busy = prophet::machine_busy(load1, std::stoi(p.at("testbed.cores")), std::stoi(p.at("testbed.ranks_here")));
    EXPECT_EQ(p.at("testbed.busy_machine"), busy ? "true" : "false") << "load " << load1;
    EXPECT_EQ(count_lines_with(err, "warning: busy machine"), busy ? 1 : 0) << err;
    EXPECT_EQ(busy_events, busy ? 1 : 0);
}

}  // namespace

TEST_F(TestbedCli, TwoRanksPinnedOnePerCoreAreRecorded) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    const int cores = prophet::usable_cores();
    std::string err;
    int busy_events = 0;
    const auto p = run(2, &err, &busy_events);
    ASSERT_TRUE(p.count("testbed.binding")) << err;
    EXPECT_EQ(p.at("testbed.ranks"), "2");
    EXPECT_EQ(p.at("testbed.cores"), std::to_string(prophet::online_cores()));
    EXPECT_EQ(p.at("testbed.blas_threads"), "1");
    const double steal = std::stod(p.at("testbed.steal_frac"));
    EXPECT_GE(steal, 0.0);
    EXPECT_LE(steal, 1.0);
    const std::string binding = p.at("testbed.binding");  // "\"a;b\"": each rank's CPU list
    ASSERT_GE(binding.size(), 2u);
    const std::string lists = binding.substr(1, binding.size() - 2);
    const size_t semi = lists.find(';');
    ASSERT_NE(semi, std::string::npos) << binding;
    if (cores >= 2) {
        EXPECT_EQ(p.at("testbed.oversubscribed"), "false");
        EXPECT_EQ(p.at("testbed.pinned"), "true") << binding;
        // one core each, different cores
        const std::string a = lists.substr(0, semi), b = lists.substr(semi + 1);
        EXPECT_EQ(a.find_first_of(",-"), std::string::npos) << binding;
        EXPECT_EQ(b.find_first_of(",-"), std::string::npos) << binding;
        EXPECT_NE(a, b);
    } else {
        EXPECT_EQ(p.at("testbed.oversubscribed"), "true");
    }
    expect_busy_consistent(p, err, busy_events);
}

TEST_F(TestbedCli, MoreRanksThanCoresAreRecordedAsOversubscribedUnpinned) {
    if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    const int ranks = 4;  // skewed-4rank's batch and experts divide by 4
    if (prophet::usable_cores() >= ranks) GTEST_SKIP() << "this machine has 4 or more cores: 4 ranks fit";
    std::string err;
    int busy_events = 0;
    const auto p = run(ranks, &err, &busy_events);
    ASSERT_TRUE(p.count("testbed.oversubscribed")) << err;
    EXPECT_EQ(p.at("testbed.oversubscribed"), "true");
    EXPECT_EQ(p.at("testbed.pinned"), "false");
    EXPECT_EQ(p.at("testbed.ranks"), std::to_string(ranks));
    expect_busy_consistent(p, err, busy_events);
}
