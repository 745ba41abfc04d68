// comm_counting.h: bytes this rank sends to each peer, counted in front of any communicator.
//
// Why: across hosts, what matters is how many bytes cross the slow link between them; the trainer reports the
// per-peer matrix (and per host pair, cmd/prophet) so a host-aware placement can be compared with a host-blind
// one (docs/cluster.md). Counted: the expert-parallel traffic, i.e. all_to_all_v (send_bytes[r] for every r but
// this rank: token dispatch and combine), isend, and the subset Trans/Agg as the point-to-point bytes they mean
// (Trans: the root sends `bytes` to every other member; Agg: every other member sends count floats to the root),
// whatever the inner communicator's implementation of them.
// Not counted: all_reduce / all_gather / broadcast / barrier (dense gradients and control): their MPI algorithm
// decides which pairs carry the bytes, and they are the same for every placement.
// Thread safety: as the inner communicator; the counters are atomic (a communication thread may isend while the
// main thread runs all_to_all_v).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm_forward.h"

namespace prophet {

class CountingCommunicator final : public ForwardingCommunicator {
  public:
    explicit CountingCommunicator(Communicator* inner);  // not owned; must outlive this

    // [size()] bytes this rank has sent to each rank so far (its own entry: 0)
    std::vector<uint64_t> sent_bytes() const;

    void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                      const size_t* recv_bytes, const size_t* recv_offsets) override;
    CommHandle all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                                  const size_t* recv_bytes, const size_t* recv_offsets) override;
    CommHandle isend(const void* data, size_t bytes, int dst, int tag) override;
    CommHandle broadcast_subset_async(void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                      int tag) override;
    CommHandle reduce_sum_subset_async(float* data, size_t count, int root, const std::vector<int>& ranks,
                                       int tag) override;

  private:
    void count(const size_t* send_bytes);
    void add(int dst, uint64_t bytes);
    std::unique_ptr<std::atomic<uint64_t>[]> sent_;  // [size()]
};

}  // namespace prophet
