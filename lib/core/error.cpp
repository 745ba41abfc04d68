#include "core/error.h"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <typeinfo>

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

namespace {

// "std::invalid_argument" rather than "St16invalid_argument"
std::string type_name(const std::type_info& type) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                std::free);
    return status == 0 && name ? name.get() : type.name();
}

}  // namespace

Error current_exception_as_error() {
    try {
        throw;
    } catch (const Error& e) {
        return e;
    } catch (const std::bad_alloc& e) {
        return Error(kExitResource, std::string("resource error: out of memory (") + e.what() +
                                        "); fix: a smaller model or batch, fewer ranks per node, or more memory");
    } catch (const std::exception& e) {
        // a library's exception (std::stoi, nlohmann::json, std::filesystem, ...): a bug of ours, since every
        // input is meant to be checked before use; the type and text are what a bug report needs
        return Error(kExitRunFailed, "run failed: unexpected " + type_name(typeid(e)) + ": " + e.what());
    } catch (...) {
        return Error(kExitRunFailed, "run failed: unexpected exception of unknown type");
    }
}

}  // namespace prophet
