// test_store_loss.cpp: a run whose rows never reach the store other processes read says so and fails with exit 5
// (issue 26 item 9): its -wal and -shm files are removed while it writes, as a cleanup script might.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "store/store.h"

namespace fs = std::filesystem;

namespace {

class StoreLoss : public prophet::testing::TempDirTest {};

// loss rows of the store's only run, read through a fresh Store (0 while the child creates the schema)
size_t recorded_losses(const std::string& db) {
    if (!fs::exists(db)) return 0;
    try {
        prophet::Store store = prophet::Store::open(db);
        const auto runs = store.list_runs();
        return runs.empty() ? 0 : store.get_metrics(runs[0].run_id, "loss").size();
    } catch (const prophet::Error&) {
        return 0;
    }
}

TEST_F(StoreLoss, TrainingRunWhoseWalIsRemovedExitsFive) {
    const std::string err = (dir_ / "stderr.txt").string();
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const std::string command = std::string("cd '") + PROPHET_SOURCE_DIR + "' && exec '" + PROPHET_BINARY +
                                    "' train --config experiments/train/skewed-4rank.toml --set train.steps=60 "
                                    "--set train.record_loads=false --set store.path=" +
                                    db_ + " >/dev/null 2>'" + err + "'";
        execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (recorded_losses(db_) < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const bool removed = fs::remove(db_ + "-wal") && fs::remove(db_ + "-shm");
    int status = 0;
    waitpid(pid, &status, 0);
    std::ifstream in(err);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(removed) << "the run ended before its files could be removed:\n" << text;
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), prophet::kExitDatabase) << text;
    EXPECT_NE(text.find("-wal was removed or replaced"), std::string::npos) << text;
    EXPECT_NE(text.find("rows are not all in"), std::string::npos) << text;
}

}  // namespace
