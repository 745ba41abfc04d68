#include "core/toml_text.h"

#include <sstream>

#include "core/config.h"

namespace prophet {

std::string toml_node_text(const toml::node& node) {
    if (const toml::array* array = node.as_array()) {
        std::string s = "[";
        for (size_t i = 0; i < array->size(); ++i) s += (i ? ", " : "") + toml_node_text(*array->get(i));
        return s + "]";
    }
    if (const toml::table* table = node.as_table()) {
        if (table->empty()) return "{}";
        std::string s = "{ ";
        bool first = true;
        for (auto&& [key, value] : *table) {
            s += (first ? "" : ", ") + std::string(key.str()) + " = " + toml_node_text(value);
            first = false;
        }
        return s + " }";
    }
    if (auto v = node.value_exact<int64_t>()) return value_to_toml(Value(*v));
    if (auto v = node.value_exact<double>()) return value_to_toml(Value(*v));
    if (auto v = node.value_exact<bool>()) return value_to_toml(Value(*v));
    if (auto v = node.value_exact<std::string>()) return value_to_toml(Value(*v));
    std::ostringstream out;  // date, time, date-time
    node.visit([&](auto&& n) { out << n; });
    return out.str();
}

}  // namespace prophet
