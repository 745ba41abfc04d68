// failure_watch.h: a run that is ended from outside (a dead peer, mpirun, Ctrl-C) is recorded, not left `running`.
//
// When one rank dies abnormally (a crash, SIGKILL, _exit without MPI_Finalize), mpirun sends SIGTERM to the
// others and SIGKILL about 1 s later (odls_base_sigkill_timeout). The main thread may then sit in a collective
// or in a store transaction, and nothing a signal handler may call can write SQLite, so the handler only writes
// the signal number into a pipe. A watcher thread reads it and, on rank 0, opens its own connection to the store
// and in one transaction, if the run is still `running`, records:
//   - a peer on rank 0's host that is already gone (its pid no longer exists): status failed, exit code 6, an
//     error event naming that rank and the step;
//   - otherwise: status killed, exit code 128 + signal, the step.
// Then it _exits with that code. Other ranks stay alive for a moment (so rank 0 can tell which peer was gone
// first) and then _exit with 128 + signal. An uncommitted transaction of the main thread is rolled back by
// SQLite (WAL), so the file stays consistent. Peers on other hosts cannot be checked and are not named.
// SIGTERM, SIGINT and SIGHUP are watched while the FailureWatch lives; its destructor restores the old handlers.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace prophet {

class Communicator;

struct RankProcess {
    std::string host;
    int pid = 0;
};

class FailureWatch {
  public:
    // Collective: all-gathers every rank's host and pid. store_path and run_id are used on rank 0 only.
    FailureWatch(Communicator& comm, std::string store_path, std::string run_id);
    ~FailureWatch();
    FailureWatch(const FailureWatch&) = delete;
    FailureWatch& operator=(const FailureWatch&) = delete;

    // the step the main thread is running (recorded on failure)
    void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
    int64_t step() const { return step_.load(std::memory_order_relaxed); }
    const std::vector<RankProcess>& processes() const { return processes_; }

    // Records an error the main thread caught (failed, exit code, message, an error event at `step` naming this
    // rank) in one transaction, unless the run is no longer `running`: the first to record wins. Rank 0 can always;
    // another rank can when it runs on rank 0's host and the store file exists there. That matters because a
    // failure every rank sees at once (a timeout, a NaN loss) ends the job with whichever rank calls MPI_Abort
    // first, and mpirun may kill rank 0 before rank 0 has written. Returns whether this call recorded it; never
    // throws (the original error is what the user needs to see).
    bool record_failure(int exit_code, const std::string& message, int64_t step) const;

  private:
    void watch();
    void record_and_exit(int signal_number);

    int rank_ = 0;
    std::string store_path_, run_id_;
    std::vector<RankProcess> processes_;  // [D]
    std::atomic<int64_t> step_{0};
    int pipe_[2] = {-1, -1};
    std::thread thread_;
};

// The ranks in `processes` (other than `self`) on `host` whose pid no longer exists or is a zombie.
std::vector<int> dead_local_ranks(const std::vector<RankProcess>& processes, int self, const std::string& host);

}  // namespace prophet
