// timer.h: monotonic wall-clock helpers (steady_clock) and this thread's CPU time, in the units their names say.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace prophet {

inline int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
// wall-clock milliseconds since the Unix epoch (for records, not for timing)
inline int64_t unix_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// CPU time of the calling thread, ns (CLOCK_THREAD_CPUTIME_ID: time other processes steal is not counted)
inline int64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// TEST ONLY (the throughput gate's injected slowdown, docs/reliability.md): busy-spin, not sleep, so the core is
// taken as by real work. spin_thread_cpu_ns until this thread has used `cpu_ns` more CPU time (for a measurement
// by CPU time); spin_wall_ns until `wall_ns` of wall time have passed (for one by wall time: on a loaded machine a
// CPU-time spin would last longer in wall time than the share it was sized as).
inline void spin_thread_cpu_ns(int64_t cpu_ns) {
    const int64_t until = thread_cpu_ns() + cpu_ns;
    while (thread_cpu_ns() < until) {
    }
}
inline void spin_wall_ns(int64_t wall_ns) {
    const int64_t until = now_ns() + wall_ns;
    while (now_ns() < until) {
    }
}

}  // namespace prophet
