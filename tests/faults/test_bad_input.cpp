// Bad input, as a user gives it: every key of the train schema with values outside its rule, a store that is
// not ours (corrupt, another application, a newer schema), a truncated trace, a truncated checkpoint, and a model
// too large for memory. Each must end with one clear message naming what is wrong, its documented exit code
// (core/error.h) and nothing half-written. (A checkpoint of another config: tests/cli/test_train_cli.cpp.)
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "../cli/cli_util.h"
#include "../temp_dir_test.h"
#include "core/error.h"
#include "store/store.h"
#include "train/memory_estimate.h"
#include "train/train_config.h"

namespace fs = std::filesystem;
using prophet::testing::CliResult;

namespace {

std::string number(double v) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, std::floor(v) == v && std::fabs(v) < 1e18 ? "%.0f" : "%.17g", v);
    return buffer;
}

// Values that break a key's rule, each as the right side of --set (TOML).
std::vector<std::string> invalid_values(const prophet::KeySpec& spec) {
    using prophet::ValueType;
    std::vector<std::string> bad;
    switch (spec.type) {
        case ValueType::kInt:
            if (spec.min) bad.push_back(number(*spec.min - 1));
            if (spec.max) bad.push_back(number(*spec.max + 1));
            bad.push_back("\"twelve\"");
            bad.push_back("1.5");
            break;
        case ValueType::kFloat:
            if (spec.min) bad.push_back(number(spec.min_exclusive ? *spec.min : *spec.min - 1));
            if (spec.max) bad.push_back(number(*spec.max * 2 + 1));
            bad.push_back("\"fast\"");
            bad.push_back("[1.0]");
            break;
        case ValueType::kBool:
            bad.push_back("\"yes\"");
            bad.push_back("2");
            break;
        case ValueType::kString:
            if (!spec.choices.empty()) bad.push_back("no_such_" + spec.choices.front());
            bad.push_back("42");
            bad.push_back("[\"a\"]");
            break;
        default:
            bad.push_back("{ x = 1 }");
            break;
    }
    return bad;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class BadInput : public prophet::testing::TempDirTest {
  protected:
    CliResult prophet(const std::string& args) { return prophet::testing::run_prophet("", args, dir_); }
    CliResult train(const std::string& extra) {
        return prophet("train --config experiments/train/skewed-4rank.toml --json --set train.steps=2 --set store.path=" +
                       db_ + " " + extra);
    }
};

}  // namespace

// Every key, every class of invalid value: exit 3 and a message naming the key. In process (Config::apply_set is
// what --set calls), so the whole table costs milliseconds; the CLI spot-checks below show the same reaches users.
TEST(BadConfig, EveryTrainKeyRefusesValuesOutsideItsRule) {
    int cases = 0;
    for (const prophet::KeySpec& spec : prophet::train_schema().keys()) {
        const std::vector<std::string> values = invalid_values(spec);
        EXPECT_FALSE(values.empty()) << spec.key;
        for (const std::string& value : values) {
            prophet::Config config(prophet::train_schema());
            try {
                config.apply_set(spec.key + "=" + value);
                ADD_FAILURE() << spec.key << " accepted " << value;
            } catch (const prophet::Error& e) {
                EXPECT_EQ(e.exit_code(), prophet::kExitConfig) << spec.key << "=" << value;
                EXPECT_NE(std::string(e.what()).find(spec.key), std::string::npos) << e.what();
                EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
            }
            ++cases;
        }
    }
    EXPECT_GT(cases, 3 * static_cast<int>(prophet::train_schema().keys().size()) - 10);
}

TEST_F(BadInput, CliSpotChecksPerKeyClassExitThreeAndWriteNothing) {
    const char* sets[][2] = {{"model.E=0", "model.E"},             // int below its minimum
                             {"model.T=70000", "model.T"},         // int above its maximum
                             {"'model.L=\"four\"'", "model.L"},    // wrong type
                             {"balance.policy=roundrobin", "balance.policy"},  // unknown enum name
                             {"train.lr=0", "train.lr"},           // float at an exclusive bound
                             {"train.record_loads=3", "train.record_loads"},  // bool of the wrong type
                             {"debug.fail_rank=1", "debug.fail_rank"},  // a rank this 1-rank run does not have
                             {"model.nosuchkey=1", "model.nosuchkey"}};  // unknown key
    for (const auto& [set, key] : sets) {
        for (const char* mode : {"--dry-run", ""}) {
            const CliResult r = train(std::string(mode) + " --set " + set);
            EXPECT_EQ(r.exit_code, prophet::kExitConfig) << set << ": " << r.err;
            EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
            EXPECT_FALSE(fs::exists(db_)) << set << ": a refused run created the store";
        }
    }
}

