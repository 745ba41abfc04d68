// enum_table.h: an enum's names written once, as a table of {value, name} pairs, and the three things read from
// it: the name of a value, the value of a name, and the error for a name not in the table ("must be a, b or c").
//
//   constexpr EnumName<Color> kColorNames[] = {{Color::kRed, "red"}, {Color::kBlue, "blue"}};
//   enum_name(kColorNames, Color::kRed)                          -> "red"
//   parse_enum(kColorNames, "x.color", "green", "--set x.color=red")
//       -> config error "x.color = green: must be red or blue; fix: --set x.color=red" (exit 3)
//
// A long enum whose values are 0, 1, ..., N-1 in order may name them by position instead (a table of names only):
//   constexpr const char* kShapeNames[] = {"circle", "square"};
//   enum_name(kShapeNames, Shape::kSquare) -> "square"
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/error.h"

namespace prophet {

template <typename Enum>
struct EnumName {
    Enum value;
    const char* name;
};

// The value named `name`, or nullopt when the table has no such name (names compare exactly).
template <typename Enum, size_t N>
std::optional<Enum> find_enum(const EnumName<Enum> (&table)[N], const std::string& name) {
    for (const EnumName<Enum>& entry : table)
        if (name == entry.name) return entry.value;
    return std::nullopt;
}

// The name of `value`; a value missing from the table is a bug (asserts).
template <typename Enum, size_t N>
const char* enum_name(const EnumName<Enum> (&table)[N], Enum value) {
    for (const EnumName<Enum>& entry : table)
        if (entry.value == value) return entry.name;
    PROPHET_ASSERT_MSG(false, "an enum value missing from its name table");
    return "";
}

// The table's names in order as prose: "a", "a or b", "a, b or c".
template <typename Enum, size_t N>
std::string enum_choices(const EnumName<Enum> (&table)[N]) {
    std::string choices;
    for (size_t i = 0; i < N; ++i) {
        if (i > 0) choices += i + 1 == N ? " or " : ", ";
        choices += table[i].name;
    }
    return choices;
}

// The value named `name`; otherwise a config error (exit 3) "<key> = <name>: must be <choices>; fix: <fix>".
template <typename Enum, size_t N>
Enum parse_enum(const EnumName<Enum> (&table)[N], const std::string& key, const std::string& name,
                const std::string& fix) {
    if (const std::optional<Enum> value = find_enum(table, name)) return *value;
    throw_config_error(key, name, "must be " + enum_choices(table), fix);
}

// ---- tables of names by position (the enum's values are 0..N-1)

// The name of `value`; a value past the table is a bug (asserts).
template <typename Enum, size_t N>
const char* enum_name(const char* const (&names)[N], Enum value) {
    const auto index = static_cast<size_t>(value);
    PROPHET_ASSERT_MSG(index < N, "an enum value missing from its name table");
    return index < N ? names[index] : "";
}

}  // namespace prophet
