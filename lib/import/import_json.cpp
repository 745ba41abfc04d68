// import_json.cpp: the JSON (and CSV) load matrices of SGLang, vLLM and DeepSeek EPLB.
//
// sglang: {"logical_count": [L][E]} or {"logical_count": [S][L][E]}, as SGLang's --init-expert-location reads it
//         (python/sglang/srt/eplb/expert_location.py); L counts every decoder layer, dense ones as zero rows.
// vllm:   {"load_history": [{"logical_expert_load": [L][E]}, ...]}, one entry per forward step: vLLM's
//         expert_load_window [steps, MoE layers, physical experts] mapped to logical experts.
// eplb:   DeepSeek EPLB's `weight` [layers, logical experts]: a JSON matrix (bare or {"weight": ...}) or CSV with
//         one row of comma-separated counts per layer.
#include <algorithm>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "load_series.h"

namespace prophet::import_detail {
namespace {

using nlohmann::json;

std::string index_text(const std::string& field, size_t i) { return field + "[" + std::to_string(i) + "]"; }

// The [L][E] shape of `matrix` from its first row; exit 3 naming `field` unless it is a non-empty list of
// non-empty lists.
void matrix_shape(const json& matrix, const std::string& path, const std::string& field, int& layers, int& experts) {
    if (!matrix.is_array() || matrix.empty())
        throw_input_error(path, field + " must be a non-empty list of layers, found " + std::string(matrix.type_name()),
                          "write one list of per-expert counts per layer");
    if (!matrix[0].is_array() || matrix[0].empty())
        throw_input_error(path,
                          index_text(field, 0) + " must be a non-empty list of per-expert counts, found " +
                              std::string(matrix[0].type_name()),
                          "write one count per expert");
    if (matrix.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
        matrix[0].size() > static_cast<size_t>(std::numeric_limits<int>::max()))
        throw_input_error(path, field + " is too large", "split the file");
    layers = static_cast<int>(matrix.size());
    experts = static_cast<int>(matrix[0].size());
}

// exit 3 naming `field` unless `list` is a list of `size` entries (`unit`: what an entry is, for the message)
void expect_list(const json& list, int size, const std::string& path, const std::string& field, const char* unit,
                 const char* expected_because, const char* fix) {
    if (list.is_array() && list.size() == static_cast<size_t>(size)) return;
    throw_input_error(
        path,
        field + " has " +
            (list.is_array() ? std::to_string(list.size()) + " " + unit : "no list of " + std::string(unit)) +
            ", expected " + std::to_string(size) + " " + expected_because,
        fix);
}

// Copies the [layers][experts] counts of `matrix` into `out`, row-major; every row must have `experts` entries.
void read_matrix(const json& matrix, const std::string& path, const std::string& field, int layers, int experts,
                 int64_t* out) {
    expect_list(matrix, layers, path, field, "layers", "(as in the first step)", "every step lists the same layers");
    for (int l = 0; l < layers; ++l) {
        const json& row = matrix[static_cast<size_t>(l)];
        const std::string row_field = index_text(field, static_cast<size_t>(l));
        expect_list(row, experts, path, row_field, "entries", "(one per expert)",
                    "every layer lists every expert once");
        for (int e = 0; e < experts; ++e)
            out[static_cast<size_t>(l) * experts + e] =
                json_count(row[static_cast<size_t>(e)], path, index_text(row_field, static_cast<size_t>(e)));
    }
}

LoadSeries series_of_shape(const std::string& path, int steps, int layers, int experts) {
    check_cells(path, steps, layers, 1, experts);
    LoadSeries series;
    series.origin = path;
    series.steps = steps;
    series.layers = layers;
    series.experts = experts;
    series.counts.assign(static_cast<size_t>(steps) * layers * experts, 0);
    for (int l = 0; l < layers; ++l) series.layer_names.push_back("layer " + std::to_string(l));
    return series;
}

const json& required_member(const json& object, const std::string& path, const char* key, const std::string& what) {
    if (!object.is_object())
        throw_input_error(
            path, what + " must be a JSON object with \"" + key + "\", found " + std::string(object.type_name()),
            "pass the file in the format docs/trace-format.md (section 7) describes");
    const auto it = object.find(key);
    if (it == object.end())
        throw_input_error(path, what + " has no field \"" + key + "\"",
                          "pass the file in the format docs/trace-format.md (section 7) describes");
    return *it;
}

}  // namespace

LoadSeries parse_sglang(const std::string& path) {
    const json root = parse_json_file(path);
    const json& counts = required_member(root, path, "logical_count", "the file");
    if (!counts.is_array() || counts.empty())
        throw_input_error(path, "logical_count must be a non-empty [layers][experts] or [steps][layers][experts] list",
                          "dump the recorder in stat mode and convert it (report/sglang_dump_to_json.py)");
    const bool per_step = counts[0].is_array() && !counts[0].empty() && counts[0][0].is_array();
    int layers = 0, experts = 0;
    matrix_shape(per_step ? counts[0] : counts, path, per_step ? "logical_count[0]" : "logical_count", layers, experts);
    const int steps = per_step ? static_cast<int>(std::min<size_t>(counts.size(), std::numeric_limits<int>::max())) : 1;
    LoadSeries series = series_of_shape(path, steps, layers, experts);
    for (int s = 0; s < steps; ++s) {
        const json& matrix = per_step ? counts[static_cast<size_t>(s)] : counts;
        read_matrix(matrix, path, per_step ? index_text("logical_count", static_cast<size_t>(s)) : "logical_count",
                    layers, experts, series.counts.data() + static_cast<size_t>(s) * layers * experts);
    }
    return series;
}

LoadSeries parse_vllm(const std::string& path) {
    const json root = parse_json_file(path);
    const json& history = required_member(root, path, "load_history", "the file");
    if (!history.is_array() || history.empty())
        throw_input_error(path, "load_history must be a non-empty list of steps",
                          "record at least one step's logical_expert_load");
    if (history.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
        throw_input_error(path, "load_history has too many steps", "split the file");
    int layers = 0, experts = 0;
    matrix_shape(required_member(history[0], path, "logical_expert_load", "load_history[0]"), path,
                 "load_history[0].logical_expert_load", layers, experts);
    const int steps = static_cast<int>(history.size());
    LoadSeries series = series_of_shape(path, steps, layers, experts);
    for (int s = 0; s < steps; ++s) {
        const std::string entry = index_text("load_history", static_cast<size_t>(s));
        const json& matrix = required_member(history[static_cast<size_t>(s)], path, "logical_expert_load", entry);
        read_matrix(matrix, path, entry + ".logical_expert_load", layers, experts,
                    series.counts.data() + static_cast<size_t>(s) * layers * experts);
    }
    return series;
}

}  // namespace prophet::import_detail

namespace prophet::import_detail {
namespace {

std::string_view trimmed(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
    return text;
}

// One CSV cell as a count: digits only, at most kMaxImportCount.
int64_t csv_count(std::string_view cell, const std::string& path, int line, size_t column) {
    const std::string where = "line " + std::to_string(line) + ", column " + std::to_string(column + 1);
    if (cell.empty()) throw_input_error(path, "the cell on " + where + " is empty", "write one count per expert");
    int64_t value = 0;
    for (char c : cell) {
        if (c < '0' || c > '9')
            throw_input_error(
                path,
                "the cell \"" + std::string(cell.substr(0, 40)) + "\" on " + where + " is not a non-negative integer",
                "counts are tokens routed to an expert: non-negative integers");
        value = value * 10 + (c - '0');
        if (value > kMaxImportCount)
            throw_input_error(path, "the cell on " + where + " is larger than 2^40", "check the file");
    }
    return value;
}

// The data lines of a CSV matrix (blank lines and lines starting with '#' skipped), with their line numbers.
std::vector<std::pair<int, std::string_view>> csv_rows(const std::string& text) {
    std::vector<std::pair<int, std::string_view>> rows;
    std::string_view rest(text);
    for (int line = 1; !rest.empty(); ++line) {
        const size_t end = rest.find('\n');
        const std::string_view row = trimmed(rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        if (!row.empty() && row.front() != '#') rows.emplace_back(line, row);
    }
    return rows;
}

LoadSeries parse_eplb_csv(const std::string& path, const std::string& text) {
    const auto rows = csv_rows(text);
    if (rows.empty()) throw_input_error(path, "no rows: the file has no counts", "write one row per layer");
    const auto cells_of = [](std::string_view row) {
        return static_cast<size_t>(std::count(row.begin(), row.end(), ',')) + 1;
    };
    const size_t experts = cells_of(rows[0].second);
    for (const auto& [line, row] : rows)
        if (cells_of(row) != experts)
            throw_input_error(path,
                              "line " + std::to_string(line) + " has " + std::to_string(cells_of(row)) +
                                  " columns, expected " + std::to_string(experts) + " (as on line " +
                                  std::to_string(rows[0].first) + ")",
                              "write one count per expert on every row");
    LoadSeries series = series_of_shape(path, 1, static_cast<int>(rows.size()), static_cast<int>(experts));
    for (size_t l = 0; l < rows.size(); ++l) {
        std::string_view rest = rows[l].second;
        for (size_t e = 0; e < experts; ++e) {
            const size_t comma = rest.find(',');
            series.counts[l * experts + e] = csv_count(trimmed(rest.substr(0, comma)), path, rows[l].first, e);
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        }
    }
    return series;
}

}  // namespace

LoadSeries parse_eplb(const std::string& path) {
    const std::string text = read_bounded_file(path);
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) throw_input_error(path, "the file is empty", "write one row per layer");
    if (text[first] != '[' && text[first] != '{') return parse_eplb_csv(path, text);
    json root;
    try {
        root = json::parse(text);
    } catch (const json::exception& e) {
        throw_input_error(path, std::string("not valid JSON: ") + e.what(), "write a [layers][experts] JSON list");
    }
    const bool wrapped = root.is_object();
    const json& matrix = wrapped ? required_member(root, path, "weight", "the file") : root;
    const std::string field = wrapped ? "weight" : "the matrix";
    int layers = 0, experts = 0;
    matrix_shape(matrix, path, field, layers, experts);
    LoadSeries series = series_of_shape(path, 1, layers, experts);
    read_matrix(matrix, path, field, layers, experts, series.counts.data());
    return series;
}

}  // namespace prophet::import_detail
