// comm_checks.h: the exact data-movement checks every communicator must pass, written once against the
// Communicator interface. test_comm_local.cpp runs them on LocalGroup threads (1, 2, 4 ranks) and
// test_comm_mpi.cpp on MPI ranks (ctest: mpirun -np 4 test_comm --gtest_filter=Mpi*).
//
// Inputs are built per rank from (rank, index) so every rank can compute every other rank's input and the exact
// expected result: integers as src*1000 + index (exact in float), random floats of mixed magnitude where the
// summation order must show (expected = x_0 + x_1 + ... in ascending rank order, compared bitwise).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "comm/comm.h"
#include "core/rng.h"

namespace prophet::comm_test {

// rank r's random input [count]: magnitudes 2^-10 .. 2^10, so float sums depend on the order of addition
template <typename T>
std::vector<T> random_input(uint64_t seed, int rank, size_t count) {
    Rng rng(seed * 7919 + static_cast<uint64_t>(rank) + 1);
    std::vector<T> x(count);
    for (auto& v : x) v = static_cast<T>((rng.uniform() - 0.5) * std::ldexp(1.0, static_cast<int>(rng.below(21)) - 10));
    return x;
}

// x_{ranks[0]} + x_{ranks[1]} + ... element-wise, in the order given
template <typename T>
std::vector<T> ordered_sum(uint64_t seed, const std::vector<int>& ranks, size_t count) {
    std::vector<T> acc = random_input<T>(seed, ranks[0], count);
    for (size_t i = 1; i < ranks.size(); ++i) {
        const std::vector<T> x = random_input<T>(seed, ranks[i], count);
        for (size_t k = 0; k < count; ++k) acc[k] += x[k];
    }
    return acc;
}

inline std::vector<int> all_ranks(int n) {
    std::vector<int> ranks(n);
    for (int r = 0; r < n; ++r) ranks[r] = r;
    return ranks;
}

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// ---- all_reduce ---------------------------------------------------------------------------------------------

template <typename T>
void check_all_reduce_sum_exact(Communicator& c, size_t count) {
    const int n = c.size();
    std::vector<T> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<T>(c.rank() * 1000 + static_cast<int64_t>(i));
    c.all_reduce_sum(x.data(), count);
    for (size_t i = 0; i < count; ++i) {
        const T expected = static_cast<T>(1000 * n * (n - 1) / 2 + n * static_cast<int64_t>(i));
        ASSERT_EQ(x[i], expected) << "rank " << c.rank() << " index " << i;
    }
}

// bitwise: every rank must hold exactly x_0 + x_1 + ... + x_{R-1} (ascending rank order)
template <typename T>
void check_all_reduce_sum_order(Communicator& c, size_t count, uint64_t seed) {
    std::vector<T> x = random_input<T>(seed, c.rank(), count);
    c.all_reduce_sum(x.data(), count);
    const std::vector<T> expected = ordered_sum<T>(seed, all_ranks(c.size()), count);
    EXPECT_TRUE(same_bytes(x, expected)) << "rank " << c.rank() << ": sum differs from the ascending-rank-order sum";
    if (c.size() >= 3) {
        // the inputs are sensitive to the order, so this check can fail
        std::vector<int> reversed = all_ranks(c.size());
        std::reverse(reversed.begin(), reversed.end());
        EXPECT_FALSE(same_bytes(ordered_sum<T>(seed, reversed, count), expected)) << "inputs not order-sensitive";
    }
}

inline void check_all_reduce_max(Communicator& c) {
    const int n = c.size();
    const size_t count = 37;
    std::vector<double> x(count);
    auto value = [](int r, size_t i) { return ((static_cast<int>(i) + 3 * r) % 5) * 1.5 - static_cast<double>(i); };
    for (size_t i = 0; i < count; ++i) x[i] = value(c.rank(), i);
    c.all_reduce_max(x.data(), count);
    for (size_t i = 0; i < count; ++i) {
        double expected = value(0, i);
        for (int r = 1; r < n; ++r) expected = std::max(expected, value(r, i));
        ASSERT_EQ(x[i], expected) << "rank " << c.rank() << " index " << i;
    }
}

// ---- all_gather, broadcast ----------------------------------------------------------------------------------

inline void check_all_gather(Communicator& c) {
    const int n = c.size();
    const size_t count = 13;  // int32 per rank
    std::vector<int32_t> send(count);
    for (size_t k = 0; k < count; ++k) send[k] = c.rank() * 1000 + static_cast<int32_t>(k);
    std::vector<int32_t> recv(n * count, -7);
    c.all_gather(send.data(), count * sizeof(int32_t), recv.data());
    for (int r = 0; r < n; ++r) {
        for (size_t k = 0; k < count; ++k) {
            ASSERT_EQ(recv[r * count + k], r * 1000 + static_cast<int32_t>(k)) << "rank " << c.rank();
        }
    }
    // in place: this rank's slot of recv as the send buffer
    std::vector<int32_t> inplace(n * count, -7);
    for (size_t k = 0; k < count; ++k) inplace[c.rank() * count + k] = c.rank() * 1000 + static_cast<int32_t>(k);
    c.all_gather(inplace.data() + c.rank() * count, count * sizeof(int32_t), inplace.data());
    EXPECT_EQ(inplace, recv) << "rank " << c.rank();
}

inline void check_broadcast(Communicator& c) {
    const size_t count = 29;
    for (int root = 0; root < c.size(); ++root) {
        std::vector<int32_t> x(count, -7);
        if (c.rank() == root) {
            for (size_t k = 0; k < count; ++k) x[k] = root * 1000 + static_cast<int32_t>(k);
        }
        c.broadcast(x.data(), count * sizeof(int32_t), root);
        for (size_t k = 0; k < count; ++k) {
            ASSERT_EQ(x[k], root * 1000 + static_cast<int32_t>(k)) << "rank " << c.rank() << " root " << root;
        }
    }
}

// ---- all_to_all_v -------------------------------------------------------------------------------------------

// One all_to_all_v with uneven sizes: rank s sends a2a_count(s, d) int32 to rank d, value s*1e6 + d*1e3 + k.
// Pieces sit at gapped offsets in both buffers (receive side in reverse source order); gaps hold -7 and must
// stay untouched.
struct A2aCase {
    static constexpr int32_t kGap = -7;
    std::vector<int32_t> send, recv, expected;
    std::vector<size_t> send_bytes, send_offsets, recv_bytes, recv_offsets;  // [R], bytes

