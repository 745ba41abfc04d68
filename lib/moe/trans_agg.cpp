// trans_agg.cpp: Trans (home -> group broadcast) and Agg (group -> home sum) per expert (see trans_agg.h).
#include "moe/trans_agg.h"

#include <algorithm>

#include "comm/comm.h"
#include "core/error.h"

namespace prophet {

std::vector<int> moe_expert_group(const Placement& placement, int expert, int home) {
    std::vector<int> group;
    for (int d = 0; d < placement.num_devices; d++)
        if (d == home || placement.holds(expert, d)) group.push_back(d);
    return group;
}

std::vector<uint8_t> moe_moving_experts(const Placement& placement) {
    const int D = placement.num_devices, E = placement.num_experts;
    std::vector<uint8_t> moving(E, 0);
    for (int e = 0; e < E; e++) moving[e] = moe_expert_group(placement, e, moe_home_rank(e, E, D)).size() > 1;
    return moving;
}

int moe_receivers(const Placement& placement, int expert) {
    const int D = placement.num_devices, E = placement.num_experts;
    return (int)moe_expert_group(placement, expert, moe_home_rank(expert, E, D)).size() - 1;
}

void moe_trans(Communicator* comm, const Placement& placement, float* const* params, size_t numel, int tag_base,
               const uint8_t* only, const Placement* resident) {
    const int D = placement.num_devices, E = placement.num_experts, rank = comm->rank();
    PROPHET_ASSERT(comm->size() == D);
    const bool incremental = resident != nullptr && resident->num_experts > 0;
    if (incremental) PROPHET_ASSERT(resident->num_devices == D && resident->num_experts == E);
    std::vector<CommHandle> inflight;
    for (int e = 0; e < E; e++) {
        if (only != nullptr && !only[e]) continue;
        const int home = moe_home_rank(e, E, D);
        std::vector<int> group = moe_expert_group(placement, e, home);
        if (incremental)
            std::erase_if(group, [&](int d) { return d != home && resident->holds(e, d); });
        if (group.size() < 2 || !std::binary_search(group.begin(), group.end(), rank)) continue;
        inflight.push_back(
            comm->broadcast_subset_async(params[e], sizeof(float) * numel, home, group, tag_base + e));
    }
    for (CommHandle& h : inflight) h->wait();
}

void moe_agg(Communicator* comm, const Placement& placement, float* const* grads, size_t numel, int tag_base,
             const uint8_t* only) {
    const int D = placement.num_devices, E = placement.num_experts, rank = comm->rank();
    PROPHET_ASSERT(comm->size() == D);
    std::vector<CommHandle> inflight;
    std::vector<int> zero_after;  // experts whose gradient this rank sent to another home
    for (int e = 0; e < E; e++) {
        if (only != nullptr && !only[e]) continue;
        const int home = moe_home_rank(e, E, D);
        const std::vector<int> group = moe_expert_group(placement, e, home);
        if (group.size() < 2 || !std::binary_search(group.begin(), group.end(), rank)) continue;
        inflight.push_back(comm->reduce_sum_subset_async(grads[e], numel, home, group, tag_base + e));
        if (rank != home) zero_after.push_back(e);
    }
    for (CommHandle& h : inflight) h->wait();
    for (int e : zero_after) std::fill_n(grads[e], numel, 0.0f);
}

}  // namespace prophet
