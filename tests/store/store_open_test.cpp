// store_open_test.cpp: opening the SQLite store: refused files and locations, an empty or moved file, concurrent
// first opens, and two handles or processes writing.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "store/store.h"
#include "store_test_fixture.h"

namespace prophet {
namespace {

namespace fs = std::filesystem;

TEST_F(StoreTest, RefusesForeignFile) {
    fs::create_directories(fs::path(db_path_).parent_path());
    {
        std::ofstream out(db_path_);
        out << "step,loss\n0,2.5\n1,2.4\n";
    }
    expect_refused(db_path_, "not a SQLite database");
    // left untouched
    std::ifstream in(db_path_);
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first, "step,loss");
}

TEST_F(StoreTest, RefusesOtherApplicationId) {
    std::string path = (dir_ / "other.db").string();
    raw_exec(path, "CREATE TABLE t(x); PRAGMA application_id=1234;");
    expect_refused(path, "not a prophet database (application_id=0x000004d2");
    // a SQLite file with tables but no application_id is foreign too
    std::string plain = (dir_ / "plain.db").string();
    raw_exec(plain, "CREATE TABLE t(x);");
    expect_refused(plain, "not a prophet database");
}

TEST_F(StoreTest, RefusesNewerSchema) {
    { Store store = Store::open(db_path_); }
    raw_exec(db_path_, "PRAGMA user_version=99;");
    expect_refused(db_path_, "newer prophet (schema 99 > 2)");
}

TEST_F(StoreTest, RefusesUnwritableLocation) {
    std::string blocker = (dir_ / "blocker").string();
    {
        std::ofstream out(blocker);
        out << "x";
    }
    expect_refused(blocker + "/sub/prophet.db", "cannot create directory");
    expect_refused(dir_.string(), "is a directory");
}

TEST_F(StoreTest, EmptyFileGetsSchema) {
    fs::create_directories(fs::path(db_path_).parent_path());
    { std::ofstream out(db_path_); }
    ASSERT_EQ(fs::file_size(db_path_), 0u);
    Store store = Store::open(db_path_);
    EXPECT_EQ(query_int("PRAGMA application_id"), 0x50525054);
    EXPECT_EQ(query_int("SELECT count(*) FROM sqlite_schema WHERE name='runs'"), 1);
    // an empty SQLite file (valid header, no tables) is adopted too
    std::string empty_sqlite = (dir_ / "empty.db").string();
    raw_exec(empty_sqlite, "PRAGMA user_version=0;");
    EXPECT_NO_THROW(Store::open(empty_sqlite));
}

TEST_F(StoreTest, ConcurrentFirstOpensCreateTheSchemaOnce) {
    // Separate processes (forked before any connection exists) race to create the same new file.
    for (int round = 0; round < 10; ++round) {
        std::string path = (dir_ / ("race" + std::to_string(round)) / "prophet.db").string();
        std::vector<pid_t> children;
        for (int i = 0; i < 6; ++i) {
            pid_t pid = fork();
            ASSERT_GE(pid, 0);
            if (pid == 0) {
                int code = 0;
                try {
                    Store store = Store::open(path);
                    store.begin_run(sample_info());
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "child: %s\n", e.what());
                    code = 1;
                }
                _exit(code);
            }
            children.push_back(pid);
        }
        for (pid_t pid : children) {
            int status = 0;
            ASSERT_EQ(waitpid(pid, &status, 0), pid);
            EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
        }
        Store store = Store::open(path);
        EXPECT_EQ(store.list_runs().size(), 6u);
        EXPECT_EQ(store.integrity_check(), "ok");
    }
}

TEST_F(StoreTest, IntegrityCheckOk) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    for (int step = 0; step < 50; ++step) store.put_metric(run_id, "loss", step, step * 0.5);
    EXPECT_EQ(store.integrity_check(), "ok");
    EXPECT_EQ(store.integrity_check(/*quick=*/true), "ok");
    store.checkpoint();
    EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(StoreTest, MovedStoreKeepsWorking) {
    Store first = Store::open(db_path_);
    std::string run_id = first.begin_run(sample_info());
    Store second = std::move(first);
    second.put_metric(run_id, "loss", 0, 1.0);
    Store third = Store::open((dir_ / "other.db").string());
    third = std::move(second);
    third.put_metric(run_id, "loss", 1, 1.0);
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 2);
}

TEST_F(StoreTest, TwoHandlesWriteSerially) {
    Store a = Store::open(db_path_);
    Store b = Store::open(db_path_);
    std::string run_a = a.begin_run(sample_info());
    std::string run_b = b.begin_run(sample_info());
    for (int step = 0; step < 20; ++step) {
        a.transaction([&] { a.put_metric(run_a, "loss", step, 1.0); });
        b.transaction([&] { b.put_metric(run_b, "loss", step, 2.0); });
    }
    EXPECT_EQ(a.get_metrics(run_b).size(), 20u);
    EXPECT_EQ(b.get_metrics(run_a).size(), 20u);
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 40);
}

TEST_F(StoreTest, WriterWaitsForAnotherWritersTransaction) {
    Store a = Store::open(db_path_);
    Store b = Store::open(db_path_);
    std::string run_id = a.begin_run(sample_info());
    std::atomic<bool> holding{false};
    std::string error;
    std::thread holder([&] {
        try {
            a.transaction([&] {
                a.put_metric(run_id, "loss", 0, 1.0);
                holding = true;
                std::this_thread::sleep_for(std::chrono::milliseconds(400));
            });
        } catch (const std::exception& e) {
            error = e.what();
        }
    });
    while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto start = std::chrono::steady_clock::now();
    EXPECT_NO_THROW(b.put_metric(run_id, "loss", 1, 2.0));  // blocks on the write lock, then succeeds
    auto waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    holder.join();
    EXPECT_EQ(error, "");
    EXPECT_GE(waited_ms, 100);  // it really contended
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 2);
}

TEST_F(StoreTest, RefusesReadOnlyFile) {
    if (geteuid() == 0) GTEST_SKIP() << "root can write any file";
    { Store store = Store::open(db_path_); }
    fs::permissions(db_path_, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    expect_refused(db_path_, "read-only");
}

TEST_F(StoreTest, TwoHandlesWriteConcurrently) {
    { Store init = Store::open(db_path_); }
    std::string run_ids[2];
    std::string errors[2];
    auto writer = [&](int who) {
        try {
            Store store = Store::open(db_path_);
            run_ids[who] = store.begin_run(sample_info());
            for (int step = 0; step < 100; ++step) {
                store.transaction([&] {
                    for (int layer = 0; layer < 4; ++layer) store.put_metric(run_ids[who], "load", step, 1.0, layer);
                });
            }
            store.finish_run(run_ids[who], "finished", 0, "");
        } catch (const std::exception& e) {
            errors[who] = e.what();
        }
    };
    std::thread t0(writer, 0), t1(writer, 1);
    t0.join();
    t1.join();
    EXPECT_EQ(errors[0], "");
    EXPECT_EQ(errors[1], "");
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 800);
    EXPECT_EQ(query_int("SELECT count(*) FROM runs WHERE status='finished'"), 2);
}

}  // namespace
}  // namespace prophet
