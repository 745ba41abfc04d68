// trace_csv.cpp: the human-readable CSV trace's reader (docs/trace-format.md, section 6): a version line, a metadata
// comment line, the non-zero counts as iteration,layer,device,expert,tokens rows and an optional transitions
// section. It names the line and the cell of every defect. The writer is trace_csv_write.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "trace/capped_product.h"
#include "trace/escaped_bytes.h"
#include "trace/trace.h"
#include "trace/trace_csv_format.h"
#include "trace/trace_gzip.h"

namespace prophet {
namespace {

using trace_csv::kCountsColumns;
using trace_csv::kTransitionsColumns;
using trace_csv::kTransitionsMarker;
using trace_csv::kVersionLine;
using trace_csv::kVersionPrefix;
using trace_csv::unescape_source;

constexpr size_t kNumColumns = 5;
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kUnset = -1;  // a cell no row has given (yet); becomes 0
// Bounds from the file's size, checked before the dense arrays are allocated (a 197-byte file declaring
// num_iterations = 2e9 once allocated 16 GB): every (iteration, layer) needs at least one row with a positive count,
// and a row is at least kMinRowBytes ("0,0,0,0,1" and a newline, the last one maybe without). Rows may leave zero
// cells out, so the arrays may be larger than the file, but by at most kCellsPerByte cells per byte of the file
// (or kMinDenseCells in all, for small hand-written files).
constexpr uint64_t kMinRowBytes = 9;
constexpr uint64_t kCellsPerByte = 64;
constexpr uint64_t kMinDenseCells = 1ull << 22;
constexpr const char* kIntKeys[] = {"num_iterations", "num_layers", "num_devices", "num_experts", "top_k",
                                    "tokens_per_iteration", "d_model", "d_ffn", "seq_len"};
constexpr const char* kFormatFix = "see docs/trace-format.md (CSV format), or write the file with write_trace_csv";
constexpr const char* kTruncatedFix = "the file was cut short; complete it or write it again (write_trace_csv)";

struct Line {
    std::string_view text;   // without the newline and a trailing '\r'
    int64_t number = 0;      // 1-based
    bool terminated = true;  // ended with a newline
    size_t end = 0;          // offset of the next line
};

// The line starting at byte `begin` of `text` (begin < text.size()), numbered `number`.
Line line_at(std::string_view text, size_t begin, int64_t number) {
    const size_t newline = text.find('\n', begin);
    const bool terminated = newline != std::string_view::npos;
    std::string_view line = text.substr(begin, (terminated ? newline : text.size()) - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return {line, number, terminated, terminated ? newline + 1 : text.size()};
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

std::vector<std::string_view> split_cells(std::string_view text) {
    std::vector<std::string_view> cells;
    size_t begin = 0;
    while (true) {
        const size_t comma = text.find(',', begin);
        cells.push_back(trim(text.substr(begin, comma == std::string_view::npos ? std::string_view::npos
                                                                                 : comma - begin)));
        if (comma == std::string_view::npos) return cells;
        begin = comma + 1;
    }
}

// The text of a cell or line for a message: printable ASCII, others as \xNN, long text cut with "...".
std::string shown(std::string_view text) {
    constexpr size_t kMaxShown = 60;
    return "\"" + escaped_bytes(text.substr(0, kMaxShown)) + (text.size() > kMaxShown ? "..." : "") + "\"";
}

enum class NumberKind { kOk, kEmpty, kNaN, kNegative, kNotInteger, kInfinite, kTooLarge, kNotNumber };

struct Number {
    NumberKind kind = NumberKind::kNotNumber;
    int64_t value = 0;
};

Number parse_number(std::string_view cell) {
    if (cell.empty()) return {NumberKind::kEmpty};
    std::string_view body = cell.front() == '+' ? cell.substr(1) : cell;  // from_chars rejects '+'
    if (body.empty()) return {NumberKind::kNotNumber};
    const char* end = body.data() + body.size();
    int64_t value = 0;
    auto [int_end, int_error] = std::from_chars(body.data(), end, value);
    if (int_end == end && int_error == std::errc())
        return {value < 0 ? NumberKind::kNegative : NumberKind::kOk, value};
    if (int_end == end && int_error == std::errc::result_out_of_range)
        return {body.front() == '-' ? NumberKind::kNegative : NumberKind::kTooLarge};
    double real = 0;
    auto [real_end, real_error] = std::from_chars(body.data(), end, real);
    if (real_end != end || (real_error != std::errc() && real_error != std::errc::result_out_of_range))
        return {NumberKind::kNotNumber};
    if (std::isnan(real)) return {NumberKind::kNaN};
    if (body.front() == '-' && real != 0) return {NumberKind::kNegative};
    if (std::isinf(real)) return {NumberKind::kInfinite};
    return {NumberKind::kNotInteger};
}

// "is NaN", "-2 is negative", "2.5 is not an integer", ... (the words after the column name)
std::string describe(const Number& number, std::string_view cell) {
    switch (number.kind) {
        case NumberKind::kOk: return "= " + std::string(cell);
        case NumberKind::kEmpty: return "is empty";
        case NumberKind::kNaN: return "is NaN";
        case NumberKind::kNegative: return std::string(cell) + " is negative";
        case NumberKind::kNotInteger: return std::string(cell) + " is not an integer";
        case NumberKind::kInfinite: return std::string(cell) + " is infinite";
        case NumberKind::kTooLarge: return std::string(cell) + " is too large (above 2^63 - 1)";
        case NumberKind::kNotNumber: break;
    }
    return shown(cell) + " is not a number";
}

enum class Section { kCountsColumns, kCounts, kTransitionsColumns, kTransitions };

// One section's shape: the four index columns, their bounds and the array the rows fill.
struct Table {
    const char* names[4];
    int64_t bounds[4];
    const char* bound_names[4];
    std::vector<int64_t>* cells;
    Line columns_line;  // the section's column header
    int64_t rows = 0;
    int64_t header_line = 0;  // 1-based line of the "# transitions" marker or the counts column header
};

class CsvReader {
  public:
    // compressed_bytes > 0: `text` was decompressed from a gzip file of that size, which then bounds the cells
    CsvReader(const std::string& path, std::string_view text, uint64_t compressed_bytes = 0)
        : path_(path), text_(text), compressed_bytes_(compressed_bytes) {}

    Trace read() {
        const Line meta_line = read_header_lines();
        const Section section = read_sections(meta_line);
        check_sections_complete(section);
        for (int64_t& value : trace_.counts) value = std::max<int64_t>(value, 0);
        for (int64_t& value : trace_.transitions) value = std::max<int64_t>(value, 0);
        validate_trace(trace_, path_);
        return std::move(trace_);
    }

  private:
    // Lines 1 and 2 (version, metadata): sets the meta, checks the sizes against the file and sizes the counts
    // and both tables; returns the metadata line.
    Line read_header_lines() {
        const Line version = text_.empty() ? Line{} : line_at(text_, 0, 1);
        check_version_line(version);
        if (version.end >= text_.size())
            fail_plain("truncated: the file ends after line 1; expected the metadata line "
                       "\"# num_iterations=... source=...\" on line 2",
                       kTruncatedFix);
        const Line meta_line = line_at(text_, version.end, 2);
        trace_.meta = parse_meta(meta_line);
        const TraceMeta& m = trace_.meta;
        check_size({m.num_iterations, m.num_layers, m.num_devices, m.num_experts},
                   "num_iterations x num_layers x num_devices x num_experts", "counts");
        check_rows_fit(m);
        check_dense_cells(capped_product({m.num_iterations, m.num_layers, m.num_devices, m.num_experts}),
                          "num_iterations x num_layers x num_devices x num_experts");
        trace_.counts.assign(static_cast<size_t>(m.num_iterations) * m.num_layers * m.num_devices * m.num_experts,
                             kUnset);
        counts_ = {{"iteration", "layer", "device", "expert"},
                   {m.num_iterations, m.num_layers, m.num_devices, m.num_experts},
                   {"num_iterations", "num_layers", "num_devices", "num_experts"},
                   &trace_.counts, {}, 0, 0};
        transitions_ = {{"iteration", "layer", "from_expert", "to_expert"},
                        {m.num_iterations, m.num_layers - 1, m.num_experts, m.num_experts},
                        {"num_iterations", "num_layers - 1", "num_experts", "num_experts"},
                        &trace_.transitions, {}, 0, 0};
        return meta_line;
    }

    // Every line after the metadata line: comments, the column headers and the data rows of both sections;
    // returns the section the file ends in.
    Section read_sections(const Line& meta_line) {
        Section section = Section::kCountsColumns;
        for (Line line = meta_line; line.end < text_.size();) {
            line = line_at(text_, line.end, line.number + 1);
            const std::string_view text = trim(line.text);
            if (text.empty()) continue;
            if (text.front() == '#') {
                if (trim(text.substr(1)).starts_with(kTransitionsMarker)) section = start_transitions(line, section);
                continue;
            }
            switch (section) {
                case Section::kCountsColumns:
                    expect_columns(line, kCountsColumns);
                    counts_.columns_line = line;
                    counts_.header_line = line.number;
                    section = Section::kCounts;
                    break;
                case Section::kTransitionsColumns:
                    expect_columns(line, kTransitionsColumns);
                    transitions_.columns_line = line;
                    section = Section::kTransitions;
                    break;
                case Section::kCounts: read_row(line, counts_); break;
                case Section::kTransitions: read_row(line, transitions_); break;
            }
        }
        return section;
    }

    // A file that ends before a section it opened has its column header and at least one row is truncated.
    void check_sections_complete(Section section) const {
        if (section == Section::kCountsColumns)
            fail_plain("truncated: no column header \"" + std::string(kCountsColumns) + "\" and no data rows after "
                       "the metadata line",
                       kTruncatedFix);
        if (counts_.rows == 0)
            fail_plain("truncated: no data rows after the column header on line " +
                           std::to_string(counts_.header_line) + " (every iteration and layer needs its counts)",
                       kTruncatedFix);
        if (section == Section::kTransitionsColumns)
            fail_plain("truncated: the transitions section on line " + std::to_string(transitions_.header_line) +
                           " has no column header \"" + std::string(kTransitionsColumns) + "\"",
                       kTruncatedFix);
        if (section == Section::kTransitions && transitions_.rows == 0)
            fail_plain("truncated: the transitions section on line " + std::to_string(transitions_.header_line) +
                           " has no data rows",
                       kTruncatedFix + std::string(", or remove the empty section"));
    }

    [[noreturn]] void fail_plain(const std::string& problem, const std::string& fix) const {
        throw_input_error(path_, problem, fix);
    }

    // A defect of `line`; one that a cut-off last line would also cause (too few columns, an empty cell)
    // is reported as truncation when the file ends inside that line.
    [[noreturn]] void fail(const Line& line, const std::string& problem, const std::string& fix,
                           bool cut_off_shape = false) const {
        if (cut_off_shape && !line.terminated)
            throw_input_error(path_,
                              "truncated: the file ends inside line " + std::to_string(line.number) +
                                  " (no newline): " + problem,
                              kTruncatedFix);
        throw_input_error(path_, problem, fix);
    }

    void check_version_line(const Line& version) const {
        const std::string_view first = version.text;
        if (first == kVersionLine) return;
        if (first.starts_with(kVersionPrefix))
            fail_plain("unsupported CSV trace version " + shown(first) + " on line 1 (this build reads \"" +
                           std::string(kVersionLine) + "\")",
                       "use a prophet build that reads this version, or export the trace again");
        fail_plain("not a prophet CSV trace: line 1 must be exactly \"" + std::string(kVersionLine) + "\", found " +
                       shown(first),
                   kFormatFix);
    }

    // The metadata line's entries: "key=value" pairs of known integer keys, each once, then source=<rest of line>.
    struct MetaEntries {
        std::map<std::string, std::string_view> values;
        bool has_source = false;
        std::string_view source;
    };

    MetaEntries split_meta_entries(const Line& line) const {
        const std::string at = " on line " + std::to_string(line.number);
        std::string_view text = line.text;
        if (!text.starts_with('#'))
            fail(line, "line 2 must be the metadata comment \"# num_iterations=... source=...\", found " + shown(text),
                 kFormatFix, true);
        text.remove_prefix(1);
        MetaEntries entries;
        while (true) {
            while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
            if (trim(text).empty()) break;
            if (text.starts_with("source=")) {  // the rest of the line, verbatim
                entries.has_source = true;
                entries.source = text.substr(7);
                break;
            }
            const size_t space = std::min(text.find(' '), text.find('\t'));
            const std::string_view entry = text.substr(0, space);
            text = space == std::string_view::npos ? std::string_view() : text.substr(space);
            const size_t equals = entry.find('=');
            if (equals == std::string_view::npos)
                fail(line, "malformed metadata entry " + shown(entry) + at + " (expected key=value)", kFormatFix,
                     true);
            const std::string key(entry.substr(0, equals));
            if (std::find_if(std::begin(kIntKeys), std::end(kIntKeys), [&](const char* k) { return key == k; }) ==
                std::end(kIntKeys))
                fail(line, "unknown metadata key " + shown(key) + at,
                     "the keys are num_iterations, num_layers, num_devices, num_experts, top_k, "
                     "tokens_per_iteration, d_model, d_ffn, seq_len and source (last)");
            if (!entries.values.emplace(key, entry.substr(equals + 1)).second)
                fail(line, "metadata key \"" + key + "\" is given twice" + at, "keep one of the two");
        }
        return entries;
    }

    // The integer metadata value of `key`, present and in [min, max].
    int64_t meta_int(const Line& line, const MetaEntries& entries, const char* key, int64_t min, int64_t max) const {
        const std::string at = " on line " + std::to_string(line.number);
        auto it = entries.values.find(key);
        if (it == entries.values.end())
            fail(line, std::string("metadata key \"") + key + "\" is missing" + at,
                 std::string("add ") + key + "=<integer> to the metadata line (docs/trace-format.md, CSV format)",
                 true);
        const Number number = parse_number(it->second);
        if (number.kind != NumberKind::kOk && number.kind != NumberKind::kNegative)
            fail(line,
                 std::string("metadata key \"") + key + "\" " + describe(number, it->second) + at +
                     ": it must be an integer",
                 kFormatFix, number.kind == NumberKind::kEmpty);
        if (number.kind == NumberKind::kNegative || number.value < min || number.value > max)
            fail(line,
                 std::string("metadata key \"") + key + "\" = " + std::string(it->second) + at +
                     " is out of range: must be in [" + std::to_string(min) + ", " + std::to_string(max) + "]",
                 "fix the value in the metadata line");
        return number.value;
    }

    TraceMeta parse_meta(const Line& line) const {
        const MetaEntries entries = split_meta_entries(line);
        auto get = [&](const char* key, int64_t min, int64_t max) { return meta_int(line, entries, key, min, max); };
        TraceMeta meta;
        meta.num_iterations = static_cast<int>(get("num_iterations", 1, kIntMax));
        meta.num_layers = static_cast<int>(get("num_layers", 1, kIntMax));
        meta.num_devices = static_cast<int>(get("num_devices", 1, kIntMax));
        meta.num_experts = static_cast<int>(get("num_experts", 1, kIntMax));
        meta.top_k = static_cast<int>(get("top_k", 1, meta.num_experts));
        meta.tokens_per_iteration = get("tokens_per_iteration", 1, kMaxTraceTokensPerIteration);
        meta.d_model = static_cast<int>(get("d_model", 0, kIntMax));
        meta.d_ffn = static_cast<int>(get("d_ffn", 0, kIntMax));
        meta.seq_len = static_cast<int>(get("seq_len", 0, kIntMax));
        if (!entries.has_source)
            fail(line, "metadata key \"source\" is missing on line " + std::to_string(line.number),
                 "end the metadata line with source=<text> (may be empty)", true);
        meta.source = unescape_source(entries.source);
        return meta;
    }

    void check_size(std::initializer_list<int64_t> factors, const std::string& product, const char* what) const {
        if (capped_product(factors) > kMaxTraceArrayElements)
            fail_plain("sizes too large: " + product + " exceeds 2^31 " + what + " (metadata on line 2)",
                       "split the trace into fewer iterations or layers");
    }

    // every (iteration, layer) needs a row of at least kMinRowBytes: more than the file holds is a lie
    void check_rows_fit(const TraceMeta& m) const {
        const uint64_t pairs = static_cast<uint64_t>(m.num_iterations) * static_cast<uint64_t>(m.num_layers);
        if (pairs > text_.size() / kMinRowBytes)
            fail_plain("num_iterations x num_layers = " + std::to_string(pairs) +
                           " (metadata on line 2) needs at least as many data rows of " +
                           std::to_string(kMinRowBytes) + "+ bytes, more than the file's " +
                           std::to_string(text_.size()) + " bytes hold",
                       "fix num_iterations and num_layers on line 2, or complete the file");
    }

    // the dense arrays, `cells` int64 in all, stay within kCellsPerByte per byte of the file
    void check_dense_cells(uint64_t cells, const std::string& product) const {
        if (compressed_bytes_ > 0) return check_compressed_cells(cells, product);
        const uint64_t limit = std::max<uint64_t>(kMinDenseCells, kCellsPerByte * text_.size());
        if (cells > limit)
            fail_plain("sizes too large for the file: " + product + " = " + std::to_string(cells) +
                           " cells (metadata on line 2), but a CSV trace of " + std::to_string(text_.size()) +
                           " bytes may declare at most " + std::to_string(limit) + " (" +
                           std::to_string(kCellsPerByte) + " per byte, or 2^22): rows leave zero cells out, not "
                           "nearly all of them",
                       "fix the sizes on line 2; a trace that large belongs in the binary format (docs/trace-format.md)");
    }

    // the same bound per byte of the gzip file: a resource limit (exit 4), since a bomb is no malformed file
    void check_compressed_cells(uint64_t cells, const std::string& product) const {
        const uint64_t limit = std::max<uint64_t>(kMinDenseCells, kCellsPerByte * compressed_bytes_);
        if (cells > limit)
            throw Error(kExitResource, "resource error: " + path_ + ": " + product + " = " + std::to_string(cells) +
                                           " cells (metadata on line 2) exceed the limit of " + std::to_string(limit) +
                                           " cells for a gzip file of " + std::to_string(compressed_bytes_) +
                                           " bytes (" + std::to_string(kCellsPerByte) +
                                           " per compressed byte, or 2^22)" +
                                           "; fix: fix the sizes on line 2, or store a trace that large in the "
                                           "binary format (docs/trace-format.md)");
    }

    Section start_transitions(const Line& line, Section section) {
        if (section == Section::kTransitionsColumns || section == Section::kTransitions)
            fail(line, "a second transitions section starts on line " + std::to_string(line.number) +
                           " (the first is on line " + std::to_string(transitions_.header_line) + ")",
                 "merge the two sections into one");
        if (section == Section::kCountsColumns)
            fail(line, "the transitions section on line " + std::to_string(line.number) +
                           " comes before the counts column header \"" + std::string(kCountsColumns) + "\"",
                 "put the counts (with their column header) first, then the transitions section");
        const TraceMeta& m = trace_.meta;
        if (m.num_layers < 2)
            fail(line, "a transitions section on line " + std::to_string(line.number) +
                           " but num_layers = 1 (transitions connect consecutive layers)",
                 "remove the transitions section or fix num_layers");
        check_size({m.num_iterations, m.num_layers - 1, m.num_experts, m.num_experts},
                   "num_iterations x (num_layers - 1) x num_experts^2", "transitions");
        check_dense_cells(trace_.counts.size() +
                              capped_product({m.num_iterations, m.num_layers - 1, m.num_experts, m.num_experts}),
                          "the counts and num_iterations x (num_layers - 1) x num_experts^2 transitions");
        trace_.transitions.assign(
            static_cast<size_t>(m.num_iterations) * (m.num_layers - 1) * m.num_experts * m.num_experts, kUnset);
        transitions_.header_line = line.number;
        return Section::kTransitionsColumns;
    }

    void expect_columns(const Line& line, std::string_view columns) const {
        const std::vector<std::string_view> found = split_cells(line.text);
        const std::vector<std::string_view> expected = split_cells(columns);
        if (found != expected)
            fail(line, "line " + std::to_string(line.number) + " must be the column header \"" +
                           std::string(columns) + "\", found " + shown(line.text),
                 kFormatFix, true);
    }

    struct Row {
        int64_t index[4];
        int64_t value;
        size_t cell;  // flat index into the table's array
    };

    std::string where(const Table& table, const Row& row) const {
        std::string text = "(";
        for (int c = 0; c < 4; ++c)
            text += std::string(c ? ", " : "") + table.names[c] + " " + std::to_string(row.index[c]);
        return text + ")";
    }

    Row parse_row(const Line& line, const Table& table) const {
        const std::string at = " on line " + std::to_string(line.number);
        const std::vector<std::string_view> cells = split_cells(line.text);
        const std::string_view columns = table.cells == &trace_.counts ? kCountsColumns : kTransitionsColumns;
        if (cells.size() != kNumColumns)
            fail(line, "line " + std::to_string(line.number) + " has " + std::to_string(cells.size()) +
                           " columns, expected " + std::to_string(kNumColumns) + " (" + std::string(columns) + ")",
                 "write every row as " + std::string(columns), true);
        Row row{};
        for (int c = 0; c < 4; ++c) {
            const Number number = parse_number(cells[c]);
            if (number.kind == NumberKind::kOk && number.value < table.bounds[c]) {
                row.index[c] = number.value;
                continue;
            }
            if (number.kind == NumberKind::kOk || number.kind == NumberKind::kNegative)
                fail(line, std::string(table.names[c]) + " " + std::string(cells[c]) + at + " is out of range: must " +
                               "be in [0, " + std::to_string(table.bounds[c]) + ") (" + table.bound_names[c] + " = " +
                               std::to_string(table.bounds[c]) + " in the metadata on line 2)",
                     "fix the index, or the dimensions in the metadata line");
            fail(line, std::string(table.names[c]) + " " + describe(number, cells[c]) + at +
                           ": indices must be non-negative integers",
                 "fix the cell", number.kind == NumberKind::kEmpty);
        }
        const Number count = parse_number(cells[4]);
        row.value = count.value;
        if (count.kind != NumberKind::kOk)
            fail(line, "count " + describe(count, cells[4]) + at + " " + where(table, row) +
                           ": counts must be non-negative integers",
                 "write the number of tokens as a whole number >= 0 (omit the row for 0)",
                 count.kind == NumberKind::kEmpty);
        size_t cell = 0;
        for (int c = 0; c < 4; ++c) cell = cell * static_cast<size_t>(table.bounds[c]) + row.index[c];
        row.cell = cell;
        return row;
    }

    void read_row(const Line& line, Table& table) {
        const Row row = parse_row(line, table);
        std::vector<int64_t>& cells = *table.cells;
        if (cells[row.cell] != kUnset) {
            int64_t earlier = 0;
            for (Line before = line_at(text_, table.columns_line.end, table.columns_line.number + 1);
                 before.number < line.number; before = line_at(text_, before.end, before.number + 1)) {
                const std::string_view text = trim(before.text);
                if (!text.empty() && text.front() != '#' && parse_row(before, table).cell == row.cell) {
                    earlier = before.number;
                    break;
                }
            }
            fail(line, "duplicate cell on line " + std::to_string(line.number) + " " + where(table, row) +
                           ": already given on line " + std::to_string(earlier),
                 "give every cell once (add the two counts if both rows are meant)");
        }
        cells[row.cell] = row.value;
        ++table.rows;
    }

    const std::string& path_;
    std::string_view text_;
    uint64_t compressed_bytes_ = 0;  // > 0: text_ was decompressed from a gzip file of this size
    Trace trace_;
    Table counts_{};
    Table transitions_{};
};

}  // namespace

Trace read_trace_csv(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw_input_error(path, "no such file", "check the path; CSV traces are written by write_trace_csv");
    if (std::filesystem::is_directory(path, ec))
        throw_input_error(path, "is a directory, not a trace file", "pass a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_input_error(path, "cannot open file", "check its permissions");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw_input_error(path, "read error", "check the file and the disk");
    return CsvReader(path, text).read();
}

Trace read_trace_csv_text(const std::string& text, const std::string& origin) { return CsvReader(origin, text).read(); }

Trace read_trace_csv_gzip_text(const std::string& text, const std::string& origin, uint64_t compressed_bytes) {
    return CsvReader(origin, text, std::max<uint64_t>(compressed_bytes, 1)).read();
}

}  // namespace prophet
