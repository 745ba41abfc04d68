// error.h: prophet's error type, exit codes and the always-on assert.
//
// Every user-facing failure is a prophet::Error carrying the process exit code that the top level returns.
// Exit codes (documented in `prophet --help`): 0 ok, 1 run failed, 2 usage, 3 invalid config,
// 4 resources (memory/size), 5 database, 6 distributed failure or timeout.
#pragma once

#include <stdexcept>
#include <string>

namespace prophet {

enum ExitCode : int {
    kExitOk = 0,
    kExitRunFailed = 1,
    kExitUsage = 2,
    kExitConfig = 3,
    kExitResource = 4,
    kExitDatabase = 5,
    kExitDistributed = 6,
};

class Error : public std::runtime_error {
  public:
    Error(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

  private:
    int exit_code_;
};

// One-line config error: "config error: <key> = <value>: <rule>; fix: <fix>" (exit code 3).
[[noreturn]] void throw_config_error(const std::string& key, const std::string& value, const std::string& rule,
                                     const std::string& fix);

// Input-file error (trace, cluster, checkpoint): names the file and what is wrong (exit code 3).
[[noreturn]] void throw_input_error(const std::string& path, const std::string& problem, const std::string& fix);

// Inside a catch block: the exception being handled as a prophet::Error, so that a command can record and report
// every failure alike: a prophet::Error as is, std::bad_alloc as exit 4 (resources), anything else as exit 1
// (run failed) with its type and message.
Error current_exception_as_error();

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& message);

}  // namespace prophet

// Stays on in release builds: a broken invariant is a bug, never a silent wrong number.
#define PROPHET_ASSERT(cond)                                                   \
    do {                                                                       \
        if (!(cond)) ::prophet::assert_fail(#cond, __FILE__, __LINE__, "");    \
    } while (0)
#define PROPHET_ASSERT_MSG(cond, msg)                                          \
    do {                                                                       \
        if (!(cond)) ::prophet::assert_fail(#cond, __FILE__, __LINE__, (msg)); \
    } while (0)
