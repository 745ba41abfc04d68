// test_error.cpp: current_exception_as_error, the conversion the commands use to record every exception alike.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace prophet {
namespace {

template <typename F>
Error converted(F throw_it) {
    try {
        throw_it();
    } catch (...) {
        return current_exception_as_error();
    }
    ADD_FAILURE() << "nothing thrown";
    return Error(0, "");
}

TEST(CurrentExceptionAsError, KeepsAProphetErrorAsIs) {
    const Error e = converted([] { throw Error(kExitDatabase, "database error: x"); });
    EXPECT_EQ(e.exit_code(), kExitDatabase);
    EXPECT_STREQ(e.what(), "database error: x");
}

TEST(CurrentExceptionAsError, BadAllocIsAResourceErrorExitFour) {
    const Error e = converted([] { throw std::bad_alloc(); });
    EXPECT_EQ(e.exit_code(), kExitResource);
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
}

TEST(CurrentExceptionAsError, OtherExceptionsAreRunFailuresNamingTheirType) {
    const Error e = converted([] { (void)std::stoi("one"); });
    EXPECT_EQ(e.exit_code(), kExitRunFailed);
    EXPECT_NE(std::string(e.what()).find("std::invalid_argument"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stoi"), std::string::npos) << e.what();
    const Error unknown = converted([] { throw 42; });
    EXPECT_EQ(unknown.exit_code(), kExitRunFailed);
}

}  // namespace
}  // namespace prophet
