// comm_nccl.h: the NCCL communicator, one rank per GPU (docs/gpu.md). Built with the CUDA backend only
// (target prophet_comm_nccl); compiled in CI, not yet run on GPUs.
#pragma once

#include <memory>

#include "comm/comm.h"

namespace prophet {

// Wraps NCCL over the ranks of `bootstrap` (the MPI communicator of the same processes, kept and owned: it
// carries the ncclUniqueId broadcast, the device check and barrier()). Picks this rank's GPU: with one visible
// device (CUDA_VISIBLE_DEVICES may give each rank its own), device 0; else the rank's index among the ranks on
// its host. Refuses, on every rank alike (exit 3), a rank without a GPU, a host with more ranks than visible
// GPUs and two ranks on the same GPU (by UUID): NCCL does not support that and may hang; ranks that share a GPU
// use the MPI communicator instead.
//
// Buffers may be host memory (the Communicator contract: staged through device memory on the communicator's
// stream) or device memory (used in place; cudaPointerGetAttributes tells which: the caller synchronizes the
// stream that wrote a device buffer before passing it in). float/double sums are the
// contract's ascending-rank-order sums (reduce-scatter, ordered sum on the host, all-gather), bitwise equal to
// the other communicators'. Every call returns once its results are in the caller's buffers, except the
// *_async ones and isend/irecv, whose handles do that in wait()/test(). isend/irecv are queued and launched
// together as one NCCL group at the first wait()/test() of any queued handle or the next other call. NCCL knows
// no tags and matches a pair's messages in issue order, so the group issues each pair's messages in (tag, post
// order) order on both sides: tags then separate messages exactly when both sides flush a pair's messages in
// the same batch, which post-all-then-wait (the only pattern NCCL cannot deadlock on) guarantees. Failures
// throw Error (exit 6) naming rank, host, the NCCL or CUDA call and NCCL's last error; set_timeout_s bounds
// every wait (the communicator is then aborted).
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap);

}  // namespace prophet
