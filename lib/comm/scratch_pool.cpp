// scratch_pool.cpp: see scratch_pool.h.
#include "comm/scratch_pool.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace prophet {

ScratchPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), data_(std::exchange(other.data_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)) {}

ScratchPool::Lease& ScratchPool::Lease::operator=(Lease&& other) noexcept {
    if (this != &other) {
        release();
        pool_ = std::exchange(other.pool_, nullptr);
        data_ = std::exchange(other.data_, nullptr);
        capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
}

ScratchPool::Lease::~Lease() { release(); }

void ScratchPool::Lease::release() {
    if (pool_ != nullptr) pool_->give_back(data_, capacity_);
    pool_ = nullptr;
    data_ = nullptr;
    capacity_ = 0;
}

ScratchPool::Lease ScratchPool::acquire(size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    std::lock_guard lock(mutex_);
    ++acquisitions_;
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->capacity >= bytes && (best == free_.end() || it->capacity < best->capacity)) best = it;
    Buffer buffer;
    if (best != free_.end()) {
        buffer = std::move(*best);
        free_.erase(best);
    } else {
        if (!free_.empty()) {  // drop the smallest free buffer: it fits no request as large as this one
            auto smallest = std::min_element(free_.begin(), free_.end(),
                                             [](const Buffer& a, const Buffer& b) { return a.capacity < b.capacity; });
            free_.erase(smallest);
        }
        buffer.data = std::make_unique_for_overwrite<std::byte[]>(bytes);
        buffer.capacity = bytes;
        ++allocations_;
    }
    Lease lease;
    lease.pool_ = this;
    lease.data_ = buffer.data.get();
    lease.capacity_ = buffer.capacity;
    leased_.push_back(std::move(buffer));
    return lease;
}

void ScratchPool::give_back(std::byte* data, size_t capacity) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(leased_.begin(), leased_.end(), [&](const Buffer& b) { return b.data.get() == data; });
    PROPHET_ASSERT_MSG(it != leased_.end() && it->capacity == capacity, "ScratchPool: a lease of another pool");
    free_.push_back(std::move(*it));
    leased_.erase(it);
}

size_t ScratchPool::acquisitions() const {
    std::lock_guard lock(mutex_);
    return acquisitions_;
}

size_t ScratchPool::allocations() const {
    std::lock_guard lock(mutex_);
    return allocations_;
}

size_t ScratchPool::free_buffers() const {
    std::lock_guard lock(mutex_);
    return free_.size();
}

ScratchPool& comm_scratch_pool() {
    static ScratchPool pool;
    return pool;
}

}  // namespace prophet
