// progress.h: a progress line with ETA on stderr for long loops (prophet train / profile steps).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace prophet::cli {

// On a terminal: one line rewritten in place ("\r", cleared before anything else prints on it); piped: a plain
// line each time another tenth of the work is done, so logs stay short. ETA = time per item so far x items left.
class Progress {
public:
    // label: what is counted ("step"); total: items in all; first: items already done before this process
    // (a resumed run), left out of the rate
    Progress(std::string label, int64_t total, int64_t first = 0);
    void update(int64_t done);  // `done` items of `total` are finished
    void clear();               // terminal: erase the line (call before printing other lines)
    void finish();              // terminal: end the line with a newline

private:
    std::string text(int64_t done) const;
    std::string label_;
    int64_t total_, first_;
    int64_t last_ = 0;       // the last `done` shown
    int last_tenth_ = 0;     // piped: the last tenth printed
    bool terminal_ = false;
    bool shown_ = false;     // terminal: a line is on screen
    std::chrono::steady_clock::time_point start_;
};

// "1:05" / "12 s": seconds for people
std::string format_eta(double seconds);

}  // namespace prophet::cli
