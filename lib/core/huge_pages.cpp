// huge_pages.cpp: huge_pages.h's allocation: an anonymous mapping trimmed to 2 MiB alignment, then madvise.
#include "core/huge_pages.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>

namespace prophet {

namespace {

std::atomic<size_t> g_bytes_in_use{0};

}  // namespace

size_t huge_pages_block_bytes(size_t bytes) {
    if (bytes < kHugePageMinBytes) return bytes;
    return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

size_t huge_pages_bytes_in_use() { return g_bytes_in_use.load(); }

// NOTE: mmap, not aligned_alloc: glibc serves a 2 MiB-aligned request above its mmap threshold from a mapping
// 2 MiB larger and keeps all of it, so each block would hold 2 MiB more address space (and malloc's statistics
// would count it). Mapping rounded + 2 MiB and unmapping the unaligned head and tail leaves exactly the block.
void* huge_pages_alloc(size_t bytes) {
    if (bytes < kHugePageMinBytes) return ::operator new(bytes);
    if (bytes > SIZE_MAX - 2 * kHugePageBytes) throw std::bad_alloc();
    const size_t rounded = huge_pages_block_bytes(bytes);
    void* mapped = mmap(nullptr, rounded + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<uintptr_t>(mapped);
    const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    if (aligned > start) munmap(mapped, aligned - start);
    const size_t tail = start + rounded + kHugePageBytes - (aligned + rounded);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
    void* block = reinterpret_cast<void*>(aligned);
    // only advice: a kernel without transparent huge pages (or in mode "never") keeps 4 KiB pages
    (void)madvise(block, rounded, MADV_HUGEPAGE);
    g_bytes_in_use += rounded;
    return block;
}

void huge_pages_free(void* p, size_t bytes) noexcept {
    if (p == nullptr) return;
    if (bytes < kHugePageMinBytes) {
        ::operator delete(p);
        return;
    }
    const size_t rounded = huge_pages_block_bytes(bytes);
    munmap(p, rounded);
    g_bytes_in_use -= rounded;
}

}  // namespace prophet
