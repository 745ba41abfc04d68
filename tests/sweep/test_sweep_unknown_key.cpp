// An unknown [sweep] key's error lists, as its fix, every key the reader accepts: each row is one known key,
// and the message must name it (a table as [sweep.<key>]). A near miss is also named as the likely key.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "sweep/sweep.h"
#include "sweep_parse_error.h"

using namespace prophet;
using namespace prophet::sweep;
using prophet::testing::sweep_parse_error;

namespace {

const std::string kSweep =
    std::string(prophet::testing::kTiny) + "policies = [\"static\"]\nseeds = [1]\nno_such_key = 1\n";

class SweepUnknownKey : public ::testing::TestWithParam<const char*> {};

struct Typo {
    const char* line;   // an unknown key's line
    const char* meant;  // the key the message must suggest ("": none)
};
class SweepKeyTypo : public ::testing::TestWithParam<Typo> {};

}  // namespace

TEST_P(SweepUnknownKey, FixNamesEveryKnownKey) {
    const std::string message = sweep_parse_error(kSweep);
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

TEST_P(SweepKeyTypo, SuggestsTheNearestKnownKey) {
    std::string text = kSweep;
    text.replace(text.find("no_such_key = 1"), 15, GetParam().line);
    const std::string message = sweep_parse_error(text);
    ASSERT_NE(message.find("unknown key"), std::string::npos) << message;
    const std::string meant = GetParam().meant;
    if (meant.empty())
        EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
    else
        EXPECT_NE(message.find("did you mean \"" + meant + "\""), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Rows, SweepKeyTypo,
                         ::testing::Values(Typo{"truth_scal = 1", "truth_scale"}, Typo{"seed = [1]", "seeds"},
                                           Typo{"time_limit = 60", "time_limit_s"},
                                           Typo{"validate_clusters = \"c.toml\"", "validate_cluster"},
                                           Typo{"zzzzzzzzzzzz = 1", ""}),
                         [](const ::testing::TestParamInfo<Typo>& info) {
                             std::string out;
                             for (const char* c = info.param.line; *c && *c != ' '; ++c) out += *c;
                             return out;
                         });
