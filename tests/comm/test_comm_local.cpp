// LocalGroup (N ranks as threads): the exact checks of comm_checks.h with 1, 2 and 4 ranks, plus what only an
// in-process group can stage cheaply: a rank that never joins (timeout, exit 6, the rank in the message),
// mismatched collectives and wrong receive sizes.
//   ./build/tests/test_comm --gtest_filter='*LocalGroup*'
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>

#include "comm/comm.h"
#include "comm_checks.h"
#include "core/error.h"

using namespace prophet;
using namespace prophet::comm_test;

namespace {

// Runs body(comm, rank) on num_ranks threads of one LocalGroup; returns each rank's exception (null if none).
std::vector<std::exception_ptr> run_local(int num_ranks, const std::function<void(Communicator&)>& body,
                                          double timeout_s = 30.0) {
    auto comms = make_local_group(num_ranks);
    std::vector<std::exception_ptr> errors(num_ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < num_ranks; ++r) {
        comms[r]->set_timeout_s(timeout_s);  // a bug fails the test instead of hanging it
        threads.emplace_back([&, r] {
            try {
                body(*comms[r]);
            } catch (...) {
                errors[r] = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    return errors;
}

std::string what(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        return e.what();
    }
}

int exit_code(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const Error& e) {
        return e.exit_code();
    } catch (...) {
        return -1;
    }
}

void expect_no_errors(const std::vector<std::exception_ptr>& errors) {
    for (size_t r = 0; r < errors.size(); ++r) {
        if (errors[r]) ADD_FAILURE() << "rank " << r << " threw: " << what(errors[r]);
    }
}

class LocalGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(LocalGroupTest, Basics) {
    expect_no_errors(run_local(GetParam(), [](Communicator& c) {
        EXPECT_STREQ(c.name(), "local");
        EXPECT_EQ(c.size(), GetParam());
        c.barrier();
    }));
    auto comms = make_local_group(GetParam());
    for (int r = 0; r < GetParam(); ++r) EXPECT_EQ(comms[r]->rank(), r);
}

TEST_P(LocalGroupTest, AllReduceSumExact) {
    expect_no_errors(run_local(GetParam(), [](Communicator& c) {
        check_all_reduce_sum_exact<float>(c, 1031);
        check_all_reduce_sum_exact<double>(c, 1031);
        check_all_reduce_sum_exact<int64_t>(c, 1031);
        check_all_reduce_sum_exact<float>(c, 3);
        check_all_reduce_sum_exact<float>(c, 0);
    }));
}

TEST_P(LocalGroupTest, AllReduceSumAscendingRankOrderBitwise) {
    expect_no_errors(run_local(GetParam(), [](Communicator& c) {
        check_all_reduce_sum_order<float>(c, 4099, 5);
        check_all_reduce_sum_order<double>(c, 4099, 6);
    }));
}

TEST_P(LocalGroupTest, AllReduceMax) { expect_no_errors(run_local(GetParam(), check_all_reduce_max)); }
TEST_P(LocalGroupTest, AllGather) { expect_no_errors(run_local(GetParam(), check_all_gather)); }
TEST_P(LocalGroupTest, Broadcast) { expect_no_errors(run_local(GetParam(), check_broadcast)); }
TEST_P(LocalGroupTest, AllToAllVUneven) { expect_no_errors(run_local(GetParam(), check_all_to_all_v)); }
TEST_P(LocalGroupTest, AllToAllVAsync) { expect_no_errors(run_local(GetParam(), check_all_to_all_v_async)); }
TEST_P(LocalGroupTest, IsendIrecvTagsOutOfOrder) { expect_no_errors(run_local(GetParam(), check_isend_irecv)); }
TEST_P(LocalGroupTest, BroadcastSubset) { expect_no_errors(run_local(GetParam(), check_broadcast_subset)); }
TEST_P(LocalGroupTest, ReduceSubsetAscendingOrder) {
    expect_no_errors(run_local(GetParam(), [](Communicator& c) { check_reduce_subset(c, 9); }));
}
TEST_P(LocalGroupTest, SubsetTransAndAggOverlap) {
    expect_no_errors(run_local(GetParam(), [](Communicator& c) { check_subset_overlap(c, 10); }));
}
TEST_P(LocalGroupTest, AllChecksInOneSequence) { expect_no_errors(run_local(GetParam(), check_all)); }

INSTANTIATE_TEST_SUITE_P(Ranks, LocalGroupTest, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param); });

// ---- failures -----------------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

TEST(LocalGroupTimeout, BarrierWithAMissingRankThrowsExit6NamingTheRank) {
    const auto start = Clock::now();
    auto errors = run_local(
        2, [](Communicator& c) {
            if (c.rank() == 0) c.barrier();  // rank 1 never joins
        },
        0.2);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    ASSERT_TRUE(errors[0]);
    EXPECT_FALSE(errors[1]);
    EXPECT_EQ(exit_code(errors[0]), kExitDistributed);
    EXPECT_NE(what(errors[0]).find("rank 0: barrier timed out after 0.2 s"), std::string::npos) << what(errors[0]);
    EXPECT_NE(what(errors[0]).find("ranks not arrived: 1"), std::string::npos) << what(errors[0]);
    EXPECT_GE(elapsed, 0.2);
    EXPECT_LT(elapsed, 5.0);
}

TEST(LocalGroupTimeout, AllReduceWithOneRankMissingFailsEveryWaitingRank) {
    auto errors = run_local(
        4, [](Communicator& c) {
            if (c.rank() == 3) return;
            std::vector<float> x(8, 1.0f);
            c.all_reduce_sum(x.data(), x.size());
        },
        0.2);
    for (int r = 0; r < 3; ++r) {
        ASSERT_TRUE(errors[r]) << "rank " << r;
        EXPECT_EQ(exit_code(errors[r]), kExitDistributed);
        // the first rank past its deadline times out; the group is then aborted for the others
        EXPECT_EQ(what(errors[r]).rfind("rank " + std::to_string(r) + ": all_reduce_sum(float) ", 0), 0u)
            << what(errors[r]);
        EXPECT_NE(what(errors[r]).find("timed out after 0.2 s"), std::string::npos) << what(errors[r]);
        EXPECT_NE(what(errors[r]).find("ranks not arrived: 3"), std::string::npos) << what(errors[r]);
    }
    EXPECT_FALSE(errors[3]);
}

TEST(LocalGroupTimeout, IrecvNeverSentAndAsyncAllToAllV) {
    auto errors = run_local(
        2, [](Communicator& c) {
            if (c.rank() == 1) {
                double x = 0;
                c.irecv(&x, sizeof x, 0, 9)->wait();
            }
        },
        0.2);
    ASSERT_TRUE(errors[1]);
    EXPECT_EQ(exit_code(errors[1]), kExitDistributed);
    EXPECT_NE(what(errors[1]).find("rank 1: irecv timed out after 0.2 s (irecv from rank 0, tag 9, 8 bytes)"),
              std::string::npos)
        << what(errors[1]);

    errors = run_local(
        2, [](Communicator& c) {
            if (c.rank() == 1) return;
            A2aCase a2a(1, c.rank(), c.size());
            CommHandle h = a2a.start(c);
            EXPECT_FALSE(h->test());
            h->wait();
        },
        0.2);
    ASSERT_TRUE(errors[0]);
    EXPECT_EQ(exit_code(errors[0]), kExitDistributed);
    EXPECT_NE(what(errors[0]).find("rank 0: all_to_all_v timed out after 0.2 s"), std::string::npos)
        << what(errors[0]);
}

TEST(LocalGroupTimeout, NoTimeoutWaitsForALateRank) {
    expect_no_errors(run_local(
        2, [](Communicator& c) {
            if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
            c.barrier();
        },
        0.0));
}

TEST(LocalGroupErrors, MismatchedCollectivesFailInsteadOfHanging) {
    auto errors = run_local(
        2, [](Communicator& c) {
            if (c.rank() == 0) {
                c.barrier();
            } else {
                int32_t x = 1, y[2];
                c.all_gather(&x, sizeof x, y);
            }
        },
        5.0);
    ASSERT_TRUE(errors[0] && errors[1]);
    const std::string messages = what(errors[0]) + "\n" + what(errors[1]);
    EXPECT_NE(messages.find("collective mismatch"), std::string::npos) << messages;
    EXPECT_EQ(exit_code(errors[0]), kExitDistributed);
    EXPECT_EQ(exit_code(errors[1]), kExitDistributed);

    errors = run_local(
        2, [](Communicator& c) {
            std::vector<float> x(c.rank() == 0 ? 4 : 5, 1.0f);
            c.all_reduce_sum(x.data(), x.size());
        },
        5.0);
    ASSERT_TRUE(errors[0] && errors[1]);
    EXPECT_NE((what(errors[0]) + what(errors[1])).find("arguments differ across ranks"), std::string::npos);
}

TEST(LocalGroupErrors, IrecvOfTheWrongSizeThrows) {
    auto errors = run_local(2, [](Communicator& c) {
        double x[2] = {1, 2};
        if (c.rank() == 0) c.isend(x, sizeof x, 1, 3)->wait();
        if (c.rank() == 1) c.irecv(x, sizeof x[0], 0, 3)->wait();
    });
    EXPECT_FALSE(errors[0]);
    ASSERT_TRUE(errors[1]);
    EXPECT_NE(what(errors[1]).find("rank 1: irecv from rank 0 tag 3: expected 8 bytes, got 16 bytes"),
              std::string::npos)
        << what(errors[1]);
}

TEST(LocalGroupErrors, AllToAllVSizesThatDoNotMatchThrow) {
    auto errors = run_local(2, [](Communicator& c) {
        int32_t send[4] = {1, 2, 3, 4}, recv[4] = {};
        size_t send_bytes[2] = {8, 8}, offsets[2] = {0, 8};
        size_t recv_bytes[2] = {8, c.rank() == 0 ? 4u : 8u};  // rank 0 expects 4 bytes from rank 1, gets 8
        c.all_to_all_v(send, send_bytes, offsets, recv, recv_bytes, offsets);
    });
    EXPECT_FALSE(errors[1]);
    ASSERT_TRUE(errors[0]);
    EXPECT_NE(what(errors[0]).find("rank 0: all_to_all_v: rank 1 sends 8 bytes to this rank but recv_bytes[1] = 4"),
              std::string::npos)
        << what(errors[0]);
}

TEST(WorldCommunicator, WithoutALauncherIsOneLocalRank) {
    if (launched_by_mpi()) GTEST_SKIP() << "running under an MPI launcher";
    bool is_mpi = true;
    auto world = make_world_communicator(nullptr, nullptr, &is_mpi);
    EXPECT_FALSE(is_mpi);
    EXPECT_EQ(world->size(), 1);
    EXPECT_EQ(world->rank(), 0);
    EXPECT_STREQ(world->name(), "local");
    float x = 2.5f;
    world->all_reduce_sum(&x, 1);
    EXPECT_EQ(x, 2.5f);
}

}  // namespace
