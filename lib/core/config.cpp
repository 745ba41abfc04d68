#include "core/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "core/closest_name.h"
#include "core/enum_table.h"
#include "core/error.h"
#include "core/key_spec.h"
#include "core/sha256.h"
#include "core/toml_text.h"

namespace prophet {
namespace {

std::string format_double(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    if (x == std::floor(x) && std::fabs(x) < 1e15) {
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%.1f", x);
        return buffer;
    }
    std::ostringstream out;
    out.precision(17);
    out << x;
    std::string text = out.str();
    // shortest round-trip form that still reads back as the same double
    for (int precision = 1; precision <= 17; ++precision) {
        std::ostringstream probe;
        probe.precision(precision);
        probe << x;
        if (std::stod(probe.str()) == x) {
            text = probe.str();
            break;
        }
    }
    if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
    return text;
}

// A TOML basic string: '"' and '\\' escaped, and every control character (U+0000-U+001F, U+007F), which TOML does
// not allow raw in a basic string (tab aside): the short escapes where TOML has one, else \u00XX. So any string
// reads back as itself and cannot end the string early (a name holding `"` and a newline would otherwise write a
// key of its own into the file).
std::string quote(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        const auto byte = static_cast<unsigned char>(c);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\r':
                out += "\\r";
                break;
            default:
                if (byte < 0x20 || byte == 0x7f) {
                    char code[8];
                    std::snprintf(code, sizeof(code), "\\u%04X", byte);
                    out += code;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

std::string bounds_rule(const KeySpec& spec) {
    const bool integral = spec.type == ValueType::kInt || spec.type == ValueType::kIntList;
    auto bound = [&](double x) { return integral ? std::to_string(static_cast<int64_t>(x)) : format_double(x); };
    std::string rule = std::string("must be ") + (integral ? "an integer" : "a number");
    if (spec.min && spec.max) {
        rule += std::string(" in ") + (spec.min_exclusive ? "(" : "[") + bound(*spec.min) + ", " + bound(*spec.max) + "]";
    } else if (spec.min) {
        rule += (spec.min_exclusive ? " > " : " >= ") + bound(*spec.min);
    } else if (spec.max) {
        rule += " <= " + bound(*spec.max);
    }
    return rule;
}

bool number_ok(const KeySpec& spec, double x) {
    if (!std::isfinite(x)) return false;
    if (spec.min && (spec.min_exclusive ? x <= *spec.min : x < *spec.min)) return false;
    if (spec.max && x > *spec.max) return false;
    return true;
}

std::string choices_text(const std::vector<std::string>& choices) {
    std::string text;
    for (size_t i = 0; i < choices.size(); ++i) text += (i ? "|" : "") + choices[i];
    return text;
}

// A value the fix hint can show for a number key: its default when that is allowed (a required key's placeholder
// default may not be), else its bound.
std::string example_number(const KeySpec& spec) {
    const bool integral = spec.type == ValueType::kInt || spec.type == ValueType::kIntList;
    if (const double* d = std::get_if<double>(&spec.default_value); d && number_ok(spec, *d)) return format_double(*d);
    if (const int64_t* i = std::get_if<int64_t>(&spec.default_value); i && number_ok(spec, static_cast<double>(*i)))
        return std::to_string(*i);
    const double x = spec.min ? *spec.min + (spec.min_exclusive ? 1 : 0) : spec.max.value_or(1);
    return integral ? std::to_string(static_cast<int64_t>(x)) : format_double(x);
}

// The fix for a bad value of `spec` from `origin` ("--set", or the file or text it was read from): where the user
// wrote it, in that syntax.
std::string value_fix(const KeySpec& spec, const std::string& origin, const std::string& example) {
    if (origin == "--set") return "e.g. --set " + spec.key + "=" + example;
    const size_t dot = spec.key.rfind('.');
    const std::string table = dot == std::string::npos ? "" : " under [" + spec.key.substr(0, dot) + "]";
    return "write e.g. " + spec.key.substr(dot + 1) + " = " + example + table + " in " + origin;
}

// The checks of a value read for `spec` from `origin`: each throws a config error naming key, value (`shown`),
// rule and a fix in the syntax of the origin.
struct ValueChecks {
    const KeySpec& spec;
    const std::string& shown;
    const std::string& origin;

    [[noreturn]] void type_error(const std::string& expected) const {
        throw_config_error(spec.key, shown, "must be " + expected,
                           value_fix(spec, origin, value_to_toml(spec.default_value)));
    }
    void number(double x) const {
        if (!number_ok(spec, x))
            throw_config_error(spec.key, shown, bounds_rule(spec), value_fix(spec, origin, example_number(spec)));
    }
    void choice(const std::string& s) const {
        if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(), s) == spec.choices.end())
            throw_config_error(spec.key, shown, "must be one of " + choices_text(spec.choices),
                               "pick one of " + choices_text(spec.choices));
    }
};

// A TOML integer or float as a double (none for any other node).
std::optional<double> number_of(const toml::node& node) {
    std::optional<double> v;
    if (auto i = node.value_exact<int64_t>()) v = static_cast<double>(*i);
    if (auto d = node.value_exact<double>()) v = *d;
    return v;
}

// A list key's value: every element of the TOML array converted and checked like a scalar of the element type.
Value convert_list(const ValueChecks& check, const toml::node& node) {
    const ValueType type = check.spec.type;
    const toml::array* array = node.as_array();
    if (!array) check.type_error("a list, e.g. [1, 2]");
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    for (const toml::node& element : *array) {
        if (type == ValueType::kIntList) {
            auto v = element.value_exact<int64_t>();
            if (!v) check.type_error("a list of integers");
            check.number(static_cast<double>(*v));
            ints.push_back(*v);
        } else if (type == ValueType::kFloatList) {
            const std::optional<double> v = number_of(element);
            if (!v) check.type_error("a list of numbers");
            check.number(*v);
            floats.push_back(*v);
        } else {
            auto v = element.value_exact<std::string>();
            if (!v) check.type_error("a list of strings");
            check.choice(*v);
            strings.push_back(*v);
        }
    }
    if (type == ValueType::kIntList) return ints;
    if (type == ValueType::kFloatList) return floats;
    return strings;
}

// Converts a parsed TOML node from `origin` to the key's type, or throws a config error naming key, value, rule
// and a fix in the syntax of the origin.
Value convert(const KeySpec& spec, const toml::node& node, const std::string& shown, const std::string& origin) {
    const ValueChecks check{spec, shown, origin};
    switch (spec.type) {
        case ValueType::kInt: {
            auto v = node.value_exact<int64_t>();
            if (!v) check.type_error("an integer");
            check.number(static_cast<double>(*v));
            return *v;
        }
        case ValueType::kFloat: {
            const std::optional<double> v = number_of(node);
            if (!v) check.type_error("a number");
            check.number(*v);
            return *v;
        }
        case ValueType::kBool: {
            auto v = node.value_exact<bool>();
            if (!v) check.type_error("true or false");
            return *v;
        }
        case ValueType::kString: {
            auto v = node.value_exact<std::string>();
            if (!v) check.type_error("a string");
            check.choice(*v);
            return *v;
        }
        case ValueType::kIntList:
        case ValueType::kFloatList:
        case ValueType::kStringList:
            return convert_list(check, node);
    }
    check.type_error("valid");
}

constexpr const char* kValueTypeNames[] = {"int",      "float",      "bool",       "string",
                                           "int list", "float list", "string list"};  // by position

}  // namespace

std::string type_name(ValueType type) { return enum_name(kValueTypeNames, type); }

std::string value_to_toml(const Value& value) {
    struct Visitor {
        std::string operator()(int64_t v) const { return std::to_string(v); }
        std::string operator()(double v) const { return format_double(v); }
        std::string operator()(bool v) const { return v ? "true" : "false"; }
        std::string operator()(const std::string& v) const { return quote(v); }
        std::string operator()(const std::vector<int64_t>& v) const {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
            return s + "]";
        }
        std::string operator()(const std::vector<double>& v) const {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + format_double(v[i]);
            return s + "]";
        }
        std::string operator()(const std::vector<std::string>& v) const {
            std::string s = "[";
            for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + quote(v[i]);
            return s + "]";
        }
    };
    return std::visit(Visitor{}, value);
}

// ---------------------------------------------------------------------------------------------------------
// Schema

Schema& Schema::add(KeySpec spec) {
    PROPHET_ASSERT_MSG(find(spec.key) == nullptr, "duplicate schema key " + spec.key);
    keys_.push_back(std::move(spec));
    return *this;
}

KeySpec bounded_key(const std::string& key, ValueType type, std::optional<double> min, std::optional<double> max,
                    bool min_exclusive, const std::string& help) {
    KeySpec spec;
    spec.key = key;
    spec.type = type;
    spec.min = min;
    spec.max = max;
    spec.min_exclusive = min_exclusive;
    spec.help = help;
    return spec;
}

Schema& Schema::add_int(const std::string& key, int64_t def, std::optional<double> min, std::optional<double> max,
                        const std::string& help) {
    KeySpec spec = bounded_key(key, ValueType::kInt, min, max, false, help);
    spec.default_value = def;
    return add(std::move(spec));
}

Schema& Schema::add_float(const std::string& key, double def, std::optional<double> min, std::optional<double> max,
                          const std::string& help, bool min_exclusive) {
    KeySpec spec = bounded_key(key, ValueType::kFloat, min, max, min_exclusive, help);
    spec.default_value = def;
    return add(std::move(spec));
}

Schema& Schema::add_bool(const std::string& key, bool def, const std::string& help) {
    KeySpec spec = bounded_key(key, ValueType::kBool, std::nullopt, std::nullopt, false, help);
    spec.default_value = def;
    return add(std::move(spec));
}

Schema& Schema::add_string(const std::string& key, const std::string& def, std::vector<std::string> choices,
                           const std::string& help) {
    KeySpec spec = bounded_key(key, ValueType::kString, std::nullopt, std::nullopt, false, help);
    spec.default_value = def;
    spec.choices = std::move(choices);
    return add(std::move(spec));
}

Schema& Schema::add_required(const std::string& key, ValueType type, std::optional<double> min,
                             std::optional<double> max, const std::string& help, bool min_exclusive) {
    KeySpec spec = bounded_key(key, type, min, max, min_exclusive, help);
    spec.required = true;
    return add(std::move(spec));
}

const KeySpec* Schema::find(const std::string& key) const {
    for (const KeySpec& spec : keys_)
        if (spec.key == key) return &spec;
    return nullptr;
}

std::string Schema::closest(const std::string& key) const {
    std::vector<std::string> names;
    for (const KeySpec& spec : keys_) names.push_back(spec.key);
    return closest_name(key, names);
}

std::string Schema::describe() const {
    std::ostringstream out;
    size_t width = 0;
    for (const KeySpec& spec : keys_) width = std::max(width, spec.key.size());
    for (const KeySpec& spec : keys_) {
        out << "  " << spec.key << std::string(width - spec.key.size() + 2, ' ');
        out << "(" << type_name(spec.type) << ", ";
        out << (spec.required ? std::string("required") : "default " + value_to_toml(spec.default_value)) << ") ";
        out << spec.help;
        if (!spec.choices.empty()) out << " [" << choices_text(spec.choices) << "]";
        out << "\n";
    }
    return out.str();
}

// ---------------------------------------------------------------------------------------------------------
// Config

Config::Config(const Schema& schema, std::string what) : schema_(&schema), what_(std::move(what)) {
    for (const KeySpec& spec : schema.keys())
        if (!spec.required) values_[spec.key] = Entry{spec.default_value, "default"};
}

const KeySpec& Config::spec_or_throw(const std::string& key, const std::string& shown_value) const {
    const KeySpec* spec = schema_->find(key);
    if (spec) return *spec;
    const std::string near = schema_->closest(key);
    throw_config_error(key, shown_value, "unknown key in " + what_,
                       near.empty() ? "remove it (--help-config lists the keys)"
                                    : "did you mean " + near + "? (--help-config lists the keys)");
}

void Config::set(const std::string& key, const Value& value, const std::string& source) {
    spec_or_throw(key, value_to_toml(value));
    values_[key] = Entry{value, source};
}

void Config::merge_toml_string(const std::string& text, const std::string& origin,
                               const std::vector<std::string>& skip_tables) {
    toml::table table;
    try {
        table = toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        const auto& where = e.source().begin;
        throw_input_error(origin, "TOML syntax error at line " + std::to_string(where.line) + ", column " +
                                      std::to_string(where.column) + ": " + std::string(e.description()),
                          "correct the TOML syntax");
    }
    for (const std::string& name : skip_tables)
        if (const toml::node* node = table.get(name); node != nullptr && node->is_table()) table.erase(name);
    // flatten nested tables into dotted keys
    std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& t,
                                                                           const std::string& prefix) {
        for (auto&& [name, node] : t) {
            const std::string key = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
            if (const toml::table* sub = node.as_table()) {
                walk(*sub, key);
                continue;
            }
            const std::string shown = toml_node_text(node);
            const KeySpec& spec = spec_or_throw(key, shown);
            values_[key] = Entry{convert(spec, node, shown, origin), origin};
        }
    };
    walk(table, "");
}

