// CountingCommunicator: the bytes each rank sent to each peer through all_to_all_v, isend and the subset
// Trans/Agg, on 3 in-process ranks; the data still arrives unchanged.
#include "comm/comm_counting.h"

#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <thread>
#include <vector>

namespace prophet {
namespace {

TEST(CountingComm, CountsBytesPerPeerAndPassesDataThrough) {
    constexpr int D = 3;
    auto comms = make_local_group(D);
    std::vector<std::vector<uint64_t>> sent(D);
    std::vector<std::exception_ptr> errors(D);
    std::vector<std::thread> threads;
    for (int r = 0; r < D; ++r)
        threads.emplace_back([&, r] {
            try {
                comms[r]->set_timeout_s(30);
                CountingCommunicator c(comms[r].get());
                // all_to_all_v: rank r sends (r + 1) * 10 + d bytes to rank d
                std::vector<size_t> send_bytes(D), send_off(D), recv_bytes(D), recv_off(D);
                size_t send_total = 0, recv_total = 0;
                for (int d = 0; d < D; ++d) {
                    send_bytes[d] = (r + 1) * 10 + d;
                    send_off[d] = send_total;
                    send_total += send_bytes[d];
                    recv_bytes[d] = (d + 1) * 10 + r;
                    recv_off[d] = recv_total;
                    recv_total += recv_bytes[d];
                }
                std::vector<char> send(send_total, static_cast<char>('a' + r)), recv(recv_total, 0);
                c.all_to_all_v(send.data(), send_bytes.data(), send_off.data(), recv.data(), recv_bytes.data(),
                               recv_off.data());
                for (int d = 0; d < D; ++d) EXPECT_EQ(recv[recv_off[d]], 'a' + d);
                // Trans from rank 0 to {0, 1, 2} (100 bytes each), Agg of 8 floats into rank 0
                std::vector<char> params(100, r == 0 ? 'p' : 0);
                c.broadcast_subset_async(params.data(), params.size(), 0, {0, 1, 2}, 7)->wait();
                EXPECT_EQ(params[99], 'p');
                std::vector<float> grad(8, 1.0f);
                c.reduce_sum_subset_async(grad.data(), grad.size(), 0, {0, 1, 2}, 8)->wait();
                if (r == 0) {
                    EXPECT_EQ(grad[0], 3.0f);
                }
                // isend 5 bytes from 2 to 1
                char byte[5] = {0};
                if (r == 2) c.isend("hello", 5, 1, 9)->wait();
                if (r == 1) c.irecv(byte, 5, 2, 9)->wait();
                if (r == 1) {
                    EXPECT_EQ(std::memcmp(byte, "hello", 5), 0);
                }
                c.barrier();
                sent[r] = c.sent_bytes();
            } catch (...) {
                errors[r] = std::current_exception();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    // a2a (r+1)*10+d, Trans 100 from 0 to 1 and 2, Agg 32 from 1 and 2 to 0, isend 5 from 2 to 1; self: 0
    EXPECT_EQ(sent[0], (std::vector<uint64_t>{0, 11 + 100, 12 + 100}));
    EXPECT_EQ(sent[1], (std::vector<uint64_t>{20 + 32, 0, 22}));
    EXPECT_EQ(sent[2], (std::vector<uint64_t>{30 + 32, 31 + 5, 0}));
}

}  // namespace
}  // namespace prophet
