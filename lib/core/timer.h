// timer.h: monotonic wall-clock helpers (steady_clock), in the units their names say.
#pragma once

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

}  // namespace prophet
