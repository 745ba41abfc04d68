// toml_text.h: a TOML node as the text an error message quotes ("[0.1, 1000.0]", "\"x\"", "{ a = 1 }").
//
// toml++'s own printer is not used for arrays and tables: its line-width estimate casts log10 of a float below 1
// to size_t, undefined behaviour the config fuzzer found (fuzz/corpus/config/regress-small-float-array).
// Scalars print as value_to_toml writes them, dates and times as toml++ does.
#pragma once

#include <string>

#include <toml++/toml.h>

namespace prophet {

std::string toml_node_text(const toml::node& node);

}  // namespace prophet
