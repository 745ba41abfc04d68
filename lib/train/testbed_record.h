// testbed_record.h: what a measured run records about the machine it ran on (docs/testbed.md): the 1-minute load
// at its start, the steal time over it, online cores, ranks, whether ranks outnumber cores, each rank's CPU binding
// and BLAS threads. Gathered from every rank at the start (collective); written into the run's params by rank 0.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "core/testbed.h"

namespace prophet {

struct TestbedRecord {
    double load1 = -1;        // rank 0's host, at the start (-1: unreadable)
    int cores = 1;            // online cores of rank 0's host
    int ranks = 1;            // world size
    int ranks_here = 1;       // ranks on rank 0's host
    bool oversubscribed = false;  // some host runs more ranks than it has online cores
    bool pinned = false;      // every rank may run on fewer CPUs than its host has (bound by the launcher)
    bool busy = false;        // machine_busy(load1, cores, ranks_here)
    std::string binding;      // each rank's Cpus_allowed_list, in rank order, ";"-separated ("0;1": pinned)
    int blas_threads = 1;     // BLAS threads of rank 0
    CpuTimes cpu_start;       // rank 0's host, at the start
};

// Collective: every rank reports its host, cores and binding; the record is complete on rank 0.
TestbedRecord testbed_survey(Communicator& comm, int blas_threads);

// The params of the start ("testbed.*", values as TOML text: numbers, true / false, the binding as a string).
std::vector<std::pair<std::string, std::string>> testbed_params(const TestbedRecord& r);
// testbed.steal_frac over [the survey, now] on rank 0's host, as a param.
std::pair<std::string, std::string> testbed_steal_param(const TestbedRecord& r);
// The one stderr line (and event message) of a run that starts on a busy machine.
std::string busy_machine_message(const TestbedRecord& r);

}  // namespace prophet
