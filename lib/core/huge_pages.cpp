// huge_pages.cpp: huge_pages.h's allocation (aligned_alloc + madvise).
#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>

namespace prophet {

namespace {

size_t whole_huge_pages(size_t bytes) { return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }

}  // namespace

void* huge_pages_alloc(size_t bytes) {
    if (bytes < kHugePageMinBytes) return ::operator new(bytes);
    if (bytes > static_cast<size_t>(-1) - kHugePageBytes) throw std::bad_alloc();
    const size_t rounded = whole_huge_pages(bytes);
    void* p = std::aligned_alloc(kHugePageBytes, rounded);
    if (p == nullptr) throw std::bad_alloc();
    // NOTE: only advice: a kernel without transparent huge pages (or in mode "never") keeps 4 KiB pages
    (void)madvise(p, rounded, MADV_HUGEPAGE);
    return p;
}

void huge_pages_free(void* p, size_t bytes) noexcept {
    if (p == nullptr) return;
    if (bytes < kHugePageMinBytes) {
        ::operator delete(p);
        return;
    }
    std::free(p);
}

}  // namespace prophet
