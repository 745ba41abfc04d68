// names.cpp: the name and path checks of names.h.
#include "core/names.h"

#include <cstdio>

#include "core/error.h"

namespace prophet {

namespace {

bool is_control(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

}  // namespace

std::string escaped_for_message(const std::string& value) {
    std::string out;
    for (char c : value) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (c == '\\')
            out += "\\\\";
        else if (is_control(c)) {
            char hex[8];
            std::snprintf(hex, sizeof(hex), "\\x%02x", static_cast<unsigned char>(c));
            out += hex;
        } else {
            out += c;
        }
    }
    return out;
}

void check_single_line(const std::string& field, const std::string& value) {
    for (char c : value)
        if (is_control(c))
            throw_config_error(field, "\"" + escaped_for_message(value) + "\"",
                               "must not contain control characters (newline, carriage return, tab, bytes below 0x20 "
                               "or 0x7f)",
                               "remove them; spaces and punctuation are fine");
}

void check_file_name(const std::string& field, const std::string& value) {
    check_single_line(field, value);
    const char* rule = nullptr;
    if (value.empty())
        rule = "must not be empty";
    else if (value.find('/') != std::string::npos)
        rule = "must not contain '/' (it is used as a file name)";
    else if (value[0] == '.')
        rule = "must not start with '.' (it is used as a file name: no \".\", \"..\" or hidden file)";
    if (rule)
        throw_config_error(field, "\"" + escaped_for_message(value) + "\"", rule,
                           "use letters, digits, spaces and punctuation other than /, e.g. \"my-sweep\"");
}

}  // namespace prophet
