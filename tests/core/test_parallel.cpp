// core/parallel.h: parallel_for runs every index once on the threads asked for, in order on one thread, and
// rethrows the lowest failing index's exception after the started ones end.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace prophet {
namespace {

struct LoopCase {
    const char* name;
    int n, workers;
};

class ParallelFor : public ::testing::TestWithParam<LoopCase> {};

TEST_P(ParallelFor, RunsEveryIndexOnceOnWorkersInRange) {
    const LoopCase& c = GetParam();
    std::vector<std::atomic<int>> runs(static_cast<size_t>(c.n));
    std::mutex guard;
    std::set<int> workers_seen;
    parallel_for(c.n, c.workers, [&](int i, int worker) {
        ++runs[i];
        const std::lock_guard<std::mutex> lock(guard);
        workers_seen.insert(worker);
    });
    for (int i = 0; i < c.n; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i;
    const int most = std::max(1, std::min(c.workers, c.n));
    for (int w : workers_seen) EXPECT_TRUE(w >= 0 && w < most) << "worker " << w;
}

INSTANTIATE_TEST_SUITE_P(Table, ParallelFor,
                         ::testing::Values(LoopCase{"none", 0, 4}, LoopCase{"one_worker", 50, 1},
                                           LoopCase{"zero_workers_is_one", 50, 0}, LoopCase{"two_workers", 200, 2},
                                           LoopCase{"more_workers_than_items", 3, 8}),
                         [](const ::testing::TestParamInfo<LoopCase>& info) { return std::string(info.param.name); });

TEST(ParallelForOrder, OneWorkerRunsInOrderOnTheCallersThread) {
    std::vector<int> order;
    const std::thread::id caller = std::this_thread::get_id();
    parallel_for(20, 1, [&](int i, int) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        order.push_back(i);
    });
    std::vector<int> expected(20);
    for (int i = 0; i < 20; ++i) expected[i] = i;
    EXPECT_EQ(order, expected);
}

// Indices 3 and 7 throw: the loop rethrows index 3's exception whatever the workers (on one, nothing after 3 starts).
TEST(ParallelForOrder, RethrowsTheLowestFailingIndex) {
    for (int workers : {1, 2, 4}) {
        std::atomic<int> after_first_failure{0};
        try {
            parallel_for(10, workers, [&](int i, int) {
                if (i == 3 || i == 7) throw std::runtime_error("index " + std::to_string(i));
                if (workers == 1 && i > 3) ++after_first_failure;
            });
            ADD_FAILURE() << "no exception with " << workers << " workers";
        } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "index 3");  // 3 starts before 7, so it has thrown too whenever 7 has
        }
        EXPECT_EQ(after_first_failure.load(), 0);
    }
}

// The ordered overload starts its indices in the given order (one worker: exactly that sequence).
TEST(ParallelForOrder, GivenOrderStartsThere) {
    const std::vector<int> order = {9, 7, 3, 0, 1, 2, 4, 5, 6, 8};
    std::vector<int> started;
    parallel_for(order, 1, [&](int i, int) { started.push_back(i); });
    EXPECT_EQ(started, order);
}

// ... and rethrows the lowest failing index's exception, not the first started's: 7 starts before 3 on two workers,
// both wait until the other has started (at most 10 s), then both throw.
TEST(ParallelForOrder, GivenOrderRethrowsTheLowestIndexNotTheFirstStarted) {
    const std::vector<int> order = {7, 3, 0, 1, 2, 4, 5, 6, 8, 9};
    std::atomic<int> waiting{0};
    try {
        parallel_for(order, 2, [&](int i, int) {
            if (i != 3 && i != 7) return;
            ++waiting;
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (waiting.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
            throw std::runtime_error("index " + std::to_string(i));
        });
        ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
        ASSERT_EQ(waiting.load(), 2) << "the two failing indices did not run side by side";
        EXPECT_STREQ(e.what(), "index 3");
    }
}

}  // namespace
}  // namespace prophet
