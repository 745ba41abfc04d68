// progress.cpp: see progress.h.
#include "progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace prophet::cli {

std::string format_eta(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    const long s = std::lround(seconds);
    char b[32];
    if (s < 60)
        std::snprintf(b, sizeof b, "%ld s", s);
    else
        std::snprintf(b, sizeof b, "%ld:%02ld", s / 60, s % 60);
    return b;
}

Progress::Progress(std::string label, int64_t total, int64_t first)
    : label_(std::move(label)), total_(total), first_(first), last_(first),
      terminal_(isatty(fileno(stderr)) != 0), start_(std::chrono::steady_clock::now()) {
    if (total_ > 0) last_tenth_ = static_cast<int>(10 * first_ / total_);
}

std::string Progress::text(int64_t done) const {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int64_t counted = done - first_;
    const double eta = counted > 0 ? elapsed / static_cast<double>(counted) * static_cast<double>(total_ - done) : -1;
    char b[160];
    std::snprintf(b, sizeof b, "%s %lld/%lld (%d%%), elapsed %s, ETA %s", label_.c_str(), static_cast<long long>(done),
                  static_cast<long long>(total_), total_ > 0 ? static_cast<int>(100 * done / total_) : 100,
                  format_eta(elapsed).c_str(), counted > 0 ? format_eta(eta).c_str() : "?");
    return b;
}

void Progress::update(int64_t done) {
    last_ = done;
    if (total_ <= 0) return;
    if (terminal_) {
        std::fprintf(stderr, "\r%s\033[K", text(done).c_str());
        shown_ = true;
    } else {
        const int tenth = static_cast<int>(10 * done / total_);
        if (tenth <= last_tenth_) return;
        last_tenth_ = tenth;
        std::fprintf(stderr, "%s\n", text(done).c_str());
    }
    std::fflush(stderr);
}

void Progress::clear() {
    if (!terminal_ || !shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
}

void Progress::finish() {
    if (!terminal_ || !shown_) return;
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
    shown_ = false;
}

}  // namespace prophet::cli
