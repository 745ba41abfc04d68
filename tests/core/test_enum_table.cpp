// The enum name table (core/enum_table.h): names to values, values to names, and the error listing the choices.
#include <gtest/gtest.h>

#include <string>

#include "core/enum_table.h"
#include "core/error.h"

namespace prophet {
namespace {

enum class Shade { kLight, kMid, kDark };

constexpr EnumName<Shade> kShadeNames[] = {{Shade::kLight, "light"}, {Shade::kMid, "mid"}, {Shade::kDark, "dark"}};
constexpr EnumName<Shade> kOneName[] = {{Shade::kMid, "mid"}};
constexpr EnumName<Shade> kTwoNames[] = {{Shade::kLight, "light"}, {Shade::kDark, "dark"}};

struct NameCase {
    Shade value;
    const char* name;
};

const NameCase kShades[] = {{Shade::kLight, "light"}, {Shade::kMid, "mid"}, {Shade::kDark, "dark"}};

TEST(EnumTable, EveryNameRoundTripsThroughItsValue) {
    for (const NameCase& c : kShades) {
        EXPECT_STREQ(enum_name(kShadeNames, c.value), c.name);
        EXPECT_EQ(find_enum(kShadeNames, c.name), c.value) << c.name;
        EXPECT_EQ(parse_enum(kShadeNames, "ui.shade", c.name, "fix"), c.value) << c.name;
    }
}

// the same enum named by position (the form for long dense enums)
constexpr const char* kShadeNamesByPosition[] = {"light", "mid", "dark"};

TEST(EnumTable, NameByPositionIsTheEntryAtTheValue) {
    for (const NameCase& c : kShades) EXPECT_STREQ(enum_name(kShadeNamesByPosition, c.value), c.name);
}

TEST(EnumTable, UnknownNamesAreNotFound) {
    for (const char* name : {"", "Light", "light ", "darker", "mi"})
        EXPECT_FALSE(find_enum(kShadeNames, name).has_value()) << '"' << name << '"';
}

TEST(EnumTable, ChoicesReadAsProse) {
    EXPECT_EQ(enum_choices(kOneName), "mid");
    EXPECT_EQ(enum_choices(kTwoNames), "light or dark");
    EXPECT_EQ(enum_choices(kShadeNames), "light, mid or dark");
}

TEST(EnumTable, UnknownNameIsAConfigErrorListingTheChoices) {
    try {
        parse_enum(kShadeNames, "ui.shade", "pale", "--set ui.shade=mid");
        FAIL() << "parse_enum accepted an unknown name";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_STREQ(e.what(), "config error: ui.shade = pale: must be light, mid or dark; fix: --set ui.shade=mid");
    }
}

}  // namespace
}  // namespace prophet
