// parallel.h: an index loop spread over a few threads, for items that are independent and whose results must not
// depend on how many threads ran them (each item writes only its own outputs; per-thread scratch via `worker`).
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace prophet {

// the threads a loop uses when not told: the machine's hardware threads (at least 1)
inline int hardware_threads() {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

namespace parallel_detail {

// The loop of both parallel_for overloads: the k-th index started is index_at(k), k = 0 .. n-1.
template <class IndexAt>
void run_indices(int n, int workers, IndexAt index_at, const std::function<void(int index, int worker)>& fn) {
    const int threads = std::max(1, std::min(workers, n));
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::mutex guard;
    int failed_index = n;
    std::exception_ptr error;
    auto run = [&](int worker) {
        while (!failed.load()) {
            const int k = next.fetch_add(1);
            if (k >= n) return;
            const int i = index_at(k);
            try {
                fn(i, worker);
            } catch (...) {
                const std::lock_guard<std::mutex> lock(guard);
                if (i < failed_index) failed_index = i, error = std::current_exception();
                failed = true;
            }
        }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < threads; ++w) {
        try {
            pool.emplace_back(run, w);
        } catch (const std::system_error&) {
            break;
        }
    }
    run(0);
    for (std::thread& t : pool) t.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace parallel_detail

// Calls fn(index, worker) once for every index in [0, n), starting them in increasing order, on up to `workers`
// threads (the caller's among them; worker in [0, workers)); workers <= 1 runs them in order on the caller's thread.
// After an index throws no new one starts; once the started ones end, the exception of the lowest index that threw
// is rethrown. If the system refuses a thread, the loop runs on the threads it has.
inline void parallel_for(int n, int workers, const std::function<void(int index, int worker)>& fn) {
    parallel_detail::run_indices(
        n, workers, [](int k) { return k; }, fn);
}

// The same over the indices of `order` (a permutation of [0, order.size())), started in that order (e.g. the
// longest first); the exception rethrown is still that of the lowest index that threw.
inline void parallel_for(const std::vector<int>& order, int workers,
                         const std::function<void(int index, int worker)>& fn) {
    parallel_detail::run_indices(
        static_cast<int>(order.size()), workers, [&order](int k) { return order[k]; }, fn);
}

}  // namespace prophet
