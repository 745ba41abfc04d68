// check_file_name and check_single_line (core/names.h): names from input files that become file names or land in
// generated scripts (issue 26 items 1 and 4).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/names.h"

namespace prophet {
namespace {

struct NameCase {
    std::string value;
    bool single_line_ok;
    bool file_name_ok;
    const char* in_message;  // expected in the file-name error (empty when accepted)
};

const NameCase kNames[] = {
    {"nightly", true, true, ""},
    {"exp v2,\"$(touch x)\"'q'", true, true, ""},  // space, comma, $(...), quotes: quoted by the writers
    {"a..b", true, true, ""},
    {"nightly\ntouch PWNED\n#", false, false, "\"nightly\\ntouch PWNED\\n#\""},
    {std::string("tab\there"), false, false, "control characters"},
    {std::string("nul\0x", 5), false, false, "\\x00"},
    {"del\x7f", false, false, "\\x7f"},
    {"../../../x", true, false, "'/'"},
    {"a/b", true, false, "'/'"},
    {"a\\b", true, true, ""},  // a file name character on Linux; the writers quote it
    {"..", true, false, "start with '.'"},
    {".", true, false, "start with '.'"},
    {".hidden", true, false, "start with '.'"},
    {"", true, false, "empty"},
};

class Names : public ::testing::TestWithParam<NameCase> {};

TEST_P(Names, FileNameRule) {
    const NameCase& c = GetParam();
    if (c.file_name_ok) {
        EXPECT_NO_THROW(check_file_name("sweep.name", c.value));
        return;
    }
    try {
        check_file_name("sweep.name", c.value);
        ADD_FAILURE() << "accepted " << escaped_for_message(c.value);
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_EQ(message.rfind("config error: sweep.name = ", 0), 0u) << message;
        EXPECT_NE(message.find(c.in_message), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "a multi-line message: " << message;
    }
}

TEST_P(Names, SingleLineRule) {
    const NameCase& c = GetParam();
    if (c.single_line_ok) {
        EXPECT_NO_THROW(check_single_line("sweep.slurm.shard_dir", c.value));
        return;
    }
    try {
        check_single_line("sweep.slurm.shard_dir", c.value);
        ADD_FAILURE() << "accepted " << escaped_for_message(c.value);
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("sweep.slurm.shard_dir"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("control characters"), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Table, Names, ::testing::ValuesIn(kNames));

}  // namespace
}  // namespace prophet
