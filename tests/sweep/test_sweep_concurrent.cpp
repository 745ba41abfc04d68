// test_sweep_concurrent.cpp: two `prophet sweep` processes started together on one store run every point exactly
// once between them: a point is claimed before it runs (docs/sweep.md "Concurrent sweeps"), the other sweep skips
// a point claimed by a live sweep and a point finished meanwhile.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "../temp_dir_test.h"
#include "store/store.h"
#include "sweep/claims.h"
#include "sweep/sweep.h"
#include "sweep_child.h"

using namespace prophet;
using prophet::testing::read_file;

namespace {

class SweepConcurrent : public prophet::testing::TempDirTest {};

// 3 policies x 8 seeds on the 16-device MoE-GPT-S trace (about 0.1 s a point): both sweeps start well before
// either could finish, so without claims each would run all 24.
const char* kSweep =
    "[sweep]\nname = \"twice\"\nengine = \"sim\"\n"
    "clusters = [\"experiments/clusters/hpwnv-16.toml\"]\n"
    "traces = [\"experiments/sweeps/paper-e16-k1-s.toml\"]\n"
    "policies = [\"static\", \"fastermoe\", \"prophet\"]\nseeds = [1, 2, 3, 4, 5, 6, 7, 8]\n";
constexpr int kPoints = 3 * 8;

}  // namespace

TEST_F(SweepConcurrent, TwoSweepsOnOneStoreRunEveryPointOnce) {
    std::filesystem::current_path(PROPHET_SOURCE_DIR);
    const std::string file = (dir_ / "twice.toml").string();
    std::ofstream(file) << kSweep;
    const std::string log_a = (dir_ / "a.log").string(), log_b = (dir_ / "b.log").string();
    const pid_t a = prophet::testing::spawn_sweep(file, db_, log_a);
    const pid_t b = prophet::testing::spawn_sweep(file, db_, log_b);
    ASSERT_GT(a, 0);
    ASSERT_GT(b, 0);
    const int status_a = prophet::testing::wait_bounded(a, std::chrono::seconds(300));
    const int status_b = prophet::testing::wait_bounded(b, std::chrono::seconds(300));
    ASSERT_TRUE(WIFEXITED(status_a) && WEXITSTATUS(status_a) == 0) << status_a << read_file(log_a + ".err");
    ASSERT_TRUE(WIFEXITED(status_b) && WEXITSTATUS(status_b) == 0) << status_b << read_file(log_b + ".err");

    Store store = Store::open(db_);
    std::map<std::string, int> per_hash;
    for (const RunRow& r : store.list_runs("twice")) {
        EXPECT_EQ(r.status, "finished") << r.run_id;
        ++per_hash[r.info.config_hash];
    }
    for (const sweep::SweepPoint& p : sweep::expand_points(sweep::parse_sweep_file(file)))
        EXPECT_EQ(per_hash[p.hash], 1) << p.description;
    EXPECT_EQ(static_cast<int>(per_hash.size()), kPoints);
    // each sweep reports the points the other one ran (or had claimed) as not run by itself
    const std::string out_a = read_file(log_a), out_b = read_file(log_b);
    EXPECT_NE(out_a.find("\"points\": 24"), std::string::npos) << out_a;
    EXPECT_NE(out_b.find("\"points\": 24"), std::string::npos) << out_b;
}

// Claims conflict between open descriptions (two sweeps), are per experiment and point, and end with their holder
// (the kernel drops them when the holder's file is closed or its process dies).
TEST_F(SweepConcurrent, ClaimsAreExclusiveWhileTheirHolderLives) {
    auto first = std::make_unique<sweep::PointClaims>(db_);
    sweep::PointClaims second(db_);
    EXPECT_TRUE(first->try_claim("exp", "hash-a"));
    EXPECT_FALSE(second.try_claim("exp", "hash-a"));
    EXPECT_TRUE(second.try_claim("exp", "hash-b"));
    EXPECT_TRUE(second.try_claim("other-exp", "hash-a"));  // another experiment's point
    first->release("exp", "hash-a");
    EXPECT_TRUE(second.try_claim("exp", "hash-a"));
    second.release("exp", "hash-a");
    EXPECT_TRUE(first->try_claim("exp", "hash-a"));
    first.reset();  // the holder goes away without releasing
    EXPECT_TRUE(second.try_claim("exp", "hash-a"));
    EXPECT_NE(sweep::claim_offset("exp", "hash-a"), sweep::claim_offset("exp", "hash-b"));
}
