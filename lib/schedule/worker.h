// worker.h: OrderedWorker, one background thread that runs submitted tasks in submission order: the CPU
// analogue of a CUDA stream. submit() returns a ticket (the analogue of an event recorded after the task);
// wait(ticket) blocks until that task has finished and rethrows its error. The scheduler runs Trans/Agg on one
// (the communication stream: its thread drives the transfers' progress while the main thread computes) and the
// planner on another.
//
// threaded = false runs every task inline inside submit(), on the caller's thread: the unscheduled oracle with
// the same code path.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace prophet {

class OrderedWorker {
  public:
    using Task = std::function<void()>;
    explicit OrderedWorker(bool threaded);
    ~OrderedWorker();  // finishes the queued tasks (errors then are dropped), then joins
    OrderedWorker(const OrderedWorker&) = delete;
    OrderedWorker& operator=(const OrderedWorker&) = delete;

    // Tickets count from 1; 0 means "nothing" and wait(0) returns at once.
    int64_t submit(Task task);
    // Blocks until tasks 1..ticket have run. After a task threw, every later wait rethrows that error (the
    // tasks after it are skipped: a failed transfer leaves the rest of the step meaningless).
    void wait(int64_t ticket);
    void wait_all() { wait(submitted_); }
    bool threaded() const { return threaded_; }

  private:
    void loop();

    bool threaded_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::pair<int64_t, Task>> queue_;
    int64_t submitted_ = 0;  // written by the submitting thread only
    int64_t finished_ = 0;
    std::exception_ptr error_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace prophet
