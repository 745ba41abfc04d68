// core/huge_pages.h: blocks of at least 256 KiB are 2 MiB aligned and advised MADV_HUGEPAGE (the kernel's VmFlags
// "hg" on their mapping, read back from /proc/self/smaps); smaller ones are plain; contents survive a vector's growth.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "core/huge_pages.h"

namespace {

using prophet::huge_pages_alloc;
using prophet::huge_pages_free;
using prophet::kHugePageBytes;

// the VmFlags of the mapping of /proc/self/smaps that contains p ("" when none does)
std::string vm_flags_of(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto address = reinterpret_cast<uintptr_t>(p);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        uintptr_t start = 0, end = 0;
        char dash = 0;
        std::istringstream header(line);
        if (header >> std::hex >> start >> dash >> end && dash == '-') {
            inside = start <= address && address < end;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
            return line;
        }
    }
    return "";
}

bool advised_huge(const std::string& flags) { return flags.find(" hg") != std::string::npos; }

struct BlockCase {
    size_t bytes;
    bool huge;  // at least kHugePageMinBytes: aligned and advised
};

class HugePageBlock : public ::testing::TestWithParam<BlockCase> {};

TEST_P(HugePageBlock, AlignmentFollowsTheSize) {
    void* p = huge_pages_alloc(GetParam().bytes);
    const bool aligned = reinterpret_cast<uintptr_t>(p) % kHugePageBytes == 0;
    if (GetParam().huge) {
        EXPECT_TRUE(aligned);
    }
    huge_pages_free(p, GetParam().bytes);
}

TEST_P(HugePageBlock, LargeBlocksAreAdvisedHugePages) {
    if (vm_flags_of(this).empty()) GTEST_SKIP() << "no /proc/self/smaps VmFlags on this kernel";
    void* p = huge_pages_alloc(GetParam().bytes);
    static_cast<char*>(p)[0] = 1;  // the mapping exists before the first touch; touch anyway
    const std::string flags = vm_flags_of(p);
    huge_pages_free(p, GetParam().bytes);
    if (GetParam().huge) {
        EXPECT_TRUE(advised_huge(flags)) << flags;
    }
}

TEST_P(HugePageBlock, EveryByteIsUsable) {
    const size_t bytes = GetParam().bytes;
    auto* p = static_cast<unsigned char*>(huge_pages_alloc(bytes));
    for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 131u);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; ++i) wrong += p[i] != static_cast<unsigned char>(i * 131u);
    huge_pages_free(p, bytes);
    EXPECT_EQ(wrong, 0u);
}

// huge_pages_bytes_in_use counts what the memory estimate's check adds to malloc's statistics: the rounded block
TEST_P(HugePageBlock, BytesInUseCountTheRoundedBlock) {
    const size_t before = prophet::huge_pages_bytes_in_use();
    void* p = huge_pages_alloc(GetParam().bytes);
    const size_t held = prophet::huge_pages_bytes_in_use() - before;
    huge_pages_free(p, GetParam().bytes);
    EXPECT_EQ(held, GetParam().huge ? prophet::huge_pages_block_bytes(GetParam().bytes) : 0u);
    EXPECT_EQ(held % kHugePageBytes, 0u);
    EXPECT_EQ(prophet::huge_pages_bytes_in_use(), before);
}

INSTANTIATE_TEST_SUITE_P(Table, HugePageBlock,
                         ::testing::Values(BlockCase{1, false}, BlockCase{4096, false},
                                           BlockCase{prophet::kHugePageMinBytes - 1, false},
                                           BlockCase{prophet::kHugePageMinBytes, true},
                                           BlockCase{kHugePageBytes - 1, true}, BlockCase{kHugePageBytes, true},
                                           BlockCase{kHugePageBytes + 1, true}, BlockCase{(size_t{9} << 20) + 4, true}),
                         [](const auto& info) { return "Bytes" + std::to_string(info.param.bytes); });

// a RowsVector growing from 1 MiB to 6 MiB of floats keeps its first values and zero-fills the rest
TEST(RowsVector, GrowthKeepsTheContents) {
    prophet::RowsVector<float> v(size_t{1} << 18);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    v.resize(size_t{6} << 18);
    size_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != (i < (size_t{1} << 18) ? static_cast<float>(i) : 0.0f);
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
}

}  // namespace
