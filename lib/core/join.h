// join.h: integers written as one line of text, for messages and generated scripts.
#pragma once

#include <string>
#include <vector>

namespace prophet {

// "3, 5, 8" for ({3, 5, 8}, ", "); "" for none.
inline std::string join_ints(const std::vector<int>& values, const char* separator) {
    std::string out;
    for (int v : values) {
        if (!out.empty()) out += separator;
        out += std::to_string(v);
    }
    return out;
}

}  // namespace prophet
