#include "train/failure_watch.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "comm/comm.h"
#include "core/error.h"
#include "store/run_health.h"  // process_gone
#include "store/store.h"

namespace prophet {
namespace {

constexpr int kWatched[] = {SIGTERM, SIGINT, SIGHUP};
std::atomic<int> g_signal_fd{-1};  // write end of the active watch's pipe
struct sigaction g_previous[3];

// async-signal-safe: one write()
void on_signal(int signal_number) {
    const int fd = g_signal_fd.load();
    if (fd < 0) return;
    const unsigned char byte = static_cast<unsigned char>(signal_number);
    const ssize_t written = write(fd, &byte, 1);
    (void)written;  // nothing a handler could do about a full pipe: one byte is already there
}

}  // namespace

std::vector<int> dead_local_ranks(const std::vector<RankProcess>& processes, int self, const std::string& host) {
    std::vector<int> dead;
    for (int r = 0; r < static_cast<int>(processes.size()); ++r)
        if (r != self && processes[r].host == host && process_gone(processes[r].pid)) dead.push_back(r);
    return dead;
}

FailureWatch::FailureWatch(Communicator& comm, std::string store_path, std::string run_id)
    : rank_(comm.rank()), store_path_(std::move(store_path)), run_id_(std::move(run_id)) {
    struct Entry {
        char host[64];
        int32_t pid;
    };
    Entry mine{};
    gethostname(mine.host, sizeof mine.host - 1);
    mine.pid = getpid();
    std::vector<Entry> all(comm.size());
    comm.all_gather(&mine, sizeof mine, all.data());
    for (const Entry& e : all) processes_.push_back({std::string(e.host, strnlen(e.host, sizeof e.host)), e.pid});

    PROPHET_ASSERT_MSG(g_signal_fd.load() < 0, "one FailureWatch per process");
    if (pipe(pipe_) != 0) throw Error(kExitResource, "resource error: pipe() for the failure watch: " + std::string(std::strerror(errno)));
    g_signal_fd.store(pipe_[1]);
    thread_ = std::thread([this] { watch(); });
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; ++i) sigaction(kWatched[i], &action, &g_previous[i]);
}

FailureWatch::~FailureWatch() {
    for (int i = 0; i < 3; ++i) sigaction(kWatched[i], &g_previous[i], nullptr);
    g_signal_fd.store(-1);
    const unsigned char stop = 0;  // 0 is no signal: the watcher returns
    const ssize_t written = write(pipe_[1], &stop, 1);
    (void)written;
    thread_.join();
    close(pipe_[0]);
    close(pipe_[1]);
}

void FailureWatch::watch() {
    unsigned char byte = 0;
    for (;;) {
        const ssize_t n = read(pipe_[0], &byte, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n != 1 || byte == 0) return;
        record_and_exit(byte);
    }
}

bool FailureWatch::record_failure(int exit_code, const std::string& message, int64_t step) const {
    if (run_id_.empty() || processes_.empty()) return false;
    if (rank_ != 0 && (processes_[rank_].host != processes_[0].host || !std::filesystem::exists(store_path_)))
        return false;  // rank 0's file is not reachable from here (and opening would create another one)
    bool recorded = false;
    try {
        Store store = Store::open(store_path_);
        store.transaction([&] {
            recorded = false;  // a retried transaction starts over
            if (store.get_run(run_id_).status != "running") return;
            store.put_event(run_id_, step, rank_, "error", "failure", message, "");
            store.finish_run(run_id_, "failed", exit_code, message);
            recorded = true;
        });
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prophet: rank %d: could not record the failure: %s\n", rank_, e.what());
    }
    return recorded;
}

void FailureWatch::record_and_exit(int signal_number) {
    const int64_t step = this->step();
    const char* name = strsignal(signal_number);
    if (rank_ != 0) {
        // stay visible to rank 0's check for a moment; mpirun's SIGKILL may come first
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        _exit(128 + signal_number);
    }
    const std::vector<int> dead = dead_local_ranks(processes_, 0, processes_.empty() ? "" : processes_[0].host);
    int exit_code = 128 + signal_number;
    std::string status = "killed", message;
    if (!dead.empty()) {
        exit_code = kExitDistributed;
        status = "failed";
        std::string ranks;
        for (int r : dead)
            ranks += (ranks.empty() ? "" : ", ") + std::to_string(r) + " (pid " + std::to_string(processes_[r].pid) + ")";
        message = "rank " + ranks + " ended abnormally during step " + std::to_string(step) +
                  "; rank 0 was then stopped by signal " + std::to_string(signal_number) + " (" + name + ")";
    } else {
        message = "stopped by signal " + std::to_string(signal_number) + " (" + name + ") during step " +
                  std::to_string(step);
    }
    std::fprintf(stderr, "prophet: rank 0: %s\n", message.c_str());
    try {
        if (!run_id_.empty()) {
            Store store = Store::open(store_path_);
            store.transaction([&] {
                if (store.get_run(run_id_).status != "running") return;  // the main thread recorded it first
                store.put_event(run_id_, step, dead.empty() ? 0 : dead.front(), "error",
                                dead.empty() ? "signal" : "rank_failed", message, "");
                store.finish_run(run_id_, status, exit_code, message);
            });
            std::fprintf(stderr, "prophet: run %s recorded as %s\n", run_id_.c_str(), status.c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prophet: rank 0: could not record the failure: %s\n", e.what());
    }
    std::fflush(stderr);
    _exit(exit_code);
}

}  // namespace prophet
