// comm.h: the communicator every distributed piece of prophet talks through.
//
// One small interface, three implementations: LocalGroup (N ranks as threads of one process, the in-process
// oracle the tests compare against), MPI (CPU ranks over OpenMPI), and later NCCL. Buffers are host memory;
// sizes are in bytes or elements as named. Every collective must be called by all ranks of the communicator
// in the same order (MPI semantics). Failures throw prophet::Error (exit code 6) naming the rank and the call.
// Threads: one thread runs the collectives; one more (the scheduler's communication stream) may run isend/irecv
// and the subset Trans/Agg at the same time (MPI needs MPI_THREAD_MULTIPLE for that; LocalGroup allows it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prophet {

// A non-blocking operation in flight. wait() completes it (and finishes any local work it implies, e.g. the sum
// of a reduce); test() reports completion without blocking. Destroying an unfinished request waits for it.
class CommRequest {
  public:
    virtual ~CommRequest() = default;
    virtual void wait() = 0;
    virtual bool test() = 0;
};
using CommHandle = std::unique_ptr<CommRequest>;

// For a request's destructor: request.wait() with any exception swallowed, since a destructor must not throw. An
// explicit wait() reports a failure to its caller; one first met here has already aborted the group (or timed out),
// and the rank's next call on the communicator reports it.
void wait_quietly(CommRequest& request) noexcept;

class Communicator {
  public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual const char* name() const = 0;  // "local", "mpi"
    virtual void barrier() = 0;

    // element-wise sum / max over all ranks, in place; every rank ends with the same bytes (the order of
    // summation is the same on every rank)
    virtual void all_reduce_sum(float* data, size_t count) = 0;
    virtual void all_reduce_sum(double* data, size_t count) = 0;
    virtual void all_reduce_sum(int64_t* data, size_t count) = 0;
    virtual void all_reduce_max(double* data, size_t count) = 0;
    // recv [size()*bytes]: rank r's `bytes` at offset r*bytes
    virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
    virtual void broadcast(void* data, size_t bytes, int root) = 0;

    // all-to-all-v in bytes: this rank sends send_bytes[r] bytes from send + send_offsets[r] to rank r and
    // receives recv_bytes[r] bytes from rank r into recv + recv_offsets[r]. Arrays are [size()].
    virtual void all_to_all_v(const void* send, const size_t* send_bytes, const size_t* send_offsets, void* recv,
                              const size_t* recv_bytes, const size_t* recv_offsets) = 0;
    virtual CommHandle all_to_all_v_async(const void* send, const size_t* send_bytes, const size_t* send_offsets,
                                          void* recv, const size_t* recv_bytes, const size_t* recv_offsets) = 0;

    // point to point; tags separate concurrent exchanges between the same pair
    virtual CommHandle isend(const void* data, size_t bytes, int dst, int tag) = 0;
    virtual CommHandle irecv(void* data, size_t bytes, int src, int tag) = 0;

    // Among a subset of ranks (sorted, containing root; ranks outside the subset must not call): Trans
    // (broadcast the owner's expert parameters to the replica holders) and Agg (sum the holders' gradients into
    // the owner). The reduce sums contributions in ascending rank order, so the result is deterministic.
    // Default: point to point (root sends to each member / members send to the root); an implementation with
    // native subset collectives (NCCL on a sub-communicator) may override.
    virtual CommHandle broadcast_subset_async(void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                              int tag);
    virtual CommHandle reduce_sum_subset_async(float* data, size_t count, int root, const std::vector<int>& ranks,
                                               int tag);

    // wall-clock limit for one blocking call before the job is declared hung (exit 6); 0 = none
    virtual void set_timeout_s(double seconds) = 0;
};

// N in-process ranks for tests: communicator i must be used from its own thread (plus one communication
// thread of that rank, as above).
std::vector<std::unique_ptr<Communicator>> make_local_group(int num_ranks);

// True when this binary was built with MPI (PROPHET_HAVE_MPI).
bool mpi_available();
// Initialises MPI once (MPI_Init_thread, MPI_THREAD_MULTIPLE requested) and wraps MPI_COMM_WORLD; errors are
// returned (MPI_ERRORS_RETURN) and turned into prophet::Error naming the rank and the call. Throws when MPI is
// not built. finalize_mpi() at exit.
std::unique_ptr<Communicator> make_mpi_communicator(int* argc, char*** argv);
void finalize_mpi();
// Whether the process was started by mpirun/mpiexec (OpenMPI, MPICH or Slurm environment variables).
bool launched_by_mpi();

}  // namespace prophet

// ---- added with the communicator implementations (comm_common.cpp, comm_mpi.cpp) ----------------------------
namespace prophet {

// What `prophet train` calls: MPI over MPI_COMM_WORLD when launched by mpirun/srun and MPI is built, else one
// in-process rank. *is_mpi says which. Throws (exit 6) when mpirun started several ranks of a build without MPI,
// since each would otherwise run alone as rank 0 of 1.
std::unique_ptr<Communicator> make_world_communicator(int* argc, char*** argv, bool* is_mpi);
// The thread level MPI_Init_thread provided ("MPI_THREAD_MULTIPLE", ..., "MPI_THREAD_SINGLE"), or "" when MPI
// is not initialised; for the run record. Communicators never call MPI from a thread of their own, so any level
// is safe as long as one thread at a time uses them (FUNNELED: the main thread).
std::string mpi_thread_level();
// After a prophet::Error on one rank: MPI_Abort(MPI_COMM_WORLD, exit_code) so the peers stop too (a rank that
// returns and calls MPI_Finalize while peers wait in a collective hangs the job). No-op without MPI.
void abort_mpi(int exit_code);

class Error;  // core/error.h

namespace comm_detail {
// Subset Trans/Agg on top of isend/irecv, shared by every communicator: the root sends to each member / each
// member sends to the root, which sums contributions in ascending rank order. No sub-communicators needed.
CommHandle broadcast_subset_p2p(Communicator& comm, void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                int tag);
CommHandle reduce_sum_subset_p2p(Communicator& comm, float* data, size_t count, int root,
                                 const std::vector<int>& ranks, int tag);
// One request completing every part in order (wait) / testing every part (test).
CommHandle join_requests(std::vector<CommHandle> parts);
// The exit-6 error for a blocking wait past the deadline: "rank R: <call> timed out after S s<detail>".
Error timeout_error(int rank, const char* call, double timeout_s, const std::string& detail);
}  // namespace comm_detail

}  // namespace prophet
