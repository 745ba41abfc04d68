// An unknown [sweep] key's error lists, as its fix, every key the reader accepts: each row is one known key,
// and the message must name it (a table as [sweep.<key>]).
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "core/error.h"
#include "sweep/sweep.h"

using namespace prophet;
using namespace prophet::sweep;

namespace {

const char* kSweep =
    "[sweep]\nname = \"t\"\nclusters = [\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
    "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\npolicies = [\"static\"]\nseeds = [1]\nno_such_key = 1\n";

// the error of kSweep (its unknown key), or "" if it was accepted
std::string unknown_key_error() {
    try {
        parse_sweep_string(kSweep, "t.toml");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

class SweepUnknownKey : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(SweepUnknownKey, FixNamesEveryKnownKey) {
    const std::string message = unknown_key_error();
    ASSERT_NE(message.find("sweep.no_such_key"), std::string::npos) << message;
    EXPECT_NE(message.find(GetParam()), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Rows, SweepUnknownKey,
                         ::testing::Values("name", "engine", "clusters", "traces", "policies", "seeds", "store",
                                           "match_devices", "train_config", "ranks", "validate_cluster", "command",
                                           "time_limit_s", "validate_oversubscribed", "calibrate_grid_passes",
                                           "truth_scale", "uncertainty", "[sweep.grid]", "[sweep.set]",
                                           "[sweep.variants]", "[sweep.calibrate_set]", "[sweep.slurm]"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             std::string name = info.param;
                             std::string out;
                             for (char c : name)
                                 if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') out += c;
                             return out;
                         });