TEST_F(BadInput, StoresThatAreNotOursExitFiveAndStayUntouched) {
    struct Case {
        std::string name, needle;
        std::function<void(const std::string&)> make;
    };
    auto sqlite_file = [](const std::string& path, const std::string& sql) {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
        sqlite3_close(db);
    };
    const std::vector<Case> cases = {
        {"text.db", "not a SQLite", [](const std::string& p) { std::ofstream(p) << std::string(4096, 'x'); }},
        {"corrupt.db", "", [](const std::string& p) {
             // a real SQLite header followed by garbage pages
             std::string bytes = "SQLite format 3";
             bytes.push_back('\0');
             bytes += std::string(8192, '\x5a');
             std::ofstream(p, std::ios::binary) << bytes;
         }},
        {"foreign.db", "not a prophet database", [&](const std::string& p) {
             sqlite_file(p, "PRAGMA application_id=1234; CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES('mine');");
         }},
        {"newer.db", "newer", [&](const std::string& p) {
             sqlite_file(p, "PRAGMA application_id=" + std::to_string(prophet::kStoreApplicationId) +
                                "; PRAGMA user_version=" + std::to_string(prophet::kStoreSchemaVersion + 1) +
                                "; CREATE TABLE runs(x TEXT);");
         }},
    };
    for (const Case& c : cases) {
        const std::string path = (dir_ / c.name).string();
        c.make(path);
        const std::string before = read_file(path);
        const CliResult r = prophet("train --config experiments/train/skewed-4rank.toml --set train.steps=2 "
                                    "--set store.path=" + path);
        EXPECT_EQ(r.exit_code, prophet::kExitDatabase) << c.name << ": " << r.err;
        EXPECT_NE(r.err.find(path), std::string::npos) << c.name << ": the message names the file: " << r.err;
        if (!c.needle.empty()) {
            EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.name << ": " << r.err;
        }
        EXPECT_EQ(read_file(path), before) << c.name << " was modified";
        EXPECT_FALSE(fs::exists(path + "-wal") && fs::file_size(path + "-wal") > 0) << c.name << ": WAL written";
    }
}

TEST_F(BadInput, TruncatedTraceExitsThree) {
    const std::string trace = (dir_ / "t.ptrace").string();
    ASSERT_EQ(prophet("trace convert experiments/traces/tiny-e4-d4.toml -o " + trace).exit_code, 0);
    const std::uintmax_t size = fs::file_size(trace);
    for (const std::uintmax_t keep : {size - 1, size / 2, std::uintmax_t{10}}) {
        fs::resize_file(trace, keep);
        for (const std::string& command :
             {"trace info " + trace, "plan --policy static --cluster experiments/clusters/hpwnv-16.toml --set store.path=" +
                                         db_ + " --trace " + trace}) {
            const CliResult r = prophet(command);
            EXPECT_EQ(r.exit_code, prophet::kExitConfig) << keep << " bytes: " << command << ": " << r.err;
            EXPECT_NE(r.err.find(trace), std::string::npos) << r.err;
            EXPECT_FALSE(fs::exists(db_)) << "a refused plan created the store";
        }
    }
}

TEST_F(BadInput, TruncatedCheckpointExitsThreeAndTheRunIsRecordedFailed) {
    const std::string ckpt = (dir_ / "ckpt").string();
    ASSERT_EQ(train("--save --set train.checkpoint_dir=" + ckpt).exit_code, 0);
    std::vector<fs::path> tensors;
    for (const auto& entry : fs::recursive_directory_iterator(ckpt))
        if (entry.path().extension() == ".safetensors") tensors.push_back(entry.path());
    ASSERT_FALSE(tensors.empty());
    fs::resize_file(tensors.front(), fs::file_size(tensors.front()) / 2);
    const CliResult r = train("--resume " + ckpt);
    EXPECT_EQ(r.exit_code, prophet::kExitConfig) << r.err;
    EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(tensors.front().filename().string()), std::string::npos) << r.err;
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs();
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].status, "failed");  // newest first: the refused resume
    EXPECT_EQ(runs[0].exit_code.value_or(-1), prophet::kExitConfig);
    EXPECT_TRUE(store.get_metrics(runs[0].run_id).empty()) << "no step of the refused resume may be recorded";
    EXPECT_EQ(store.integrity_check(), "ok");
}

TEST_F(BadInput, ModelTooLargeForMemoryIsRefusedBeforeAllocatingExitFour) {
    // ~2e15 bytes of parameters: any allocation attempt would take the machine down or throw bad_alloc
    for (const char* mode : {"--dry-run", ""}) {
        const CliResult r = train(std::string(mode) + " --set model.C=65536 --set model.L=1024");
        EXPECT_EQ(r.exit_code, prophet::kExitResource) << r.err;
        EXPECT_NE(r.err.find("MemAvailable"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("nothing was allocated"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(db_)) << "a refused run created the store";
    }
    // the explicit limit: the tiny preset needs a few MiB
    const CliResult r = train("--set train.max_memory_gib=0.001");
    EXPECT_EQ(r.exit_code, prophet::kExitResource) << r.err;
    EXPECT_NE(r.err.find("train.max_memory_gib = 0.001"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(db_));
    EXPECT_EQ(train("--set train.max_memory_gib=1").exit_code, 0);
}

TEST_F(BadInput, DryRunPrintsTheMemoryEstimate) {
    const CliResult r = train("--dry-run");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    prophet::Config config(prophet::train_schema());
    config.merge_toml_file("experiments/train/skewed-4rank.toml");
    const prophet::MemoryEstimate mem = prophet::estimate_train_memory(prophet::train_settings_from(config, 1).model, 1);
    // one rank: balanced and worst routing are the same rows
    const std::string expected = "memory per rank at least " + prophet::format_gib(mem.total_bytes()) + " (up to " +
                                 prophet::format_gib(mem.worst_bytes()) + " with skewed routing)";
    EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(db_));
}
