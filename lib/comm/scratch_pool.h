// scratch_pool.h: reusable host buffers for the communicators' temporaries (the receive buffers of a subset
// reduce, the reduce-scatter chunks of MPI's deterministic all-reduce).
//
// Why: a buffer allocated per call is, above glibc's mmap threshold (128 KiB .. 32 MiB, moving), fresh pages every
// call, and on a VM each first touch is a page fault of several microseconds: a 1.2 MB expert gradient's receive
// buffer and accumulator cost milliseconds per Agg, far more than moving the bytes (docs/validation-heldout.md
// "Why it fails"). A buffer leased here is returned on release and handed out again, so a step's collectives
// touch the same pages every step.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace prophet {

class ScratchPool {
  public:
    // One leased buffer of at least the asked bytes; back to its pool when the lease ends. Move-only.
    class Lease {
      public:
        Lease() = default;
        Lease(Lease&& other) noexcept;
        Lease& operator=(Lease&& other) noexcept;
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease();
        std::byte* data() const { return data_; }
        template <typename T>
        T* as() const {
            return reinterpret_cast<T*>(data_);
        }
        size_t capacity() const { return capacity_; }

      private:
        friend class ScratchPool;
        void release();
        ScratchPool* pool_ = nullptr;
        std::byte* data_ = nullptr;
        size_t capacity_ = 0;
    };

    ScratchPool() = default;
    ScratchPool(const ScratchPool&) = delete;
    ScratchPool& operator=(const ScratchPool&) = delete;

    // A buffer of >= bytes (contents unspecified), aligned for any scalar type: the smallest free one that fits,
    // else a new one (a free buffer too small for the request is dropped in its place, so the free list does not
    // fill with sizes no caller asks for any more). Thread-safe.
    Lease acquire(size_t bytes);
    // leases handed out so far, buffers allocated so far (a steady caller stops adding to it), and free now
    size_t acquisitions() const;
    size_t allocations() const;
    size_t free_buffers() const;

  private:
    struct Buffer {
        std::unique_ptr<std::byte[]> data;
        size_t capacity = 0;
    };
    void give_back(std::byte* data, size_t capacity);

    mutable std::mutex mutex_;
    std::vector<Buffer> free_;
    std::vector<Buffer> leased_;  // owned while leased, found by address on give_back
    size_t acquisitions_ = 0, allocations_ = 0;
};

// The process's pool for communication scratch (every communicator of the process shares it)
ScratchPool& comm_scratch_pool();

}  // namespace prophet
