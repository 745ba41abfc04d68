// `prophet profile --grid-passes N` (passes over the calibration's GEMM grid): a value outside [1, 16], or the flag
// without --calibrate, fails before the run (exit 3, the flag named) and writes no store. That the value reaches
// the grid: ValidateCli.CalibrateOverALinkTimesTheUnpacedTransport (1 pass) and CalibrateWritesTheOpsTables (the
// default, 2) read it back from the calibrated file.
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
    const char* says;   // what the error says besides the flag's name
};

class ProfileGridPasses : public prophet::testing::TempDirTest, public ::testing::WithParamInterface<Row> {};

}  // namespace

TEST_P(ProfileGridPasses, BadUseFailsBeforeTheRunWritingNothing) {
    const Row& row = GetParam();
    const auto r = prophet::testing::run_prophet("",
                                                 std::string("profile --config tests/fixtures/replay-2rank.toml ") +
                                                     row.flags + " --cluster-out '" + (dir_ / "c.toml").string() +
                                                     "' --set store.path='" + db_ + "'",
                                                 dir_);
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.err;
    EXPECT_NE(r.err.find("--grid-passes"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(row.says), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(db_)) << "a store was written";
    EXPECT_FALSE(std::filesystem::exists(dir_ / "c.toml")) << "a cluster file was written";
}

INSTANTIATE_TEST_SUITE_P(Rows, ProfileGridPasses,
                         ::testing::Values(Row{"zero", "--calibrate --grid-passes 0", "[1, 16]"},
                                           Row{"over", "--calibrate --grid-passes 17", "[1, 16]"},
                                           Row{"negative", "--calibrate --grid-passes -1", "[1, 16]"},
                                           Row{"without_calibrate", "--grid-passes 1",
                                               "only applies with --calibrate"}),
                         [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });
