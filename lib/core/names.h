// names.h: checks for names and paths from input files that become file names or land in generated scripts.
//
// Both throw a config error (exit 3) "<field> = <value>: <rule>; fix: ..." with the value's control characters
// shown escaped (\n, \r, \t, \xNN), so the message itself stays one line.
#pragma once

#include <string>

namespace prophet {

// A value written on one line of a generated file (a batch script's directive or command): no control characters
// (bytes 0x00-0x1f and 0x7f: a newline would start a new script line).
void check_single_line(const std::string& field, const std::string& value);

// A name used as a file name (a sweep's <name>-<stamp>.sbatch, <store dir>/clusters/<name>-<D>rank.toml): one
// line, non-empty, no path separator '/', no leading dot (so neither "." nor ".." nor a hidden file). Spaces,
// commas, quotes, '\' and other punctuation are allowed (on Linux a backslash is a file name character): the
// writers quote what they write.
void check_file_name(const std::string& field, const std::string& value);

// `value` with control characters escaped as \n, \r, \t or \xNN and backslashes doubled (for messages).
std::string escaped_for_message(const std::string& value);

}  // namespace prophet
