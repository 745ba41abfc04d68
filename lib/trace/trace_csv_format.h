// trace_csv_format.h: what the CSV trace's reader (trace_csv.cpp) and writer (trace_csv_write.cpp) share: the
// fixed lines of the format (docs/trace-format.md, section 6) and the escaping of the metadata's source; not part
// of lib/trace's interface (trace.h is).
#pragma once

#include <string>
#include <string_view>

namespace prophet::trace_csv {

inline constexpr std::string_view kVersionLine = "# prophet trace csv v1";
inline constexpr std::string_view kVersionPrefix = "# prophet trace csv v";
inline constexpr std::string_view kCountsColumns = "iteration,layer,device,expert,tokens";
inline constexpr std::string_view kTransitionsColumns = "iteration,layer,from_expert,to_expert,tokens";
inline constexpr std::string_view kTransitionsMarker = "transitions";

// The metadata line's source, unescaped: "\\" -> backslash, "\n" and "\r" -> newline and carriage return (any
// other backslash is kept as it is).
inline std::string unescape_source(std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
            const char next = text[i + 1];
            if (next == '\\' || next == 'n' || next == 'r') {
                out += next == '\\' ? '\\' : next == 'n' ? '\n' : '\r';
                ++i;
                continue;
            }
        }
        out += text[i];
    }
    return out;
}

// The source for the metadata line: backslash, newline and carriage return escaped as unescape_source reads them.
inline std::string escape_source(const std::string& source) {
    std::string out;
    for (char c : source) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else
            out += c;
    }
    return out;
}

}  // namespace prophet::trace_csv
