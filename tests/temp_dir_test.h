// temp_dir_test.h: the fixture the CLI, sweep and fault tests share: a fresh temporary directory per test (removed
// afterwards) holding the test's store, checkpoints, written files and captured output.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

namespace prophet::testing {

class TempDirTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        // a TEST_P's names are "Instance/Suite" and "Case/param": one directory name, not a nested path (a nested
        // one would leave its parent behind in the temp directory)
        std::string name = std::string(info->test_suite_name()) + "-" + info->name();
        std::replace(name.begin(), name.end(), '/', '_');
        dir_ = std::filesystem::temp_directory_path() / ("prophet-" + std::to_string(getpid()) + "-" + name);
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        db_ = (dir_ / "store.db").string();
    }
    void TearDown() override {
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }
    std::filesystem::path dir_;
    std::string db_;  // dir_/store.db, not created
};

}  // namespace prophet::testing
