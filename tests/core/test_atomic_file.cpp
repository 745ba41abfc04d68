// AtomicFile (core/atomic_file.h): a unique temporary created exclusively next to the target, renamed over it on
// commit (issue 26 item 3).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/atomic_file.h"
#include "core/error.h"

namespace prophet {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() / ("prophet-atomic-" + std::to_string(::getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        target_ = (dir_ / "out.txt").string();
    }
    void TearDown() override { fs::remove_all(dir_); }
    static std::string read(const std::string& path) {
        std::ifstream in(path);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
    fs::path dir_;
    std::string target_;
};

TEST_F(AtomicFileTest, CommitReplacesTheTargetAndLeavesNoTemporary) {
    write_file_atomically(target_, "old\n");
    write_file_atomically(target_, "new\n");
    EXPECT_EQ(read(target_), "new\n");
    EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, TemporaryIsUniqueHiddenAndNextToTheTarget) {
    AtomicFile a(target_), b(target_);
    EXPECT_NE(a.temp_path(), b.temp_path());
    EXPECT_EQ(fs::path(a.temp_path()).parent_path(), dir_);
    EXPECT_EQ(fs::path(a.temp_path()).filename().string().rfind(".out.txt.tmp-", 0), 0u) << a.temp_path();
}

TEST_F(AtomicFileTest, WithoutCommitTheTargetKeepsItsContent) {
    write_file_atomically(target_, "old\n");
    {
        AtomicFile file(target_);
        file.write("half");
    }
    EXPECT_EQ(read(target_), "old\n");
    EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, SymlinkedTargetIsReplacedNotFollowed) {
    const std::string victim = (dir_ / "victim").string();
    write_file_atomically(victim, "victim\n");
    fs::create_symlink(victim, target_);
    write_file_atomically(target_, "mine\n");
    EXPECT_EQ(read(victim), "victim\n");
    EXPECT_FALSE(fs::is_symlink(target_));
    EXPECT_EQ(read(target_), "mine\n");
}

TEST_F(AtomicFileTest, MissingDirectoryIsAnInputErrorNamingThePath) {
    const std::string path = (dir_ / "no-such-dir" / "out.txt").string();
    try {
        write_file_atomically(path, "x");
        FAIL() << "wrote into a missing directory";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace prophet
