// testbed.cpp: machine load, steal time, CPU binding and the pinned mpirun launcher (see testbed.h).
#include "core/testbed.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace prophet {

namespace {

std::string read_text(const char* path) {
    std::ifstream in(path);
    if (!in) return "";
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

CpuTimes parse_cpu_times(const std::string& proc_stat) {
    std::istringstream lines(proc_stat);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("cpu ", 0) != 0) continue;
        std::istringstream fields(line.substr(4));
        uint64_t v[8] = {0};  // user nice system idle iowait irq softirq steal (guest time is inside user)
        int n = 0;
        while (n < 8 && fields >> v[n]) n++;
        if (n < 4)
            throw Error(kExitRunFailed, "/proc/stat: the \"cpu\" line has " + std::to_string(n) +
                                            " numbers, expected at least 4 (user nice system idle)");
        CpuTimes t;
        for (int i = 0; i < n; i++) t.total += v[i];
        t.steal = v[7];
        return t;
    }
    throw Error(kExitRunFailed, "/proc/stat: no \"cpu \" line (the machine's aggregate CPU times)");
}

CpuTimes read_cpu_times() {
    const std::string text = read_text("/proc/stat");
    if (text.empty()) return {};
    try {
        return parse_cpu_times(text);
    } catch (const Error&) {
        return {};
    }
}

double steal_fraction(const CpuTimes& before, const CpuTimes& after) {
    if (after.total <= before.total || after.steal < before.steal) return 0.0;
    return (double)(after.steal - before.steal) / (double)(after.total - before.total);
}

double parse_load1(const std::string& proc_loadavg) {
    std::istringstream in(proc_loadavg);
    double load1 = -1;
    if (!(in >> load1) || load1 < 0)
        throw Error(kExitRunFailed, "/proc/loadavg: \"" + proc_loadavg.substr(0, 40) +
                                        "\" does not start with a load average (a number >= 0)");
    return load1;
}

double read_load1() {
    const std::string text = read_text("/proc/loadavg");
    if (text.empty()) return -1;
    try {
        return parse_load1(text);
    } catch (const Error&) {
        return -1;
    }
}

int online_cores() { return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)); }

namespace {

std::vector<int> allowed_cpus() {
    std::vector<int> out;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) out.push_back(c);
    return out;
}

}  // namespace

int usable_cores() {
    const int allowed = cpus_allowed_count();
    return allowed > 0 ? std::min(online_cores(), allowed) : online_cores();
}

std::string cpus_allowed_list() { return format_cpu_list(allowed_cpus()); }
int cpus_allowed_count() { return (int)allowed_cpus().size(); }

std::string format_cpu_list(std::vector<int> cpus) {
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) j++;
        if (!out.empty()) out += ',';
        out += std::to_string(cpus[i]);
        if (j > i) {  // appended apart: GCC 12 warns (-Wrestrict, falsely) on "-" + std::string&&
            out += '-';
            out += std::to_string(cpus[j]);
        }
        i = j + 1;
    }
    return out;
}

bool machine_busy(double load1, int cores, int ranks_here) { return load1 > ranks_here + kBusyLoadPerCore * cores; }

std::vector<std::string> mpirun_launcher(int ranks, int cores) {
    if (ranks <= 1) return {};
    std::vector<std::string> cmd = {"mpirun", "--allow-run-as-root", "-np", std::to_string(ranks)};
    if (ranks <= cores)
        cmd.insert(cmd.end(), {"--bind-to", "core", "--map-by", "core"});
    else
        cmd.insert(cmd.end(), {"--oversubscribe", "--bind-to", "none"});
    cmd.insert(cmd.end(), {"-x", "OPENBLAS_NUM_THREADS=1"});
    return cmd;
}

}  // namespace prophet
