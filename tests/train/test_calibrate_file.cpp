// write_cluster_file (train/calibrate.h) and a symlink planted at its old fixed temporary name "<path>.tmp"
// (issue 26 item 3): the writer opened that name with create+truncate and overwrote the symlink's target. Now
// the temporary is unique and created exclusively (core/atomic_file.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "balance/cluster.h"
#include "train/calibrate.h"

using namespace prophet;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Calibration two_rank_calibration() {
    Calibration cal;
    cal.num_ranks = 2;
    cal.a2a_received_bytes = {1024, 1 << 20};
    cal.a2a_seconds = {1e-5, 1e-3};
    cal.p2p_bytes_per_s = cal.trans_bytes_per_s = cal.agg_bytes_per_s = 1e9;
    cal.expert_flops_per_s = 1e10;
    cal.fnec_s = cal.bnec_s = 1e-4;
    return cal;
}

}  // namespace

TEST(CalibratedClusterFile, SymlinkAtTheOldTemporaryNameIsLeftAlone) {
    const fs::path dir = fs::temp_directory_path() / ("prophet-calfile-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string path = (dir / "calibrated-2rank.toml").string();
    const std::string victim = (dir / "victim").string();
    { std::ofstream(victim) << "victim's bytes\n"; }
    fs::create_symlink(victim, path + ".tmp");
    const Calibration cal = two_rank_calibration();
    write_cluster_file(calibration_cluster(cal, 2), cal, path);
    EXPECT_EQ(read_all(victim), "victim's bytes\n");
    EXPECT_TRUE(fs::is_symlink(path + ".tmp"));
    EXPECT_FALSE(fs::is_symlink(path));
    EXPECT_EQ(load_cluster_file(path).num_devices, 2);
    fs::remove_all(dir);
}
