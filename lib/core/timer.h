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
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// TEST ONLY (the throughput gate's injected slowdown, docs/reliability.md): busy-spins until this thread has used
// `cpu_ns` more CPU time. A spin, not a sleep, so that CPU-time and wall-time measurements both see it.
inline void spin_thread_cpu_ns(int64_t cpu_ns) {
    const int64_t until = thread_cpu_ns() + cpu_ns;
    while (thread_cpu_ns() < until) {
    }
}

}  // namespace prophet
