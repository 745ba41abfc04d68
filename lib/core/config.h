// config.h: typed, schema-checked configuration from TOML files and `--set key=value` overrides.
//
// A Schema lists every key a command accepts ("section.name"), its type, default, bounds or choices and a
// one-line help with the unit. Config resolves defaults < file(s) < --set in that order, rejects unknown keys
// and invalid values with one message naming the key, the value, the rule and a fix (exit code 3), and
// gives the canonical resolved TOML and its SHA-256 for run records. The same machinery validates the small
// TOML files that describe clusters and trace generators.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace prophet {

enum class ValueType { kInt, kFloat, kBool, kString, kIntList, kFloatList, kStringList };

using Value = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>,
                           std::vector<std::string>>;

struct KeySpec {
    std::string key;  // "section.name"
    ValueType type = ValueType::kInt;
    Value default_value;
    std::string help;                  // one line: meaning and unit
    std::optional<double> min;         // inclusive lower bound (numbers and number-list elements)
    std::optional<double> max;         // inclusive upper bound
    bool min_exclusive = false;        // the lower bound itself is not allowed (e.g. > 0)
    std::vector<std::string> choices;  // allowed strings (empty: any string)
    bool required = false;             // no default: the file must set it
};

class Schema {
  public:
    Schema& add(KeySpec spec);
    // shorthands for the common cases
    Schema& add_int(const std::string& key, int64_t def, std::optional<double> min, std::optional<double> max,
                    const std::string& help);
    Schema& add_float(const std::string& key, double def, std::optional<double> min, std::optional<double> max,
                      const std::string& help, bool min_exclusive = false);
    Schema& add_bool(const std::string& key, bool def, const std::string& help);
    Schema& add_string(const std::string& key, const std::string& def, std::vector<std::string> choices,
                       const std::string& help);
    // a key without a default that every file must set; min is inclusive unless min_exclusive
    Schema& add_required(const std::string& key, ValueType type, std::optional<double> min, std::optional<double> max,
                         const std::string& help, bool min_exclusive = false);
    const KeySpec* find(const std::string& key) const;
    const std::vector<KeySpec>& keys() const { return keys_; }
    // the known key closest to `key` (edit distance), for "did you mean" hints; empty if none is close
    std::string closest(const std::string& key) const;
    // a table of every key, type, default and help, for --help-config
    std::string describe() const;

  private:
    std::vector<KeySpec> keys_;
};

std::string value_to_toml(const Value& value);
std::string type_name(ValueType type);

class Config {
  public:
    // `what` names the thing being configured in messages (e.g. "config", "cluster file x.toml")
    explicit Config(const Schema& schema, std::string what = "config");

    // skip_tables: top-level tables left out (another reader's section, e.g. a cluster file's [ops])
    void merge_toml_file(const std::string& path, const std::vector<std::string>& skip_tables = {});
    void merge_toml_string(const std::string& text, const std::string& origin,
                           const std::vector<std::string>& skip_tables = {});
    // "section.key=value"; the value is parsed as TOML, and a bare word is taken as a string
    void apply_set(const std::string& assignment);
    void set(const std::string& key, const Value& value, const std::string& source);
    // after all merges: every required key must have been given
    void check_required() const;

    bool has(const std::string& key) const;  // given explicitly (not a default)
    int64_t get_int(const std::string& key) const;
    double get_float(const std::string& key) const;
    bool get_bool(const std::string& key) const;
    const std::string& get_string(const std::string& key) const;
    const std::vector<int64_t>& get_int_list(const std::string& key) const;
    const std::vector<double>& get_float_list(const std::string& key) const;
    const std::vector<std::string>& get_string_list(const std::string& key) const;
    const Value& get(const std::string& key) const;
    std::string source(const std::string& key) const;  // "default", a file path, or "--set"

    // every key, sorted, as `section.key = value` lines grouped in [section] tables
    std::string canonical_toml() const;
    std::string hash() const;  // sha256 hex of canonical_toml()
    std::vector<std::pair<std::string, std::string>> flat() const;  // (key, TOML value) sorted
    const Schema& schema() const { return *schema_; }

  private:
    struct Entry {
        Value value;
        std::string source;
    };
    const KeySpec& spec_or_throw(const std::string& key, const std::string& shown_value) const;
    const Entry& entry(const std::string& key, ValueType expected) const;

    const Schema* schema_;
    std::string what_;
    std::map<std::string, Entry> values_;
};

}  // namespace prophet
