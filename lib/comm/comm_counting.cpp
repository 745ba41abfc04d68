// comm_counting.cpp: per-peer sent-byte counters in front of a communicator (comm_counting.h).
#include "comm/comm_counting.h"

#include <atomic>

namespace prophet {

CountingCommunicator::CountingCommunicator(Communicator* inner)
    : ForwardingCommunicator(inner), sent_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(inner->size()))) {
    for (int r = 0; r < inner->size(); ++r) sent_[r] = 0;
}

std::vector<uint64_t> CountingCommunicator::sent_bytes() const {
    std::vector<uint64_t> out(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) out[r] = sent_[r].load(std::memory_order_relaxed);
    return out;
}

void CountingCommunicator::add(int dst, uint64_t bytes) {
    if (dst != rank() && dst >= 0 && dst < size()) sent_[dst].fetch_add(bytes, std::memory_order_relaxed);
}

void CountingCommunicator::count(const size_t* send_bytes) {
    for (int r = 0; r < size(); ++r) add(r, send_bytes[r]);
}

void CountingCommunicator::all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets,
                                        void* recv, const size_t* recv_bytes, const size_t* recv_offsets) {
    count(send_bytes);
    inner_->all_to_all_v(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets);
}

CommHandle CountingCommunicator::all_to_all_v_async(const void* send, const size_t* send_bytes,
                                                    const size_t* send_offsets, void* recv, const size_t* recv_bytes,
                                                    const size_t* recv_offsets) {
    count(send_bytes);
    return inner_->all_to_all_v_async(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets);
}

CommHandle CountingCommunicator::isend(const void* data, size_t bytes, int dst, int tag) {
    add(dst, bytes);
    return inner_->isend(data, bytes, dst, tag);
}

CommHandle CountingCommunicator::broadcast_subset_async(void* data, size_t bytes, int root,
                                                        const std::vector<int>& ranks, int tag) {
    if (rank() == root)
        for (int r : ranks) add(r, bytes);
    return inner_->broadcast_subset_async(data, bytes, root, ranks, tag);
}

CommHandle CountingCommunicator::reduce_sum_subset_async(float* data, size_t count, int root,
                                                         const std::vector<int>& ranks, int tag) {
    add(root, count * sizeof(float));  // this member's contribution (nothing when this rank is the root)
    return inner_->reduce_sum_subset_async(data, count, root, ranks, tag);
}

}  // namespace prophet
