// test_verify_recorded.cpp: Store::verify_recorded, the read-back at the end of a run or sweep (issue 26 item 9).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "store/store.h"

namespace prophet {
namespace {

using testing::TempDirTest;

class VerifyRecorded : public TempDirTest {
  protected:
    std::string recorded_run(Store& store) {
        RunInfo info;
        info.experiment = "e";
        info.command = "train";
        const std::string id = store.begin_run(info);
        store.put_metric(id, "loss", 0, 2.5);
        store.put_event(id, 0, 0, "info", "note", "x", "");
        return id;
    }
};

TEST_F(VerifyRecorded, RowsThisConnectionWroteAreThereForAFreshOne) {
    Store store = Store::open(db_);
    const std::string id = recorded_run(store);
    store.finish_run(id, "finished", 0, "");
    EXPECT_TRUE(store.verify_recorded({id}).empty());
    EXPECT_NO_THROW(require_recorded(store, {id}, "run " + id));
}

TEST_F(VerifyRecorded, ARunThatIsNotThereIsAProblem) {
    Store store = Store::open(db_);
    recorded_run(store);
    const std::vector<std::string> problems = store.verify_recorded({"ffffffffffffffff"});
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("run ffffffffffffffff is not in"), std::string::npos) << problems[0];
}

TEST_F(VerifyRecorded, RemovedWalAndShmFailWithExitFive) {
    Store store = Store::open(db_);
    const std::string id = recorded_run(store);
    ASSERT_TRUE(std::filesystem::remove(db_ + "-wal"));
    ASSERT_TRUE(std::filesystem::remove(db_ + "-shm"));
    store.put_metric(id, "loss", 1, 2.4);
    store.finish_run(id, "finished", 0, "");
    EXPECT_FALSE(store.verify_recorded({id}).empty());
    try {
        require_recorded(store, {id}, "run " + id);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitDatabase);
        EXPECT_NE(std::string(e.what()).find(db_ + "-wal was removed or replaced"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace prophet
