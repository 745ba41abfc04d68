// huge_pages.h: an allocator for the per-step activation buffers whose size follows the routing (the experts'
// [M, F] rows), so that their growth costs a few 2 MiB huge-page faults instead of one 4 KiB fault per page.
//
// Why: those buffers grow whenever a step routes more rows to a rank than any step before it. On the suite's
// 2-core VMs a first-touch 4 KiB page fault costs about 12 us, so one growth of a 4 MiB [M, F] buffer pair cost
// about 13 ms inside the expert forward (measured with getrusage around CpuExpertCompute::forward: about 1000
// faults in one call, against 1.6 ms for the same call without growth; a 1.2 MB pair, about 540 faults, 7-9 ms).
// Blocks of at least kHugePageMinBytes are rounded up to whole 2 MiB pages, 2 MiB aligned and advised
// MADV_HUGEPAGE, which transparent huge pages honour in the kernel's "madvise" and "always" modes; elsewhere (mode
// "never", no THP) they are ordinary pages and only alignment changes. A block wastes less than 2 MiB.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace prophet {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// from 64 pages (about 0.8 ms of 4 KiB faults here) a block is worth a huge page
inline constexpr size_t kHugePageMinBytes = size_t{256} << 10;

// bytes >= kHugePageMinBytes: rounded up to whole huge pages, an anonymous mapping of its own, 2 MiB aligned, advised
// MADV_HUGEPAGE; smaller: operator new. Throws std::bad_alloc like operator new. huge_pages_free takes the same bytes.
void* huge_pages_alloc(size_t bytes);
// the bytes huge_pages_alloc(bytes) takes: bytes below kHugePageMinBytes, else whole huge pages
size_t huge_pages_block_bytes(size_t bytes);
// the bytes of huge-page blocks this process holds now (mapped outside malloc, so mallinfo2 does not count them)
size_t huge_pages_bytes_in_use();
void huge_pages_free(void* p, size_t bytes) noexcept;

template <typename T>
struct HugePageAllocator {
    using value_type = T;
    HugePageAllocator() = default;
    template <typename U>
    HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
    T* allocate(size_t n) {
        if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(huge_pages_alloc(n * sizeof(T)));
    }
    void deallocate(T* p, size_t n) noexcept { huge_pages_free(p, n * sizeof(T)); }
    template <typename U>
    bool operator==(const HugePageAllocator<U>&) const noexcept {
        return true;
    }
};

// a vector for buffers of rows that grow with the routing ([M, F] activations)
template <typename T>
using RowsVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace prophet
