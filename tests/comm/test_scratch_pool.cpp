// ScratchPool: a released buffer is handed out again (no allocation per call), leases held together are
// distinct, and a subset reduce in steady state allocates nothing (its receive buffers come from the pool).
#include "comm/scratch_pool.h"

#include <gtest/gtest.h>

#include <exception>
#include <thread>
#include <vector>

#include "comm/comm.h"

namespace prophet {
namespace {

struct LeaseCase {
    const char* name;
    std::vector<size_t> first;   // bytes leased together, then released
    std::vector<size_t> second;  // bytes leased together afterwards
    size_t allocations;          // buffers the pool allocated over both rounds
};

class ScratchPoolReuse : public testing::TestWithParam<LeaseCase> {};

TEST_P(ScratchPoolReuse, AllocatesOnlyWhatNoFreeBufferFits) {
    const LeaseCase& c = GetParam();
    ScratchPool pool;
    for (const auto* round : {&c.first, &c.second}) {
        std::vector<ScratchPool::Lease> held;
        for (size_t bytes : *round) {
            held.push_back(pool.acquire(bytes));
            EXPECT_GE(held.back().capacity(), bytes);
        }
        for (size_t i = 0; i < held.size(); ++i)
            for (size_t j = i + 1; j < held.size(); ++j) EXPECT_NE(held[i].data(), held[j].data());
    }
    EXPECT_EQ(pool.allocations(), c.allocations);
}

INSTANTIATE_TEST_SUITE_P(Rounds, ScratchPoolReuse,
                         testing::Values(LeaseCase{"same_sizes_again", {1 << 20, 1 << 20}, {1 << 20, 1 << 20}, 2},
                                         LeaseCase{"smaller_fits_a_larger_free_one", {1 << 20}, {4096}, 1},
                                         LeaseCase{"more_at_once_than_free", {4096}, {4096, 4096, 4096}, 3},
                                         LeaseCase{"larger_replaces_a_smaller_free_one", {4096}, {1 << 20}, 2}),
                         [](const testing::TestParamInfo<LeaseCase>& info) { return info.param.name; });

TEST(ScratchPool, LargerRequestDropsTheSmallestFreeBuffer) {
    ScratchPool pool;
    { ScratchPool::Lease small = pool.acquire(4096); }
    EXPECT_EQ(pool.free_buffers(), 1u);
    { ScratchPool::Lease large = pool.acquire(1 << 20); }
    EXPECT_EQ(pool.free_buffers(), 1u);  // the 4 KiB one was dropped, the 1 MiB one is free
}

TEST(ScratchPool, MovedLeaseReturnsItsBufferOnce) {
    ScratchPool pool;
    std::byte* first = nullptr;
    {
        ScratchPool::Lease a = pool.acquire(100);
        first = a.data();
        ScratchPool::Lease b = std::move(a);
        EXPECT_EQ(a.data(), nullptr);
        EXPECT_EQ(b.data(), first);
    }
    EXPECT_EQ(pool.free_buffers(), 1u);
    EXPECT_EQ(pool.acquire(100).data(), first);
}

// Agg of one expert-sized gradient into rank 1 of 2, three times: the root leases its receive buffer from the pool
// every call, and the pool allocates on the first call at most (the sum itself is checked bitwise by the
// communicator tests, comm_checks.h)
TEST(ScratchPool, SubsetReduceAllocatesNothingInSteadyState) {
    constexpr int D = 2;
    constexpr size_t kCount = 300000;  // 1.2 MB of floats: an expert of C = 96, F = 1536
    auto comms = make_local_group(D);
    std::vector<size_t> allocations;
    const size_t leases_before = comm_scratch_pool().acquisitions();
    std::vector<std::exception_ptr> errors(D);
    for (int call = 0; call < 3; ++call) {
        std::vector<std::thread> threads;
        for (int r = 0; r < D; ++r)
            threads.emplace_back([&, r] {
                try {
                    comms[r]->set_timeout_s(60);
                    std::vector<float> grad(kCount, 1.0f + r);
                    comms[r]->reduce_sum_subset_async(grad.data(), kCount, 1, {0, 1}, 5)->wait();
                    if (r == 1) {
                        EXPECT_EQ(grad[kCount - 1], 3.0f);
                    }
                } catch (...) {
                    errors[r] = std::current_exception();
                }
            });
        for (auto& t : threads) t.join();
        for (const auto& e : errors)
            if (e) std::rethrow_exception(e);
        allocations.push_back(comm_scratch_pool().allocations());
    }
    EXPECT_EQ(comm_scratch_pool().acquisitions(), leases_before + 3);
    EXPECT_EQ(allocations[1], allocations[0]);
    EXPECT_EQ(allocations[2], allocations[0]);
}

}  // namespace
}  // namespace prophet
