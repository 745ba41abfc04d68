// Cluster files: every shipped file loads with sane values; bad files are refused naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../temp_dir_test.h"
#include "balance/cluster.h"
#include "core/error.h"

using namespace prophet;

TEST(Cluster, ShippedFilesLoad) {
    int files = 0;
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters")) {
        const ClusterSpec c = load_cluster_file(entry.path().string());
        SCOPED_TRACE(entry.path().string());
        EXPECT_GT(c.num_devices, 0);
        EXPECT_EQ(c.num_devices % c.devices_per_node, 0);
        EXPECT_GT(c.compute_flops, 1e9);  // cpu-local: tens of GFLOP/s
        ASSERT_FALSE(c.a2a_bandwidth.empty());
        for (size_t i = 1; i < c.a2a_bandwidth.size(); ++i)
            EXPECT_GT(c.a2a_bandwidth[i].max_message_bytes, c.a2a_bandwidth[i - 1].max_message_bytes);
        EXPECT_GT(c.trans_bytes_per_s, 0);
        ++files;
    }
    EXPECT_GE(files, 6);
    const ClusterSpec h = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/hpwnv-16.toml");
    EXPECT_EQ(h.num_devices, 16);
    EXPECT_DOUBLE_EQ(h.a2a_bytes_per_s(100.0 * 1024), 6e9 / 8);   // <= 128 KiB step
    EXPECT_DOUBLE_EQ(h.a2a_bytes_per_s(200.0 * 1024), 16e9 / 8);  // <= 256 KiB
    EXPECT_DOUBLE_EQ(h.a2a_bytes_per_s(64.0 * 1024 * 1024), 100e9 / 8);
    EXPECT_DOUBLE_EQ(h.link_bytes_per_s(0, 3), 96e9 / 8);   // same node
    EXPECT_DOUBLE_EQ(h.link_bytes_per_s(3, 4), 100e9 / 8);  // across nodes
}

TEST(Cluster, RoundTripThroughToml) {
    const ClusterSpec a = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/hpwnv-16.toml");
    const std::string path = std::filesystem::temp_directory_path() / "prophet-cluster-roundtrip.toml";
    std::ofstream(path) << cluster_to_toml(a);
    const ClusterSpec b = load_cluster_file(path);
    EXPECT_EQ(b.num_devices, a.num_devices);
    EXPECT_NEAR(b.compute_flops, a.compute_flops, 1e-6 * a.compute_flops);
    ASSERT_EQ(b.a2a_bandwidth.size(), a.a2a_bandwidth.size());
    EXPECT_NEAR(b.a2a_bandwidth[1].bytes_per_s, a.a2a_bandwidth[1].bytes_per_s, 1.0);
    std::filesystem::remove(path);
}

// A calibrated cluster file (cluster_to_toml) carries the name of the cluster it was made from as given: whatever
// the name holds, the file loads back with that name and the same numbers (found by fuzz_cluster: a name with a
// newline wrote a file its own reader refused; with `"` and a newline it could write a key).
// (ctest runs each case as its own process, side by side: each writes into its own directory)
class ClusterNameRoundTrip : public prophet::testing::TempDirTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(ClusterNameRoundTrip, LoadsBackWithTheSameNameAndNumbers) {
    ClusterSpec a = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/hpwnv-16.toml");
    a.name = GetParam();
    const std::string path = (dir_ / "cluster.toml").string();
    std::ofstream(path) << cluster_to_toml(a);
    ClusterSpec b;
    ASSERT_NO_THROW(b = load_cluster_file(path)) << cluster_to_toml(a);
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.num_devices, a.num_devices);
    EXPECT_NEAR(b.compute_flops, a.compute_flops, 1e-6 * a.compute_flops);
    EXPECT_NEAR(b.trans_bytes_per_s, a.trans_bytes_per_s, 1e-6 * a.trans_bytes_per_s);
}

INSTANTIATE_TEST_SUITE_P(HostileNames, ClusterNameRoundTrip,
                         ::testing::Values("2xH100 \"rails\"", "line\nbreak", "back\\slash\\", "cr\rhere",
                                           "x\"\ncompute_tflop_s = 1e9\n# \"", "bell\007 and del\177"));

TEST(Cluster, BadFilesNameTheKey) {
    const std::string path = std::filesystem::temp_directory_path() / "prophet-cluster-bad.toml";
    auto expect_error = [&](const std::string& text, const std::string& needle) {
        std::ofstream(path) << text;
        try {
            load_cluster_file(path);
            ADD_FAILURE() << "accepted: " << text;
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), kExitConfig);
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    const std::string ok = "[cluster]\nnum_devices = 4\ncompute_tflop_s = 1.0\ntrans_gbit_s = 10.0\n";
    expect_error(ok, "cluster.a2a_gbit_s");  // required key missing
    expect_error(ok + "a2a_gbit_s = [1.0, 2.0]\n", "cluster.a2a_max_message_kib");
    expect_error(ok + "a2a_gbit_s = [1.0, 2.0, 3.0]\na2a_max_message_kib = [8.0, 4.0]\n", "ascending");
    expect_error(ok + "a2a_gbit_s = [1.0]\ndevices_per_node = 3\n", "cluster.devices_per_node");
    expect_error(ok + "a2a_gbit_s = [-1.0]\n", "cluster.a2a_gbit_s");
    expect_error(ok + "a2a_gbit_s = [1.0]\nbandwidth = 3\n", "unknown key");
    std::filesystem::remove(path);
}
