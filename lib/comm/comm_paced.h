// comm_paced.h: an emulated slow network in front of any communicator, for CPU ranks on one machine.
//
// CPU ranks on one host move bytes through shared memory far faster than a cluster network, and the copy burns
// the CPU the ranks compute on. PacedCommunicator makes every point-to-point message and every all-to-all-v take
// the wall time a link of `bytes_per_s` with `latency_s` would, WITHOUT using CPU for it: each rank has one
// egress queue (its NIC); a message leaves after the messages queued before it, at
//     release = max(now, egress_free) + latency_s + bytes / bytes_per_s,   egress_free = release - latency_s
// and a wire thread (sleeping until each release time) then hands it to the inner communicator, whose own
// transfer is comparatively instant. Receivers complete when the message arrives. So transfers take real wall
// time, overlap computation only if the program lets them, and contend FIFO on the sender's NIC.
//
// Not emulated: the receiver side of the link (no ingress limit), switch contention, and the small collectives
// (barrier, all_gather, broadcast, all_reduce: control messages and the dense data-parallel gradient sum), which go
// straight to the inner communicator. Messages to this rank itself are not paced. docs/scheduler.md says more.
//
// Every wait on a paced send is bounded by the timeout (LinkEmulation::timeout_s, set_timeout_s): a link too slow
// for it ends the job with exit 6 like a hung peer. A send request destroyed unwaited is withdrawn from the queue.
//
// Thread safety: like the inner communicator, plus: isend/irecv/all_to_all_v may be called from one extra thread
// (a communication thread) concurrently with the main thread, provided the inner communicator allows that (the
// in-process LocalGroup does; MPI needs MPI_THREAD_MULTIPLE).
#pragma once

#include <memory>

#include "comm/comm.h"

namespace prophet {

struct LinkEmulation {
    double bytes_per_s = 0;  // egress rate per rank; <= 0: no pacing
    double latency_s = 0;    // per message
    double timeout_s = 0;    // a wait for a queued send gives up after it (exit 6), as comm.timeout_s; 0 = none.
                             // set_timeout_s on the paced communicator sets it too.
};

// Wraps inner (not owned; must outlive the result).
std::unique_ptr<Communicator> make_paced_communicator(Communicator* inner, LinkEmulation link);

}  // namespace prophet
