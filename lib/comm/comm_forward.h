// comm_forward.h: a communicator that passes every call to an inner one: the base of the decorators
// (PacedComm: an emulated slow link; CountingCommunicator: per-peer byte counters), which override only the
// calls they change.
#pragma once

#include "comm/comm.h"

namespace prophet {

class ForwardingCommunicator : public Communicator {
  public:
    explicit ForwardingCommunicator(Communicator* inner) : inner_(inner) {}  // not owned; must outlive this

    int rank() const override { return inner_->rank(); }
    int size() const override { return inner_->size(); }
    const char* name() const override { return inner_->name(); }
    void barrier() override { inner_->barrier(); }
    void all_reduce_sum(float* data, size_t count) override { inner_->all_reduce_sum(data, count); }
    void all_reduce_sum(double* data, size_t count) override { inner_->all_reduce_sum(data, count); }
    void all_reduce_sum(int64_t* data, size_t count) override { inner_->all_reduce_sum(data, count); }
    void all_reduce_max(double* data, size_t count) override { inner_->all_reduce_max(data, count); }
    void all_gather(const void* send, size_t bytes, void* recv) override { inner_->all_gather(send, bytes, recv); }
    void broadcast(void* data, size_t bytes, int root) override { inner_->broadcast(data, bytes, root); }
    void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                      const size_t* recv_bytes, const size_t* recv_offsets) override {
        inner_->all_to_all_v(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets);
    }
    CommHandle all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                                  const size_t* recv_bytes, const size_t* recv_offsets) override {
        return inner_->all_to_all_v_async(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets);
    }
    CommHandle isend(const void* data, size_t bytes, int dst, int tag) override {
        return inner_->isend(data, bytes, dst, tag);
    }
    CommHandle irecv(void* data, size_t bytes, int src, int tag) override {
        return inner_->irecv(data, bytes, src, tag);
    }
    CommHandle broadcast_subset_async(void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                      int tag) override {
        return inner_->broadcast_subset_async(data, bytes, root, ranks, tag);
    }
    CommHandle reduce_sum_subset_async(float* data, size_t count, int root, const std::vector<int>& ranks,
                                       int tag) override {
        return inner_->reduce_sum_subset_async(data, count, root, ranks, tag);
    }
    void set_timeout_s(double seconds) override { inner_->set_timeout_s(seconds); }

  protected:
    Communicator* inner_;
};

}  // namespace prophet
