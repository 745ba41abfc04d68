// worker.cpp: OrderedWorker (see worker.h).
#include "schedule/worker.h"

#include "core/error.h"

namespace prophet {

OrderedWorker::OrderedWorker(bool threaded) : threaded_(threaded) {
    if (threaded_) thread_ = std::thread([this] { loop(); });
}

OrderedWorker::~OrderedWorker() {
    if (!threaded_) return;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

int64_t OrderedWorker::submit(Task task) {
    const int64_t ticket = ++submitted_;
    if (!threaded_) {
        if (!error_) {
            try {
                task();
            } catch (...) {
                error_ = std::current_exception();
            }
        }
        finished_ = ticket;
        return ticket;
    }
    {
        std::lock_guard lock(mutex_);
        queue_.emplace_back(ticket, std::move(task));
    }
    cv_.notify_all();
    return ticket;
}

void OrderedWorker::wait(int64_t ticket) {
    PROPHET_ASSERT(ticket <= submitted_);
    std::unique_lock lock(mutex_, std::defer_lock);
    if (threaded_) {
        lock.lock();
        cv_.wait(lock, [&] { return finished_ >= ticket || error_; });
    }
    if (error_) std::rethrow_exception(error_);
}

void OrderedWorker::loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        auto [ticket, task] = std::move(queue_.front());
        queue_.pop_front();
        const bool skip = error_ != nullptr;
        lock.unlock();
        std::exception_ptr error;
        if (!skip) {
            try {
                task();
            } catch (...) {
                error = std::current_exception();
            }
        }
        lock.lock();
        if (error && !error_) error_ = error;
        finished_ = ticket;
        cv_.notify_all();
    }
}

}  // namespace prophet
