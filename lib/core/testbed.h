// testbed.h: the machine a measured run shares (docs/testbed.md): how to launch its ranks pinned, and what the
// machine was doing around it (load, steal time, cores, each rank's CPU binding).
//
// A measured run (prophet train under mpirun, the children of prophet ablate and of prophet sweep engine real)
// pins one rank per core when it has no more ranks than cores, runs one BLAS thread per rank (train.threads = 1),
// and records these numbers in its params so that figures can drop runs that measured the OS scheduler instead of
// the code: oversubscribed runs (more ranks than cores) and runs that started on a busy machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prophet {

// A busy machine: the 1-minute load average at a run's start exceeds the run's own ranks on this host plus this
// many runnable tasks per online core. 0.5 x cores: half the machine already taken by someone else.
inline constexpr double kBusyLoadPerCore = 0.5;

// Aggregate CPU time of the machine since boot, jiffies (/proc/stat's first "cpu" line).
struct CpuTimes {
    uint64_t steal = 0;  // time the hypervisor ran something else while this machine's vCPUs wanted to run
    uint64_t total = 0;  // user + nice + system + idle + iowait + irq + softirq + steal
};
// Parses /proc/stat text; throws prophet::Error (exit 1) naming what is missing when there is no "cpu " line.
CpuTimes parse_cpu_times(const std::string& proc_stat);
CpuTimes read_cpu_times();  // /proc/stat; zeros where it cannot be read (not Linux)
// Steal jiffies / all jiffies between two samples; 0 when no time passed.
double steal_fraction(const CpuTimes& before, const CpuTimes& after);

// The first field of /proc/loadavg text (the 1-minute load average); throws prophet::Error (exit 1) when malformed.
double parse_load1(const std::string& proc_loadavg);
double read_load1();  // -1 where /proc/loadavg cannot be read

int online_cores();  // sysconf(_SC_NPROCESSORS_ONLN), at least 1
// The cores this process may use: online cores, fewer where a cpuset (a container, a batch job) restricts it.
int usable_cores();
// The CPUs this thread may run on (sched_getaffinity), as a list "0-3,6" (Cpus_allowed_list's format), and how many.
std::string cpus_allowed_list();
int cpus_allowed_count();
// [0,3,1,2,6] -> "0-3,6" (sorted, duplicates dropped)
std::string format_cpu_list(std::vector<int> cpus);

// busy: load1 > ranks_here + kBusyLoadPerCore * cores
bool machine_busy(double load1, int cores, int ranks_here);

// The start of a measured child's command line for `ranks` ranks on this machine with `cores` online cores:
// mpirun as root with one rank pinned per core (--bind-to core --map-by core) when ranks <= cores, else
// --oversubscribe with no binding (pinning two ranks to one core would serialise them); OPENBLAS_NUM_THREADS=1 is
// exported to every rank. Empty for ranks == 1 (no mpirun).
std::vector<std::string> mpirun_launcher(int ranks, int cores);

}  // namespace prophet