    static size_t a2a_count(uint64_t seed, int s, int d) {
        if ((s + 2 * d + static_cast<int>(seed)) % 3 == 0) return 0;  // zero-size pieces on purpose
        Rng rng(seed * 1000003 + static_cast<uint64_t>(s) * 1009 + static_cast<uint64_t>(d));
        return 1 + rng.below(40);
    }

    A2aCase(uint64_t seed, int rank, int n) {
        send_bytes.resize(n);
        send_offsets.resize(n);
        recv_bytes.resize(n);
        recv_offsets.resize(n);
        size_t at = 1;
        for (int d = 0; d < n; ++d, ++at) {
            const size_t len = a2a_count(seed, rank, d);
            send_offsets[d] = at * sizeof(int32_t);
            send_bytes[d] = len * sizeof(int32_t);
            at += len;
        }
        send.assign(at, kGap);
        for (int d = 0; d < n; ++d) {
            for (size_t k = 0; k < send_bytes[d] / sizeof(int32_t); ++k) {
                send[send_offsets[d] / sizeof(int32_t) + k] = rank * 1000000 + d * 1000 + static_cast<int32_t>(k);
            }
        }
        at = 2;
        for (int s = n - 1; s >= 0; --s, at += 2) {
            const size_t len = a2a_count(seed, s, rank);
            recv_offsets[s] = at * sizeof(int32_t);
            recv_bytes[s] = len * sizeof(int32_t);
            at += len;
        }
        recv.assign(at, kGap);
        expected = recv;
        for (int s = 0; s < n; ++s) {
            for (size_t k = 0; k < recv_bytes[s] / sizeof(int32_t); ++k) {
                expected[recv_offsets[s] / sizeof(int32_t) + k] = s * 1000000 + rank * 1000 + static_cast<int32_t>(k);
            }
        }
    }

    void run(Communicator& c) {
        c.all_to_all_v(send.data(), send_bytes.data(), send_offsets.data(), recv.data(), recv_bytes.data(),
                       recv_offsets.data());
    }
    CommHandle start(Communicator& c) {
        return c.all_to_all_v_async(send.data(), send_bytes.data(), send_offsets.data(), recv.data(),
                                    recv_bytes.data(), recv_offsets.data());
    }
};

inline void check_all_to_all_v(Communicator& c) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        A2aCase a2a(seed, c.rank(), c.size());
        a2a.run(c);
        EXPECT_EQ(a2a.recv, a2a.expected) << "rank " << c.rank() << " seed " << seed;
    }
}

