// testbed_record.cpp: gathering the run's machine record from every rank (see testbed_record.h).
#include "train/testbed_record.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

namespace prophet {

namespace {

// One rank's report, fixed size for all_gather.
struct RankReport {
    char host[64];
    char allowed[160];  // Cpus_allowed_list, truncated
    int32_t cores;
    int32_t allowed_count;
};

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

}  // namespace

TestbedRecord testbed_survey(Communicator& comm, int blas_threads) {
    TestbedRecord r;
    r.ranks = comm.size();
    r.blas_threads = blas_threads;
    RankReport mine{};
    gethostname(mine.host, sizeof mine.host - 1);
    std::snprintf(mine.allowed, sizeof mine.allowed, "%s", cpus_allowed_list().c_str());
    mine.cores = online_cores();  // not usable_cores(): a pinned rank may use one
    mine.allowed_count = cpus_allowed_count();
    std::vector<RankReport> all(r.ranks);  // [D]
    comm.all_gather(&mine, sizeof mine, all.data());
    std::map<std::string, int> per_host;  // host -> ranks on it
    for (const RankReport& rep : all) per_host[rep.host]++;
    r.pinned = true;
    for (int d = 0; d < r.ranks; d++) {
        const RankReport& rep = all[d];
        if (per_host[rep.host] > rep.cores) r.oversubscribed = true;
        if (rep.allowed_count <= 0 || rep.allowed_count >= rep.cores) r.pinned = false;
        if (d) r.binding += ';';
        r.binding += rep.allowed;
    }
    r.cores = all[0].cores;
    r.ranks_here = per_host[all[0].host];
    r.load1 = read_load1();
    r.cpu_start = read_cpu_times();
    r.busy = r.load1 >= 0 && machine_busy(r.load1, r.cores, r.ranks_here);
    return r;
}

std::vector<std::pair<std::string, std::string>> testbed_params(const TestbedRecord& r) {
    const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
    return {{"testbed.load1", number(r.load1)},
            {"testbed.cores", std::to_string(r.cores)},
            {"testbed.ranks", std::to_string(r.ranks)},
            {"testbed.ranks_here", std::to_string(r.ranks_here)},
            {"testbed.oversubscribed", flag(r.oversubscribed)},
            {"testbed.pinned", flag(r.pinned)},
            {"testbed.binding", "\"" + r.binding + "\""},  // a TOML string, as params are TOML text
            {"testbed.blas_threads", std::to_string(r.blas_threads)},
            {"testbed.busy_machine", flag(r.busy)}};
}

std::pair<std::string, std::string> testbed_steal_param(const TestbedRecord& r) {
    return {"testbed.steal_frac", number(steal_fraction(r.cpu_start, read_cpu_times()))};
}

std::string busy_machine_message(const TestbedRecord& r) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "busy machine: 1-min load %.2f at the start is above this run's %d rank(s) + %.1f x %d cores; its "
                  "timings measure the sharing too (docs/testbed.md)",
                  r.load1, r.ranks_here, kBusyLoadPerCore, r.cores);
    return buf;
}

}  // namespace prophet
