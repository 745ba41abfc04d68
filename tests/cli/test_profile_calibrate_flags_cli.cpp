// `prophet profile`'s calibration flags, used wrongly, fail before the run (exit 3, the flag named) and write no
// store and no cluster file: --grid-passes N (passes over the calibration's GEMM grid) outside [1, 16] or without
// --calibrate, and --ops-shape (another shape's attention rate) with a bad key or value or without --calibrate.
// That --grid-passes reaches the grid: ValidateCli.CalibrateOverALinkTimesTheUnpacedTransport (1 pass) and
// CalibrateWritesTheOpsTables (the default, 2) read it back from the calibrated file, as the latter does the
// --ops-shape's attention rate.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../temp_dir_test.h"
#include "cli_util.h"
#include "core/error.h"

namespace {

struct Row {
    const char* name;
    const char* flags;  // after `profile --config tests/fixtures/replay-2rank.toml`
    const char* flag;   // the flag the error names
    const char* says;   // what the error says besides the flag's name
};

class ProfileCalibrateFlags : public prophet::testing::TempDirTest, public ::testing::WithParamInterface<Row> {};

}  // namespace

TEST_P(ProfileCalibrateFlags, BadUseFailsBeforeTheRunWritingNothing) {
    const Row& row = GetParam();
    const auto r = prophet::testing::run_prophet("",
                                                 std::string("profile --config tests/fixtures/replay-2rank.toml ") +
                                                     row.flags + " --cluster-out '" + (dir_ / "c.toml").string() +
                                                     "' --set store.path='" + db_ + "'",
                                                 dir_);
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.err;
    EXPECT_NE(r.err.find(row.flag), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(row.says), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(db_)) << "a store was written";
    EXPECT_FALSE(std::filesystem::exists(dir_ / "c.toml")) << "a cluster file was written";
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ProfileCalibrateFlags,
    ::testing::Values(
        Row{"zero", "--calibrate --grid-passes 0", "--grid-passes", "[1, 16]"},
        Row{"over", "--calibrate --grid-passes 17", "--grid-passes", "[1, 16]"},
        Row{"negative", "--calibrate --grid-passes -1", "--grid-passes", "[1, 16]"},
        Row{"without_calibrate", "--grid-passes 1", "--grid-passes", "only applies with --calibrate"},
        Row{"shape_unknown_key", "--calibrate --ops-shape C=96,X=3", "--ops-shape", "C, F, NH, V, E, T, B"},
        Row{"shape_zero", "--calibrate --ops-shape C=0", "--ops-shape", "a positive integer"},
        Row{"shape_without_calibrate", "--ops-shape C=96", "--ops-shape", "only applies with --calibrate"}),
    [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });
