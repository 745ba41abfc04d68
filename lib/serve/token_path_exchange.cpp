#include "serve/token_path_exchange.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"

namespace prophet::serve {

std::vector<int64_t> local_boundary_routes(const int* dispatch_idx, int N, int K, int home,
                                           const std::vector<int64_t>& counts,
                                           const std::vector<Placement>& placements, RouteRule rule) {
    const int L = static_cast<int>(placements.size());
    PROPHET_ASSERT(L >= 1);
    const int D = placements[0].num_devices, E = placements[0].num_experts;
    const size_t DD = static_cast<size_t>(D) * D, DE = static_cast<size_t>(D) * E;
    PROPHET_ASSERT(counts.size() == static_cast<size_t>(L) * DE && home >= 0 && home < D);
    std::vector<std::vector<int>> destination(L);  // [L][D*E] the device computing src's tokens for e
    for (int l = 0; l < L; ++l) destination[l] = routing_destination(counts.data() + l * DE, placements[l], rule);
    std::vector<int64_t> route(static_cast<size_t>(std::max(0, L - 1)) * DD, 0);
    for (int l = 0; l + 1 < L; ++l) {
        const int* dest_here = destination[l].data() + static_cast<size_t>(home) * E;
        const int* dest_next = destination[l + 1].data() + static_cast<size_t>(home) * E;
        int64_t* r = route.data() + l * DD;
        for_each_layer_pair(dispatch_idx, l, N, K,
                            [&](int e1, int e2) { ++r[static_cast<size_t>(dest_here[e1]) * D + dest_next[e2]]; });
    }
    return route;
}

TokenPathExchange exchange_layer_to_layer(Communicator& comm, const int* dispatch_idx, int N, int K,
                                          const std::vector<int64_t>& counts,
                                          const std::vector<Placement>& placements, RouteRule rule, int d_model) {
    const int L = static_cast<int>(placements.size()), D = comm.size(), me = comm.rank();
    const size_t DD = static_cast<size_t>(D) * D;
    TokenPathExchange x;
    x.route = local_boundary_routes(dispatch_idx, N, K, me, counts, placements, rule);
    comm.all_reduce_sum(x.route.data(), x.route.size());
    const size_t pair_bytes = static_cast<size_t>(d_model) * sizeof(float);
    std::vector<size_t> send_bytes(D), send_offsets(D), recv_bytes(D), recv_offsets(D);
    std::vector<char> send, recv;
    for (int l = 0; l + 1 < L; ++l) {
        const int64_t* r = x.route.data() + l * DD;
        size_t out = 0, in = 0;
        int64_t moved = 0;
        for (int d = 0; d < D; ++d) {
            // nothing to self: a pair whose two experts are on one rank stays there
            send_bytes[d] = d == me ? 0 : static_cast<size_t>(r[static_cast<size_t>(me) * D + d]) * pair_bytes;
            recv_bytes[d] = d == me ? 0 : static_cast<size_t>(r[static_cast<size_t>(d) * D + me]) * pair_bytes;
            send_offsets[d] = out;
            recv_offsets[d] = in;
            out += send_bytes[d];
            in += recv_bytes[d];
            for (int s = 0; s < D; ++s)
                if (s != d) moved += r[static_cast<size_t>(s) * D + d];
        }
        send.assign(std::max<size_t>(out, 1), 0);
        recv.resize(std::max<size_t>(in, 1));
        comm.barrier();  // every rank starts the boundary together: its time is the exchange's
        const int64_t t0 = now_ns();
        comm.all_to_all_v(send.data(), send_bytes.data(), send_offsets.data(), recv.data(), recv_bytes.data(),
                          recv_offsets.data());
        double ms = static_cast<double>(now_ns() - t0) * 1e-6;
        comm.all_reduce_max(&ms, 1);
        x.boundary_ms.push_back(ms);
        x.sent_bytes.push_back(moved * static_cast<int64_t>(pair_bytes));
    }
    return x;
}

}  // namespace prophet::serve
