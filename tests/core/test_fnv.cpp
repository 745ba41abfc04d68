// core/fnv.h: Fnv1a::bytes is the standard 64-bit FNV-1a (its published test vectors); word() folds a 64-bit word
// in one step.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/fnv.h"

namespace prophet {
namespace {

struct Vector {
    const char* name;
    std::string text;
    uint64_t hash;
};

class Fnv1aBytes : public ::testing::TestWithParam<Vector> {};

TEST_P(Fnv1aBytes, MatchesThePublishedVector) {
    Fnv1a f;
    f.bytes(GetParam().text.data(), GetParam().text.size());
    EXPECT_EQ(f.h, GetParam().hash);
}

INSTANTIATE_TEST_SUITE_P(Table, Fnv1aBytes,
                         ::testing::Values(Vector{"empty", "", 0xcbf29ce484222325ull},
                                           Vector{"a", "a", 0xaf63dc4c8601ec8cull},
                                           Vector{"foobar", "foobar", 0x85944171f73967e8ull}),
                         [](const ::testing::TestParamInfo<Vector>& info) { return std::string(info.param.name); });

TEST(Fnv1aWord, IsOneStepOfTheWholeWord) {
    Fnv1a f, g;
    f.word(uint64_t{0x61});  // a word of value 'a' steps like the byte 'a'
    g.bytes("a", 1);
    EXPECT_EQ(f.h, g.h);
    Fnv1a x, y;
    x.word(1.0);
    y.word(2.0);
    EXPECT_NE(x.h, y.h);
}

}  // namespace
}  // namespace prophet