// two all_to_all_v in flight at once, completed in reverse order; one through test() polling
inline void check_all_to_all_v_async(Communicator& c) {
    A2aCase first(11, c.rank(), c.size()), second(12, c.rank(), c.size());
    CommHandle h1 = first.start(c);
    CommHandle h2 = second.start(c);
    h2->wait();
    while (!h1->test()) {
    }
    EXPECT_TRUE(h1->test());
    EXPECT_EQ(first.recv, first.expected) << "rank " << c.rank();
    EXPECT_EQ(second.recv, second.expected) << "rank " << c.rank();
    // a handle dropped unwaited completes in its destructor
    A2aCase third(13, c.rank(), c.size());
    { CommHandle h3 = third.start(c); }
    EXPECT_EQ(third.recv, third.expected) << "rank " << c.rank();
}

// ---- point to point -----------------------------------------------------------------------------------------

// Every rank sends to every rank (itself included) tags 0..3 in order plus a second tag-2 message; receives are
// posted in reverse tag order. Tags must separate the streams, and two messages with the same (src, tag) must
// arrive in send order.
inline void check_isend_irecv(Communicator& c) {
    const int n = c.size();
    const size_t count = 5;
    auto value = [](int src, int dst, int tag, int seq, size_t k) {
        return src * 100000 + dst * 10000 + tag * 1000 + seq * 100 + static_cast<int32_t>(k);
    };
    std::vector<std::vector<int32_t>> recv_buffers;
    std::vector<std::array<int, 3>> recv_meta;  // (src, tag, seq)
    std::vector<CommHandle> recvs;
    recv_buffers.reserve(n * 5);
    for (int src = 0; src < n; ++src) {
        for (int tag = 3; tag >= 0; --tag) {
            for (int seq = 0; seq < (tag == 2 ? 2 : 1); ++seq) {
                recv_buffers.emplace_back(count, -7);
                recv_meta.push_back({src, tag, seq});
                recvs.push_back(c.irecv(recv_buffers.back().data(), count * sizeof(int32_t), src, tag));
            }
        }
    }
    std::vector<std::vector<int32_t>> send_buffers;
    std::vector<CommHandle> sends;
    send_buffers.reserve(n * 5);
    for (int dst = 0; dst < n; ++dst) {
        for (int tag = 0; tag < 4; ++tag) {
            for (int seq = 0; seq < (tag == 2 ? 2 : 1); ++seq) {
                send_buffers.emplace_back(count);
                for (size_t k = 0; k < count; ++k) send_buffers.back()[k] = value(c.rank(), dst, tag, seq, k);
                sends.push_back(c.isend(send_buffers.back().data(), count * sizeof(int32_t), dst, tag));
            }
        }
    }
    for (size_t i = recvs.size(); i-- > 0;) recvs[i]->wait();  // in reverse, so later posts finish first
    for (auto& s : sends) s->wait();
    for (size_t i = 0; i < recvs.size(); ++i) {
        const auto [src, tag, seq] = recv_meta[i];
        for (size_t k = 0; k < count; ++k) {
            ASSERT_EQ(recv_buffers[i][k], value(src, c.rank(), tag, seq, k))
                << "rank " << c.rank() << " from " << src << " tag " << tag << " seq " << seq;
        }
    }
    c.barrier();
}

// ---- subset Trans / Agg -------------------------------------------------------------------------------------

// A subset that leaves a rank out (rank 1 when R >= 3) and a root that is not its lowest rank.
inline std::vector<int> test_subset(int n) {
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r) {
        if (!(n >= 3 && r == 1)) ranks.push_back(r);
    }
    return ranks;
}
inline int test_subset_root(const std::vector<int>& ranks) { return ranks[ranks.size() > 1 ? 1 : 0]; }

inline void check_broadcast_subset(Communicator& c) {
    const std::vector<int> ranks = test_subset(c.size());
    const int root = test_subset_root(ranks);
    const size_t count = 21;
    std::vector<int32_t> x(count, -7);
    const bool member = std::find(ranks.begin(), ranks.end(), c.rank()) != ranks.end();
    if (c.rank() == root) {
        for (size_t k = 0; k < count; ++k) x[k] = root * 1000 + static_cast<int32_t>(k);
    }
    if (member) c.broadcast_subset_async(x.data(), count * sizeof(int32_t), root, ranks, 41)->wait();
    for (size_t k = 0; k < count; ++k) {
        const int32_t expected = member ? root * 1000 + static_cast<int32_t>(k) : -7;
        ASSERT_EQ(x[k], expected) << "rank " << c.rank() << " root " << root;
    }
    c.barrier();
}

