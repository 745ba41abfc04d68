// trace_test_util.h: helpers shared by the trace tests: scratch files and prophet::Error expectations.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include <unistd.h>

#include "core/error.h"
#include "trace/trace.h"

namespace prophet::testing {

// A fresh path under the system temp directory, removed (with its .tmp sibling) when the test ends.
class ScratchFile {
  public:
    explicit ScratchFile(const std::string& name) {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string test = info->name();  // "Case/param" for a TEST_P: one file name, not a directory
        std::replace(test.begin(), test.end(), '/', '_');
        path_ = (std::filesystem::temp_directory_path() /
                 ("prophet-trace-" + std::to_string(::getpid()) + "-" + test + "-" + name))
                    .string();
        std::filesystem::remove(path_);
    }
    ~ScratchFile() {
        std::error_code ec;
        std::filesystem::remove(path_, ec);
        std::filesystem::remove(path_ + ".tmp", ec);
    }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `body`, expects a prophet::Error with exit code 3 whose message contains every word in `words`;
// returns the message.
inline std::string expect_input_error(const std::function<void()>& body, std::initializer_list<std::string> words) {
    try {
        body();
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_EQ(e.exit_code(), 3) << message;
        for (const std::string& word : words)
            EXPECT_NE(message.find(word), std::string::npos) << "missing \"" << word << "\" in: " << message;
        return message;
    }
    ADD_FAILURE() << "expected a prophet::Error";
    return "";
}

inline std::string shipped(const std::string& name) {
    return std::string(PROPHET_SOURCE_DIR) + "/experiments/traces/" + name;
}

}  // namespace prophet::testing
