// test_comm_nccl.cpp: the NCCL communicator (lib/comm/comm_nccl.cpp), ranks as threads of this process
// bootstrapped over LocalGroup. What runs depends on the machine, and each case says which it needs:
//   no GPU / one GPU: the refusal every rank must give before NCCL starts (no device; two ranks on one GPU)
//   two or more GPUs: the exact data-movement checks every communicator passes (tests/comm/comm_checks.h)
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_checks.h"
#include "comm/comm_nccl.h"
#include "core/error.h"
#include "cuda/context.h"

namespace prophet {
namespace {

// Runs body(rank, bootstrap) on `ranks` threads; returns each thread's exception (nullptr if none).
std::vector<std::exception_ptr> run_ranks(int ranks,
                                          const std::function<void(int, std::unique_ptr<Communicator>)>& body) {
    auto comms = make_local_group(ranks);
    std::vector<std::exception_ptr> errors(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
        comms[r]->set_timeout_s(60);  // a bug fails the test instead of hanging it
        threads.emplace_back([&, r] {
            try {
                body(r, std::move(comms[r]));
            } catch (...) {
                errors[r] = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    return errors;
}

// Fewer GPUs than ranks on this host: every rank refuses alike, with exit 3 and the reason.
TEST(NcclComm, EveryRankRefusesWithoutOneGpuPerRank) {
    const int devices = cuda::device_count();
    if (devices >= 2) GTEST_SKIP() << devices << " GPUs: two ranks get one each (the next test)";
    const auto errors = run_ranks(2, [](int, std::unique_ptr<Communicator> bootstrap) {
        make_nccl_communicator(std::move(bootstrap));
    });
    const std::string expected = devices == 0 ? "sees no CUDA device" : "two ranks on one GPU are refused";
    for (int r = 0; r < 2; ++r) {
        ASSERT_TRUE(errors[r] != nullptr) << "rank " << r << " did not refuse";
        try {
            std::rethrow_exception(errors[r]);
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), kExitConfig) << e.what();
            EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
        }
    }
}

TEST(NcclComm, PassesTheCommunicatorChecksOnTwoGpus) {
    const int devices = cuda::device_count();
    if (devices < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << devices;
    const auto errors = run_ranks(2, [](int, std::unique_ptr<Communicator> bootstrap) {
        auto nccl = make_nccl_communicator(std::move(bootstrap));
        nccl->set_timeout_s(60);
        comm_test::check_all(*nccl);
    });
    for (int r = 0; r < 2; ++r) {
        if (errors[r] == nullptr) continue;
        try {
            std::rethrow_exception(errors[r]);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "rank " << r << ": " << e.what();
        }
    }
}

}  // namespace
}  // namespace prophet
