// The [ops] section's gemm_grid_passes (sim/op_model.h GemmGrid::passes: how many passes over the GEMM grid the
// calibration timed, `prophet profile --grid-passes`): written when known, read back, absent in older files, and a
// value outside [1, kMaxGemmGridPasses] or not an integer names the field.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "op_test_util.h"
#include "sim/op_model.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

struct PassesRow {
    const char* name;
    const char* line;  // the gemm_grid_passes line added after the grid's axes ("": none)
    int passes;        // what load_op_tables reads; -1: it must fail naming ops.gemm_grid_passes
};

class OpTablesGridPasses : public prophet::testing::TempDirTest, public ::testing::WithParamInterface<PassesRow> {};
class OpTablesGridPassesWrite : public prophet::testing::TempDirTest {};

// The unit tables' section (written without the line: passes 0) with `line` inserted after the K axis.
std::string section_with(const std::string& line) {
    std::string text = op_tables_to_toml(test_util::unit_tables());
    const std::string axis = "gemm_grid_k = [32, 128]\n";
    const size_t at = text.find(axis);
    EXPECT_NE(at, std::string::npos) << text;
    EXPECT_EQ(text.find("gemm_grid_passes"), std::string::npos) << "passes 0 is not written";
    return text.insert(at + axis.size(), line);
}

}  // namespace

TEST_P(OpTablesGridPasses, IsReadBackOrNamesTheField) {
    const PassesRow& row = GetParam();
    const std::string path = (dir_ / "c.toml").string();
    std::ofstream(path) << section_with(row.line);
    if (row.passes >= 0) {
        EXPECT_EQ(load_op_tables(path).gemm.passes, row.passes);
        return;
    }
    try {
        load_op_tables(path);
        ADD_FAILURE() << "accepted: " << row.line;
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("ops.gemm_grid_passes"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("[1, 16]"), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Rows, OpTablesGridPasses,
                         ::testing::Values(PassesRow{"absent", "", 0}, PassesRow{"one", "gemm_grid_passes = 1\n", 1},
                                           PassesRow{"most", "gemm_grid_passes = 16\n", 16},
                                           PassesRow{"zero", "gemm_grid_passes = 0\n", -1},
                                           PassesRow{"over", "gemm_grid_passes = 17\n", -1},
                                           PassesRow{"fraction", "gemm_grid_passes = 1.5\n", -1},
                                           PassesRow{"text", "gemm_grid_passes = \"2\"\n", -1}),
                         [](const ::testing::TestParamInfo<PassesRow>& info) { return std::string(info.param.name); });

// A grid timed in N passes is written with N and read back as N.
TEST_F(OpTablesGridPassesWrite, KnownPassesRoundTrip) {
    OpTables in = test_util::unit_tables();
    in.gemm.passes = 3;
    const std::string path = (dir_ / "c.toml").string();
    std::ofstream(path) << op_tables_to_toml(in);
    EXPECT_EQ(load_op_tables(path).gemm.passes, 3);
}
