// comm_common.cpp: what every communicator shares: launcher detection, the world communicator `prophet train`
// uses, the timeout error, and the subset Trans/Agg built on isend/irecv. Without MPI it also holds the stubs
// of the MPI entry points (comm_mpi.cpp defines them when MPI is found).
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "comm/comm.h"
#include "comm/scratch_pool.h"
#include "core/error.h"

namespace prophet {
namespace {

const char* env(const char* name) {
    const char* value = std::getenv(name);
    return value && *value ? value : nullptr;
}

// World size announced by an MPI launcher (0 when none). Slurm's SLURM_NTASKS is left out: it is also set in a
// batch script that runs prophet without srun.
int launcher_world_size() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
        if (const char* value = env(name)) return std::atoi(value);
    }
    return 0;
}

// Completes all parts, then runs on_complete (the root's sum of a subset reduce).
class MultiRequest final : public CommRequest {
  public:
    std::vector<ScratchPool::Lease> buffers;  // [members] of count floats: contributions received by a reduce root
    std::vector<CommHandle> parts;
    std::function<void()> on_complete;

    ~MultiRequest() override {
        if (!done_) wait_quietly(*this);
    }
    void wait() override {
        if (done_) return;
        done_ = true;
        for (auto& part : parts) part->wait();
        if (on_complete) on_complete();
    }
    bool test() override {
        if (done_) return true;
        bool all = true;
        for (auto& part : parts) all = part->test() && all;  // test every part, so each makes progress
        if (!all) return false;
        wait();
        return true;
    }

  private:
    bool done_ = false;
};

void check_subset(const Communicator& comm, int root, const std::vector<int>& ranks, const char* call) {
    const std::string where = "rank " + std::to_string(comm.rank()) + ": " + call + ": ";
    bool has_root = false, has_self = false;
    for (size_t i = 0; i < ranks.size(); ++i) {
        PROPHET_ASSERT_MSG(ranks[i] >= 0 && ranks[i] < comm.size(), where + "rank " + std::to_string(ranks[i]) +
                                                                        " outside the communicator");
        PROPHET_ASSERT_MSG(i == 0 || ranks[i - 1] < ranks[i], where + "ranks must be sorted and unique");
        has_root |= ranks[i] == root;
        has_self |= ranks[i] == comm.rank();
    }
    PROPHET_ASSERT_MSG(has_root, where + "the subset must contain the root " + std::to_string(root));
    PROPHET_ASSERT_MSG(has_self, where + "called by a rank outside the subset");
}

}  // namespace

bool launched_by_mpi() {
    return env("OMPI_COMM_WORLD_SIZE") || env("PMI_SIZE") || env("PMIX_RANK") || env("SLURM_NTASKS");
}

bool mpi_available() {
#ifdef PROPHET_HAVE_MPI
    return true;
#else
    return false;
#endif
}

std::unique_ptr<Communicator> make_world_communicator(int* argc, char*** argv, bool* is_mpi) {
    const bool use_mpi = mpi_available() && launched_by_mpi();
    if (is_mpi) *is_mpi = use_mpi;
    if (use_mpi) return make_mpi_communicator(argc, argv);
    if (launcher_world_size() > 1) {
        throw Error(kExitDistributed, "started by mpirun with " + std::to_string(launcher_world_size()) +
                                          " ranks, but this prophet was built without MPI, so every rank would run "
                                          "alone\nHINT: install openmpi-bin libopenmpi-dev and reconfigure with "
                                          "-DPROPHET_MPI=ON");
    }
    return std::move(make_local_group(1)[0]);
}

#ifndef PROPHET_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator(int*, char***) {
    throw Error(kExitDistributed, "this prophet was built without MPI\nHINT: install openmpi-bin libopenmpi-dev and "
                                  "reconfigure with -DPROPHET_MPI=ON");
}
void finalize_mpi() {}
std::string mpi_thread_level() { return ""; }
void abort_mpi(int) {}
#endif

namespace comm_detail {

Error timeout_error(int rank, const char* call, double timeout_s, const std::string& detail) {
    std::ostringstream out;
    out << "rank " << rank << ": " << call << " timed out after " << timeout_s << " s" << detail;
    return Error(kExitDistributed, out.str());
}

CommHandle join_requests(std::vector<CommHandle> parts) {
    auto request = std::make_unique<MultiRequest>();
    request->parts = std::move(parts);
    return request;
}

CommHandle broadcast_subset_p2p(Communicator& comm, void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                int tag) {
    check_subset(comm, root, ranks, "broadcast_subset_async");
    auto request = std::make_unique<MultiRequest>();
    if (comm.rank() == root) {
        for (int member : ranks) {
            if (member != root) request->parts.push_back(comm.isend(data, bytes, member, tag));
        }
    } else {
        request->parts.push_back(comm.irecv(data, bytes, root, tag));
    }
    return request;
}

CommHandle reduce_sum_subset_p2p(Communicator& comm, float* data, size_t count, int root,
                                 const std::vector<int>& ranks, int tag) {
    check_subset(comm, root, ranks, "reduce_sum_subset_async");
    auto request = std::make_unique<MultiRequest>();
    if (comm.rank() != root) {
        request->parts.push_back(comm.isend(data, count * sizeof(float), root, tag));
        return request;
    }
    // The receive buffers come from the process's scratch pool (comm/scratch_pool.h): the same pages every call,
    // where a fresh allocation per call page-faults on every first touch. The root's own member has none.
    request->buffers.resize(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i] == root) continue;
        request->buffers[i] = comm_scratch_pool().acquire(count * sizeof(float));
        request->parts.push_back(comm.irecv(request->buffers[i].data(), count * sizeof(float), ranks[i], tag));
    }
    MultiRequest* self = request.get();
    request->on_complete = [self, data, count, root, ranks] {
        // data = x_{ranks[0]} + x_{ranks[1]} + ... : ascending rank order, the root's own data in its place.
        // Block by block through a small accumulator on the stack: a block of data is read (as the root's
        // contribution) before it is overwritten, and no accumulator of the expert's size is allocated.
        std::vector<const float*> contributions(ranks.size());
        for (size_t i = 0; i < ranks.size(); ++i)
            contributions[i] = ranks[i] == root ? data : self->buffers[i].as<const float>();
        constexpr size_t kBlock = 1024;
        float acc[kBlock];
        for (size_t begin = 0; begin < count; begin += kBlock) {
            const size_t n = std::min(kBlock, count - begin);
            std::copy_n(contributions[0] + begin, n, acc);
            for (size_t i = 1; i < contributions.size(); ++i) {
                const float* x = contributions[i] + begin;
                for (size_t k = 0; k < n; ++k) acc[k] += x[k];
            }
            std::copy_n(acc, n, data + begin);
        }
    };
    return request;
}

}  // namespace comm_detail

void wait_quietly(CommRequest& request) noexcept {
    try {
        request.wait();
    } catch (...) {
        // swallowed on purpose: a destructor must not throw, and the failure is reported elsewhere (see comm.h)
    }
}

CommHandle Communicator::broadcast_subset_async(void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                                int tag) {
    return comm_detail::broadcast_subset_p2p(*this, data, bytes, root, ranks, tag);
}

CommHandle Communicator::reduce_sum_subset_async(float* data, size_t count, int root, const std::vector<int>& ranks,
                                                 int tag) {
    return comm_detail::reduce_sum_subset_p2p(*this, data, count, root, ranks, tag);
}

}  // namespace prophet
