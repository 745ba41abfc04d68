// sweep_parse_error.h: the message parse_sweep_string raises for a sweep file's text, for the tests that check
// what a bad file is told, and the smallest sweep head they extend.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "sweep/sweep.h"

namespace prophet::testing {

// A sim sweep's [sweep] head: a name, one cluster and one trace; the tests add policies, seeds and their keys.
inline constexpr const char* kTiny =
    "[sweep]\nname = \"t\"\nclusters = [\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
    "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\n";

// The error of parsing `text` as a sweep file, or "" when it parses. A raised error must be a configuration error
// (exit code 3), the code every bad sweep file exits with.
inline std::string sweep_parse_error(const std::string& text) {
    try {
        sweep::parse_sweep_string(text, "t.toml");
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig) << e.what();
        return e.what();
    }
    return "";
}

}  // namespace prophet::testing
