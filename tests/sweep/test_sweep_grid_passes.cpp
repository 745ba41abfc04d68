// [sweep] calibrate_grid_passes: the calibration child's `prophet profile --grid-passes` (engine real, with
// validate_cluster = "calibrate" only); an integer in [1, 16]. The child's use of it: SweepRealCli's calibration
// tests read it back from the calibrated cluster file.
#include <gtest/gtest.h>

#include <string>

#include "sweep/sweep.h"
#include "sweep_parse_error.h"

using namespace prophet;
using namespace prophet::sweep;
using prophet::testing::sweep_parse_error;

namespace {

const char* kCalibrating =
    "[sweep]\nname = \"r\"\nengine = \"real\"\ntrain_config = \"experiments/train/skewed-4rank.toml\"\n"
    "policies = [\"static\"]\nseeds = [1]\nranks = [2]\nvalidate_cluster = \"calibrate\"\n";
const char* kNotCalibrating =
    "[sweep]\nname = \"r\"\nengine = \"real\"\ntrain_config = \"experiments/train/skewed-4rank.toml\"\n"
    "policies = [\"static\"]\nseeds = [1]\nranks = [2]\n";
const std::string kSimEngine = std::string(prophet::testing::kTiny) + "policies = [\"static\"]\nseeds = [1]\n";

struct Row {
    const char* name;
    const char* head;   // the sweep file before the line
    const char* value;  // calibrate_grid_passes = <value> ("": no line)
    int passes;         // SweepSpec::calibrate_grid_passes; -1: a config error
    const char* says;   // with -1: what the error must say besides the key
};

class SweepGridPasses : public ::testing::TestWithParam<Row> {};

}  // namespace

TEST_P(SweepGridPasses, IsReadOrNamesTheKey) {
    const Row& row = GetParam();
    std::string text = row.head;
    if (*row.value) text += std::string("calibrate_grid_passes = ") + row.value + "\n";
    if (row.passes >= 0) {
        EXPECT_EQ(parse_sweep_string(text, "r.toml").calibrate_grid_passes, row.passes);
        return;
    }
    const std::string error = sweep_parse_error(text);
    EXPECT_NE(error.find("sweep.calibrate_grid_passes"), std::string::npos) << "accepted or another key: " << error;
    EXPECT_NE(error.find(row.says), std::string::npos) << error;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, SweepGridPasses,
    ::testing::Values(Row{"unset", kCalibrating, "", 0, ""}, Row{"one", kCalibrating, "1", 1, ""},
                      Row{"most", kCalibrating, "16", 16, ""}, Row{"zero", kCalibrating, "0", -1, "[1, 16]"},
                      Row{"over", kCalibrating, "17", -1, "[1, 16]"},
                      Row{"fraction", kCalibrating, "1.5", -1, "[1, 16]"},
                      Row{"text", kCalibrating, "\"1\"", -1, "[1, 16]"},
                      Row{"no_calibration", kNotCalibrating, "1", -1, "validate_cluster = \"calibrate\""},
                      Row{"sim_engine", kSimEngine.c_str(), "1", -1, "engine = \"real\""}),
    [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });
