// PacedCommunicator (comm_paced.h): the same exact checks as every communicator, through an emulated link, plus
// the link's one timing promise, a lower bound: a message of B bytes on a link of R bytes/s does not arrive
// before B / R, and messages queued on one rank's egress leave one after the other. Upper bounds depend on the
// machine's load and are not tested.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "comm/comm.h"
#include "comm/comm_paced.h"
#include "comm_checks.h"
#include "core/timer.h"

using namespace prophet;
using namespace prophet::comm_test;

namespace {

void run_paced(int num_ranks, LinkEmulation link, const std::function<void(Communicator&)>& body) {
    auto inner = make_local_group(num_ranks);
    std::vector<std::exception_ptr> errors(num_ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < num_ranks; ++r)
        threads.emplace_back([&, r] {
            try {
                inner[r]->set_timeout_s(60.0);
                auto paced = make_paced_communicator(inner[r].get(), link);
                body(*paced);
            } catch (...) {
                errors[r] = std::current_exception();
            }
        });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace

TEST(PacedComm, EveryExactCheckHolds) {
    for (int n : {1, 2, 4}) run_paced(n, LinkEmulation{2e9, 1e-6}, [](Communicator& c) { check_all(c); });
}

TEST(PacedComm, AMessageTakesAtLeastItsWireTime) {
    const double rate = 50e6;            // bytes/s
    const size_t bytes = 1 << 20;        // 1 MiB: 21 ms on the wire
    const double wire_s = bytes / rate;  // per message
    // the ranks are threads of this process: the receiver measures from the moment the sender posted (its own clock
    // after the barrier may start later, by however long the barrier took to release it)
    std::atomic<int64_t> posted_ns{0};
    run_paced(2, LinkEmulation{rate, 0.0}, [&](Communicator& c) {
        std::vector<char> a(bytes, 'a'), b(bytes, 'b'), got(2 * bytes, 0);
        c.barrier();
        if (c.rank() == 0) {
            // two messages on one egress: the second leaves after the first
            posted_ns.store(now_ns());
            CommHandle h1 = c.isend(a.data(), bytes, 1, 5);
            CommHandle h2 = c.isend(b.data(), bytes, 1, 6);
            h1->wait();
            h2->wait();
        } else {
            CommHandle r1 = c.irecv(got.data(), bytes, 0, 5);
            r1->wait();
            const int64_t t0 = posted_ns.load();  // set before the first message existed
            const double first_s = (now_ns() - t0) * 1e-9;
            CommHandle r2 = c.irecv(got.data() + bytes, bytes, 0, 6);
            r2->wait();
            const double both_s = (now_ns() - t0) * 1e-9;
            EXPECT_GE(first_s, 0.95 * wire_s);
            EXPECT_GE(both_s, 0.95 * 2 * wire_s);
            EXPECT_EQ(std::string(got.data(), bytes), std::string(bytes, 'a'));
            EXPECT_EQ(std::string(got.data() + bytes, bytes), std::string(bytes, 'b'));
        }
        c.barrier();
    });
}
