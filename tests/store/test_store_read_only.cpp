// Store::open_read_only and read_only_uri (lib/store/store_read_only.cpp), issue 26 item 6: a store that cannot be
// written is read, nothing is created beside it, and a write through it fails. The directory is made unwritable
// with `chattr +i`, which stops root too (chmod does not); where chattr is refused those cases skip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/store.h"
#include "store/store_impl.h"

namespace prophet {
namespace {

namespace fs = std::filesystem;

class StoreReadOnly : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "prophet_store_ro_XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        root_ = tmpl;
        dir_ = root_ / "a dir?#%";  // URI-special characters in the path
        fs::create_directories(dir_);
        db_ = (dir_ / "store.db").string();
        Store store = Store::open(db_);
        RunInfo info;
        info.experiment = "ro";
        info.command = "sweep";
        run_id_ = store.begin_run(info);
    }
    void TearDown() override {
        if (locked_) unlock();
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    // chattr +i on the file and its directory; false where refused
    bool lock() {
        locked_ = std::system(("chattr +i '" + db_ + "' '" + dir_.string() + "' 2>/dev/null").c_str()) == 0;
        return locked_;
    }
    void unlock() {
        (void)std::system(("chattr -i '" + db_ + "' '" + dir_.string() + "' 2>/dev/null").c_str());
        locked_ = false;
    }
    std::vector<std::string> entries() const {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
        return names;
    }
    fs::path root_, dir_;
    std::string db_, run_id_;
    bool locked_ = false;
};

int exit_code_of(const std::function<void()>& body, std::string* message) {
    try {
        body();
    } catch (const Error& e) {
        *message = e.what();
        return e.exit_code();
    }
    return 0;
}

TEST_F(StoreReadOnly, ReadsAStoreInAWritableDirectory) {
    Store store = Store::open_read_only(db_);
    ASSERT_EQ(store.list_runs("ro").size(), 1u);
    EXPECT_EQ(store.list_runs("ro")[0].run_id, run_id_);
    EXPECT_EQ(store_detail::read_only_uri(db_).substr(store_detail::read_only_uri(db_).size() - 8), "?mode=ro");
}

TEST_F(StoreReadOnly, ReadsAStoreInADirectoryNobodyMayWrite) {
    if (!lock()) GTEST_SKIP() << "chattr +i refused here";
    EXPECT_NE(store_detail::read_only_uri(db_).find("?immutable=1"), std::string::npos);
    const std::vector<std::string> before = entries();  // the store and the writer's run-lock directory
    {
        Store store = Store::open_read_only(db_);
        ASSERT_EQ(store.list_runs("ro").size(), 1u);
        EXPECT_EQ(store.integrity_check(), "ok");
    }
    EXPECT_EQ(entries(), before);  // no -wal or -shm made
    std::string message;
    EXPECT_EQ(exit_code_of([&] { Store::open(db_); }, &message), kExitDatabase) << "a writing open must still fail";
}

TEST_F(StoreReadOnly, AWriteThroughItFails) {
    Store store = Store::open_read_only(db_);
    RunInfo info;
    info.experiment = "ro";
    std::string message;
    EXPECT_EQ(exit_code_of([&] { store.begin_run(info); }, &message), kExitDatabase) << message;
    EXPECT_EQ(Store::open(db_).list_runs("ro").size(), 1u);
}

TEST_F(StoreReadOnly, RefusesWhatIsNoProphetStore) {
    const std::string missing = (dir_ / "missing.db").string(), text = (dir_ / "text.db").string(),
                      empty = (dir_ / "empty.db").string();
    std::ofstream(text) << "not a database, just text that is long enough to fill a header page\n";
    std::ofstream(empty).flush();
    for (const auto& [path, words] : std::vector<std::pair<std::string, std::string>>{
             {missing, "no such store file"}, {text, "not a SQLite database"}, {empty, "not a prophet store"}}) {
        std::string message;
        EXPECT_EQ(exit_code_of([&] { Store::open_read_only(path); }, &message), kExitDatabase) << path;
        EXPECT_NE(message.find(path), std::string::npos) << message;
        EXPECT_NE(message.find(words), std::string::npos) << message;
        EXPECT_EQ(message.find("writable"), std::string::npos) << message;
    }
    EXPECT_FALSE(fs::exists(missing)) << "a read-only open created the file";
}

}  // namespace
}  // namespace prophet
