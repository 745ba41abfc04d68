// checkpoint_state.cpp: state.json (step, RNG states, config hash, data position) written and read back checked.
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/error.h"
#include "model/checkpoint.h"
#include "model/checkpoint_internal.h"

namespace prophet {

using json = nlohmann::json;

static_assert(std::is_trivially_copyable_v<Rng> && std::is_standard_layout_v<Rng> && sizeof(Rng) == sizeof(RngState),
              "rng_state() copies Rng's four state words");

RngState rng_state(const Rng& rng) {
    RngState state;
    std::memcpy(state.data(), &rng, sizeof(state));
    return state;
}

Rng rng_from_state(const RngState& state) {
    Rng rng(0);
    std::memcpy(static_cast<void*>(&rng), state.data(), sizeof(state));
    return rng;
}

std::string rng_state_hex(const RngState& state) {
    char text[65];
    std::snprintf(text, sizeof(text), "%016llx%016llx%016llx%016llx", static_cast<unsigned long long>(state[0]),
                  static_cast<unsigned long long>(state[1]), static_cast<unsigned long long>(state[2]),
                  static_cast<unsigned long long>(state[3]));
    return text;
}

namespace checkpoint_detail {

namespace {

RngState rng_state_from_hex(const std::string& path, const std::string& name, const std::string& hex) {
    if (hex.size() != 64) throw_input_error(path, "corrupted: rng \"" + name + "\" is not 64 hex digits", kCorruptFix);
    RngState state{};
    for (size_t w = 0; w < 4; ++w) {
        uint64_t word = 0;
        for (size_t c = 0; c < 16; ++c) {
            const char ch = hex[w * 16 + c];
            int digit = -1;
            if (ch >= '0' && ch <= '9')
                digit = ch - '0';
            else if (ch >= 'a' && ch <= 'f')
                digit = ch - 'a' + 10;
            else if (ch >= 'A' && ch <= 'F')
                digit = ch - 'A' + 10;
            if (digit < 0) throw_input_error(path, "corrupted: rng \"" + name + "\" is not 64 hex digits", kCorruptFix);
            word = (word << 4) | static_cast<uint64_t>(digit);
        }
        state[w] = word;
    }
    return state;
}

std::map<std::string, std::string> string_map(const json& object, const std::string& path, const std::string& field) {
    std::map<std::string, std::string> result;
    if (!object.is_object()) throw_input_error(path, "corrupted: \"" + field + "\" is not an object", kCorruptFix);
    for (const auto& [key, value] : object.items()) {
        if (!value.is_string())
            throw_input_error(path, "corrupted: \"" + field + "." + key + "\" is not a string", kCorruptFix);
        result[key] = value.get<std::string>();
    }
    return result;
}

}  // namespace

std::string state_json_text(int64_t step, const std::map<std::string, RngState>& rng_states,
                            const CheckpointMeta& meta) {
    json rng = json::object();
    for (const auto& [rng_name, state] : rng_states) rng[rng_name] = rng_state_hex(state);
    const json state = {{"format", "prophet-checkpoint"},
                        {"format_version", kFormatVersion},
                        {"step", step},
                        {"optimizer_step", meta.optimizer_step},
                        {"config_hash", meta.config_hash},
                        {"prophet_version", meta.prophet_version},
                        {"rng", rng},
                        {"data_position", meta.data_position},
                        {"extra", meta.extra},
                        {"files", {kModelFile, kOptimizerFile}}};
    return state.dump(2) + "\n";
}

void read_state_json(const std::string& state_path, CheckpointInfo& info) {
    json state;
    try {
        state = json::parse(read_text_file(state_path));
    } catch (const json::exception& e) {
        throw_input_error(state_path, std::string("corrupted: invalid JSON (") + e.what() + ")", kCorruptFix);
    }
    auto field = [&](const char* key, bool (json::*is_type)() const noexcept, const char* type) -> const json& {
        if (!state.is_object() || !state.contains(key) || !(state[key].*is_type)())
            throw_input_error(state_path, std::string("corrupted: \"") + key + "\" missing or not " + type,
                              kCorruptFix);
        return state[key];
    };
    if (field("format", &json::is_string, "a string").get<std::string>() != "prophet-checkpoint")
        throw_input_error(state_path, "not a prophet checkpoint (format is not \"prophet-checkpoint\")",
                          "pass a directory written by prophet");
    const int64_t version = field("format_version", &json::is_number_integer, "an integer").get<int64_t>();
    if (version > kFormatVersion)
        throw_input_error(state_path,
                          "written by a newer prophet (format_version " + std::to_string(version) + " > " +
                              std::to_string(kFormatVersion) + ")",
                          "load it with the prophet version that wrote it (state.json prophet_version)");
    info.step = field("step", &json::is_number_integer, "an integer").get<int64_t>();
    info.meta.optimizer_step = field("optimizer_step", &json::is_number_integer, "an integer").get<int64_t>();
    info.meta.config_hash = field("config_hash", &json::is_string, "a string").get<std::string>();
    info.meta.prophet_version = field("prophet_version", &json::is_string, "a string").get<std::string>();
    info.meta.data_position =
        string_map(field("data_position", &json::is_object, "an object"), state_path, "data_position");
    info.meta.extra = string_map(field("extra", &json::is_object, "an object"), state_path, "extra");
    for (const auto& [name, hex] : string_map(field("rng", &json::is_object, "an object"), state_path, "rng"))
        info.rng_states[name] = rng_state_from_hex(state_path, name, hex);
}

}  // namespace checkpoint_detail

}  // namespace prophet