// One subset reduce of `count` floats (check_reduce_subset)
inline void check_reduce_subset_of(Communicator& c, uint64_t seed, size_t count) {
    const std::vector<int> ranks = test_subset(c.size());
    const int root = test_subset_root(ranks);
    std::vector<float> x = random_input<float>(seed, c.rank(), count);
    const bool member = std::find(ranks.begin(), ranks.end(), c.rank()) != ranks.end();
    if (member) c.reduce_sum_subset_async(x.data(), count, root, ranks, 42)->wait();
    if (c.rank() == root) {
        EXPECT_TRUE(same_bytes(x, ordered_sum<float>(seed, ranks, count))) << "root " << root;
    } else {
        EXPECT_TRUE(same_bytes(x, random_input<float>(seed, c.rank(), count))) << "rank " << c.rank();
    }
    c.barrier();
}

// The root holds x_{ranks[0]} + x_{ranks[1]} + ... (ascending), bitwise; other members keep their data. 301
// floats: within one block of the root's sum; 2500: two whole blocks of 1024 and a partial one.
inline void check_reduce_subset(Communicator& c, uint64_t seed) {
    for (const size_t count : {size_t{301}, size_t{2500}}) check_reduce_subset_of(c, seed, count);
}

// Trans and Agg in flight together on overlapping subsets with different tags (as one MoE step overlaps them),
// completed through test() polling.
inline void check_subset_overlap(Communicator& c, uint64_t seed) {
    const int n = c.size();
    const std::vector<int> agg_ranks = test_subset(n);
    const int agg_root = agg_ranks.back();
    const std::vector<int> trans_ranks = n >= 2 ? std::vector<int>{n - 2, n - 1} : std::vector<int>{0};
    const int trans_root = trans_ranks.back();
    const size_t count = 64;
    std::vector<float> grad = random_input<float>(seed, c.rank(), count);
    std::vector<float> param(count, -7.0f);
    if (c.rank() == trans_root) param = random_input<float>(seed + 100, trans_root, count);
    std::vector<CommHandle> handles;
    if (std::find(trans_ranks.begin(), trans_ranks.end(), c.rank()) != trans_ranks.end()) {
        handles.push_back(c.broadcast_subset_async(param.data(), count * sizeof(float), trans_root, trans_ranks, 7));
    }
    if (std::find(agg_ranks.begin(), agg_ranks.end(), c.rank()) != agg_ranks.end()) {
        handles.push_back(c.reduce_sum_subset_async(grad.data(), count, agg_root, agg_ranks, 8));
    }
    for (bool all = false; !all;) {
        all = true;
        for (auto& h : handles) all = h->test() && all;
    }
    if (std::find(trans_ranks.begin(), trans_ranks.end(), c.rank()) != trans_ranks.end()) {
        EXPECT_TRUE(same_bytes(param, random_input<float>(seed + 100, trans_root, count))) << "rank " << c.rank();
    }
    if (c.rank() == agg_root) {
        EXPECT_TRUE(same_bytes(grad, ordered_sum<float>(seed, agg_ranks, count))) << "root " << agg_root;
    }
    c.barrier();
}

// Everything above, in one fixed order (all ranks must call collectives in the same order).
inline void check_all(Communicator& c) {
    check_all_reduce_sum_exact<float>(c, 1031);
    check_all_reduce_sum_exact<double>(c, 1031);
    check_all_reduce_sum_exact<int64_t>(c, 1031);
    check_all_reduce_sum_exact<float>(c, 3);  // fewer elements than ranks: some reduce-scatter chunks are empty
    check_all_reduce_sum_exact<float>(c, 0);
    check_all_reduce_sum_order<float>(c, 4099, 5);
    check_all_reduce_sum_order<double>(c, 4099, 6);
    check_all_reduce_max(c);
    check_all_gather(c);
    check_broadcast(c);
    check_all_to_all_v(c);
    check_all_to_all_v_async(c);
    check_isend_irecv(c);
    check_broadcast_subset(c);
    check_reduce_subset(c, 9);
    check_subset_overlap(c, 10);
}

}  // namespace prophet::comm_test
