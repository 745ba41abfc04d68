#include "core/error.h"

namespace prophet {

void throw_config_error(const std::string& key, const std::string& value, const std::string& rule,
                        const std::string& fix) {
    std::string message = "config error: " + key + " = " + value + ": " + rule;
    if (!fix.empty()) message += "; fix: " + fix;
    throw Error(kExitConfig, message);
}

void throw_input_error(const std::string& path, const std::string& problem, const std::string& fix) {
    std::string message = "input error: " + path + ": " + problem;
    if (!fix.empty()) message += "; fix: " + fix;
    throw Error(kExitConfig, message);
}

void assert_fail(const char* expr, const char* file, int line, const std::string& message) {
    std::string text = std::string("internal error: assertion `") + expr + "` failed at " + file + ":" +
                       std::to_string(line);
    if (!message.empty()) text += ": " + message;
    throw Error(kExitRunFailed, text);
}

}  // namespace prophet