void Config::merge_toml_file(const std::string& path, const std::vector<std::string>& skip_tables) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_input_error(path, "cannot open file", "check the path");
    std::stringstream buffer;
    buffer << in.rdbuf();
    merge_toml_string(buffer.str(), path, skip_tables);
}

void Config::apply_set(const std::string& assignment) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
        throw Error(kExitUsage, "usage error: --set expects key=value, got '" + assignment +
                                    "'; fix: e.g. --set balance.policy=prophet");
    const std::string key = assignment.substr(0, eq);
    const std::string raw = assignment.substr(eq + 1);
    const KeySpec& spec = spec_or_throw(key, raw);
    toml::table parsed;
    bool ok = true;
    try {
        parsed = toml::parse("v = " + raw);
    } catch (const toml::parse_error&) {
        ok = false;
    }
    if (ok) {
        values_[key] = Entry{convert(spec, *parsed.get("v"), raw, "--set"), "--set"};
        return;
    }
    // a bare word is a string (e.g. --set balance.policy=prophet)
    if (spec.type == ValueType::kString) {
        toml::value<std::string> node(raw);
        values_[key] = Entry{convert(spec, node, raw, "--set"), "--set"};
        return;
    }
    throw_config_error(key, raw, "is not a valid " + type_name(spec.type) + " value",
                       "e.g. --set " + key + "=" + value_to_toml(spec.default_value));
}

