// closest_name.h: the "did you mean" rule shared by every error that names an unknown key: the known name
// nearest a mistyped one by edit distance, when it is near enough to be a typo.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace prophet {

// Levenshtein distance: the fewest single-character insertions, deletions and substitutions from a to b.
size_t edit_distance(const std::string& a, const std::string& b);

// The name in `names` nearest `name`, if within max(3, |name| / 3) edits (the first of equals); "" if none is.
std::string closest_name(const std::string& name, const std::vector<std::string>& names);

}  // namespace prophet