void Config::check_required() const {
    for (const KeySpec& spec : schema_->keys())
        if (spec.required && values_.find(spec.key) == values_.end())
            throw_config_error(spec.key, "(missing)", "is required in " + what_,
                               "add `" + spec.key.substr(spec.key.rfind('.') + 1) + " = ...` (" + spec.help + ")");
}

bool Config::has(const std::string& key) const {
    auto it = values_.find(key);
    return it != values_.end() && it->second.source != "default";
}

const Config::Entry& Config::entry(const std::string& key, ValueType expected) const {
    const KeySpec* spec = schema_->find(key);
    PROPHET_ASSERT_MSG(spec != nullptr, "config key not in schema: " + key);
    PROPHET_ASSERT_MSG(spec->type == expected, "config key " + key + " read with the wrong type");
    auto it = values_.find(key);
    PROPHET_ASSERT_MSG(it != values_.end(), "required config key read before check_required: " + key);
    return it->second;
}

int64_t Config::get_int(const std::string& key) const { return std::get<int64_t>(entry(key, ValueType::kInt).value); }
double Config::get_float(const std::string& key) const { return std::get<double>(entry(key, ValueType::kFloat).value); }
bool Config::get_bool(const std::string& key) const { return std::get<bool>(entry(key, ValueType::kBool).value); }
const std::string& Config::get_string(const std::string& key) const {
    return std::get<std::string>(entry(key, ValueType::kString).value);
}
const std::vector<int64_t>& Config::get_int_list(const std::string& key) const {
    return std::get<std::vector<int64_t>>(entry(key, ValueType::kIntList).value);
}
const std::vector<double>& Config::get_float_list(const std::string& key) const {
    return std::get<std::vector<double>>(entry(key, ValueType::kFloatList).value);
}
const std::vector<std::string>& Config::get_string_list(const std::string& key) const {
    return std::get<std::vector<std::string>>(entry(key, ValueType::kStringList).value);
}
const Value& Config::get(const std::string& key) const {
    auto it = values_.find(key);
    PROPHET_ASSERT_MSG(it != values_.end(), "config key not set: " + key);
    return it->second.value;
}
std::string Config::source(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? "missing" : it->second.source;
}

std::string Config::canonical_toml() const {
    std::ostringstream out;
    std::string section = "\x01";
    for (const auto& [key, entry] : values_) {  // std::map: sorted by key
        const size_t dot = key.rfind('.');
        const std::string sec = dot == std::string::npos ? "" : key.substr(0, dot);
        const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
        if (sec != section) {
            if (!sec.empty()) out << "[" << sec << "]\n";
            section = sec;
        }
        out << name << " = " << value_to_toml(entry.value) << "\n";
    }
    return out.str();
}

std::string Config::hash() const { return sha256_hex(canonical_toml()); }

std::vector<std::pair<std::string, std::string>> Config::flat() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [key, entry] : values_) out.emplace_back(key, value_to_toml(entry.value));
    return out;
}

}  // namespace prophet
