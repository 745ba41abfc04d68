// trace_csv_test.cpp: the CSV trace format: bit-exact round trips, load_trace's detection, hand-written files
// (any row order, missing cells) and an exit-3 error naming the line for every kind of bad input.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace.h"
#include "trace_test_util.h"

namespace prophet {
namespace {

using testing::expect_input_error;
using testing::read_bytes;
using testing::ScratchFile;
using testing::write_bytes;

const char* kTinyToml = R"([trace]
generator = "zipf"
seed = 7
num_experts = 4
num_devices = 2
top_k = 2
tokens_per_iteration = 64
num_iterations = 3
num_layers = 3
d_model = 32
d_ffn = 64
seq_len = 16
)";

Trace tiny_trace(bool transitions) {
    std::string toml = kTinyToml;
    if (!transitions) toml += "record_transitions = false\n";
    return generate_trace_from_toml_string(toml, "tiny.toml");
}

void expect_same(const Trace& a, const Trace& b) {
    EXPECT_EQ(a.meta.num_iterations, b.meta.num_iterations);
    EXPECT_EQ(a.meta.num_layers, b.meta.num_layers);
    EXPECT_EQ(a.meta.num_devices, b.meta.num_devices);
    EXPECT_EQ(a.meta.num_experts, b.meta.num_experts);
    EXPECT_EQ(a.meta.top_k, b.meta.top_k);
    EXPECT_EQ(a.meta.tokens_per_iteration, b.meta.tokens_per_iteration);
    EXPECT_EQ(a.meta.d_model, b.meta.d_model);
    EXPECT_EQ(a.meta.d_ffn, b.meta.d_ffn);
    EXPECT_EQ(a.meta.seq_len, b.meta.seq_len);
    EXPECT_EQ(a.meta.source, b.meta.source);
    EXPECT_EQ(a.counts, b.counts);
    EXPECT_EQ(a.transitions, b.transitions);
}

int64_t non_zero(const std::vector<int64_t>& values) {
    int64_t n = 0;
    for (int64_t v : values) n += v != 0;
    return n;
}

int64_t count_lines(const std::string& text) {
    int64_t n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

// I = 2, L = 1, D = 2, E = 2, K = 1, 8 tokens; line 7 is (iteration 0, layer 0, device 1, expert 0).
const std::vector<std::string> kSmallLines = {
    "# prophet trace csv v1",
    "# num_iterations=2 num_layers=1 num_devices=2 num_experts=2 top_k=1 tokens_per_iteration=8 d_model=64 "
    "d_ffn=128 seq_len=32 source=file:hand written",
    "iteration,layer,device,expert,tokens",
    "0,0,0,0,3",
    "0,0,0,1,1",
    "0,0,1,1,2",
    "0,0,1,0,2",
    "1,0,0,0,4",
    "1,0,1,1,4",
};

std::string join(const std::vector<std::string>& lines, bool final_newline = true) {
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) text += lines[i] + (i + 1 < lines.size() || final_newline ? "\n" : "");
    return text;
}

// kSmallLines with line `number` (1-based) replaced by `text`
std::string small_with(int number, const std::string& text) {
    std::vector<std::string> lines = kSmallLines;
    lines[number - 1] = text;
    return join(lines);
}

TEST(TraceCsv, RoundTripWithTransitionsIsBitExact) {
    const Trace trace = tiny_trace(true);
    ASSERT_TRUE(trace.has_transitions());
    ScratchFile file("t.csv");
    write_trace_csv(trace, file.path());
    const Trace back = read_trace_csv(file.path());
    expect_same(trace, back);

    const std::string text = read_bytes(file.path());
    EXPECT_EQ(text.rfind("# prophet trace csv v1\n# num_iterations=3 num_layers=3 num_devices=2 num_experts=4 top_k=2 "
                         "tokens_per_iteration=64 d_model=32 d_ffn=64 seq_len=16 source=synthetic:zipf\n"
                         "iteration,layer,device,expert,tokens\n",
                         0),
              0u)
        << text.substr(0, 300);
    EXPECT_NE(text.find("\n# transitions\niteration,layer,from_expert,to_expert,tokens\n"), std::string::npos);
    // 3 header lines, one row per non-zero count, the 2 lines opening the transitions, one row per transition
    EXPECT_EQ(count_lines(text), 3 + non_zero(trace.counts) + 2 + non_zero(trace.transitions));

    ScratchFile again("again.csv");
    write_trace_csv(back, again.path());
    EXPECT_EQ(read_bytes(again.path()), text);
    EXPECT_FALSE(std::filesystem::exists(file.path() + ".tmp"));
}

TEST(TraceCsv, RoundTripWithoutTransitionsIsBitExact) {
    const Trace trace = tiny_trace(false);
    ASSERT_FALSE(trace.has_transitions());
    ScratchFile file("t.csv");
    write_trace_csv(trace, file.path());
    const std::string text = read_bytes(file.path());
    EXPECT_EQ(text.find("transitions"), std::string::npos);
    EXPECT_EQ(count_lines(text), 3 + non_zero(trace.counts));
    const Trace back = read_trace_csv(file.path());
    EXPECT_FALSE(back.has_transitions());
    expect_same(trace, back);
}

TEST(TraceCsv, RoundTripKeepsAnOddSource) {
    Trace trace = tiny_trace(true);
    for (const std::string source : {"", "file:/a b/c=d x=1 \\n", "profile:run\nwith\r\nbreaks\\", "  padded  "}) {
        trace.meta.source = source;
        ScratchFile file("t.csv");
        write_trace_csv(trace, file.path());
        EXPECT_EQ(count_lines(read_bytes(file.path())), 3 + non_zero(trace.counts) + 2 + non_zero(trace.transitions));
        expect_same(trace, read_trace_csv(file.path()));
    }
}

TEST(TraceCsv, WriteRefusesAnInvalidTraceLeavingTheOldFile) {
    Trace trace = tiny_trace(false);
    ScratchFile file("t.csv");
    write_bytes(file.path(), "old");
    trace.counts[0] += 1;
    expect_input_error([&] { write_trace_csv(trace, file.path()); }, {file.path(), "sum to"});
    EXPECT_EQ(read_bytes(file.path()), "old");
}

TEST(TraceCsv, WriteOverwritesAtomically) {
    const Trace trace = tiny_trace(false);
    ScratchFile file("t.csv");
    write_bytes(file.path(), "old");
    write_trace_csv(trace, file.path());
    expect_same(trace, read_trace_csv(file.path()));
    EXPECT_FALSE(std::filesystem::exists(file.path() + ".tmp"));
}

TEST(TraceCsv, LoadTraceDetectsCsv) {
    const Trace trace = tiny_trace(true);
    ScratchFile csv("t.csv");
    write_trace_csv(trace, csv.path());
    expect_same(trace, load_trace(csv.path()));

    // Windows line endings are read the same way
    std::string crlf;
    for (char c : read_bytes(csv.path())) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    ScratchFile windows("crlf.csv");
    write_bytes(windows.path(), crlf);
    expect_same(trace, load_trace(windows.path()));

    // any other first line is not CSV: here it goes to the TOML parser
    ScratchFile other("other.csv");
    write_bytes(other.path(), "# prophet trace csv v1 \n" + read_bytes(csv.path()).substr(23));
    expect_input_error([&] { load_trace(other.path()); }, {other.path(), "TOML"});
}

TEST(TraceCsv, LoadTraceReadsCsvLargerThanAGeneratorToml) {
    const std::string toml = R"([trace]
generator = "uniform"
num_experts = 64
num_devices = 16
tokens_per_iteration = 65536
num_iterations = 8
num_layers = 8
)";
    const Trace trace = generate_trace_from_toml_string(toml, "big.toml");
    ScratchFile csv("big.csv");
    write_trace_csv(trace, csv.path());
    ASSERT_GT(read_bytes(csv.path()).size(), 1u << 20);
    expect_same(trace, load_trace(csv.path()));
}

TEST(TraceCsv, ReadsRowsInAnyOrderWithMissingCellsAsZero) {
    std::vector<std::string> lines = {kSmallLines[0], kSmallLines[1], kSmallLines[2],
                                      "1,0,1,1,4",  "0,0,1,0,2", "",  "  0 , 0 , 0 , 0 , 3  ",
                                      "# a comment", "1,0,0,0,4", "0,0,1,1,2", "0,0,0,1,1", "1,0,0,1,0"};
    ScratchFile file("t.csv");
    write_bytes(file.path(), join(lines, false));
    const Trace trace = load_trace(file.path());
    EXPECT_EQ(trace.meta.num_iterations, 2);
    EXPECT_EQ(trace.meta.tokens_per_iteration, 8);
    EXPECT_EQ(trace.meta.d_ffn, 128);
    EXPECT_EQ(trace.meta.source, "file:hand written");
    EXPECT_FALSE(trace.has_transitions());
    EXPECT_EQ(trace.counts, (std::vector<int64_t>{3, 1, 2, 2, 4, 0, 0, 4}));
}

// Writes `text` and expects read_trace_csv and load_trace to fail with exit code 3 and every word.
std::string expect_csv_error(const std::string& text, std::initializer_list<std::string> words) {
    ScratchFile file("bad.csv");
    write_bytes(file.path(), text);
    std::vector<std::string> all(words);
    all.push_back(file.path());
    std::string message;
    for (auto reader : {&read_trace_csv, &load_trace}) {
        message = expect_input_error([&] { reader(file.path()); }, {});
        for (const std::string& word : all)
            EXPECT_NE(message.find(word), std::string::npos) << "missing \"" << word << "\" in: " << message;
    }
    return message;
}

TEST(TraceCsvErrors, SmallFileIsValid) {
    ScratchFile file("t.csv");
    write_bytes(file.path(), join(kSmallLines));
    EXPECT_EQ(read_trace_csv(file.path()).counts, (std::vector<int64_t>{3, 1, 2, 2, 4, 0, 0, 4}));
}

TEST(TraceCsvErrors, NaNCount) {
    const std::string message = expect_csv_error(small_with(7, "0,0,1,0,NaN"), {"NaN"});
    EXPECT_NE(message.find("count is NaN on line 7 (iteration 0, layer 0, device 1, expert 0): counts must be "
                           "non-negative integers"),
              std::string::npos)
        << message;
    expect_csv_error(small_with(7, "0,0,1,0,nan"), {"NaN", "line 7"});
}

TEST(TraceCsvErrors, NegativeCount) {
    expect_csv_error(small_with(7, "0,0,1,0,-2"), {"-2 is negative", "line 7", "device 1, expert 0"});
    expect_csv_error(small_with(7, "0,0,1,0,-2.5"), {"negative", "line 7"});
}

TEST(TraceCsvErrors, NonIntegerCount) {
    expect_csv_error(small_with(7, "0,0,1,0,2.5"), {"2.5 is not an integer", "line 7"});
    expect_csv_error(small_with(7, "0,0,1,0,2e0"), {"not an integer", "line 7"});
    expect_csv_error(small_with(7, "0,0,1,0,inf"), {"infinite", "line 7"});
    expect_csv_error(small_with(7, "0,0,1,0,99999999999999999999"), {"too large", "line 7"});
}

TEST(TraceCsvErrors, EmptyOrNonNumericCell) {
    expect_csv_error(small_with(7, "0,0,1,0,"), {"count is empty", "line 7"});
    expect_csv_error(small_with(7, "0,,1,0,2"), {"layer is empty", "line 7"});
    expect_csv_error(small_with(7, "0,0,1,0,two"), {"\"two\" is not a number", "line 7"});
    expect_csv_error(small_with(7, "0,0,x,0,2"), {"device \"x\" is not a number", "line 7"});
}

TEST(TraceCsvErrors, IndexOutOfRange) {
    expect_csv_error(small_with(7, "0,0,2,0,2"), {"device 2", "out of range", "line 7", "num_devices = 2"});
    expect_csv_error(small_with(7, "0,0,1,-1,2"), {"expert -1", "out of range", "line 7"});
    expect_csv_error(small_with(7, "2,0,1,0,2"), {"iteration 2", "out of range", "line 7"});
    expect_csv_error(small_with(7, "0,1,1,0,2"), {"layer 1", "out of range", "line 7"});
}

TEST(TraceCsvErrors, MetadataProblems) {
    std::string meta = kSmallLines[1];
    meta.replace(meta.find("num_experts=2 "), 14, "");
    expect_csv_error(small_with(2, meta), {"\"num_experts\" is missing", "line 2"});
    expect_csv_error(small_with(2, kSmallLines[1].substr(0, kSmallLines[1].find(" source="))),
                     {"\"source\" is missing"});
    expect_csv_error(small_with(2, "# top_k=1 " + kSmallLines[1].substr(2)), {"\"top_k\" is given twice"});
    expect_csv_error(small_with(2, "# topk=1 " + kSmallLines[1].substr(2)), {"unknown metadata key \"topk\""});
    std::string big_k = kSmallLines[1];
    big_k.replace(big_k.find("top_k=1"), 7, "top_k=3");
    expect_csv_error(small_with(2, big_k), {"\"top_k\" = 3", "out of range", "[1, 2]"});
    std::string bad_value = kSmallLines[1];
    bad_value.replace(bad_value.find("d_model=64"), 10, "d_model=6.4");
    expect_csv_error(small_with(2, bad_value), {"\"d_model\" 6.4 is not an integer"});
    expect_csv_error(small_with(2, "num_iterations=2"), {"line 2 must be the metadata comment"});
}

TEST(TraceCsvErrors, WrongFirstLine) {
    expect_input_error(
        [&] {
            ScratchFile file("t.csv");
            write_bytes(file.path(), small_with(1, "# prophet trace csv v2"));
            read_trace_csv(file.path());
        },
        {"unsupported CSV trace version"});
    expect_input_error(
        [&] {
            ScratchFile file("t.csv");
            write_bytes(file.path(), small_with(1, "iteration,layer,device,expert,tokens"));
            read_trace_csv(file.path());
        },
        {"not a prophet CSV trace", "line 1"});
}

TEST(TraceCsvErrors, WrongColumnCount) {
    expect_csv_error(small_with(7, "0,0,1,2"), {"line 7 has 4 columns, expected 5"});
    expect_csv_error(small_with(7, "0,0,1,0,2,9"), {"line 7 has 6 columns"});
    expect_csv_error(small_with(3, "iteration,layer,device,tokens"), {"line 3 must be the column header"});
}

TEST(TraceCsvErrors, DuplicateCell) {
    expect_csv_error(small_with(7, "0,0,0,0,2"),
                     {"duplicate cell on line 7 (iteration 0, layer 0, device 0, expert 0): already given on line 4"});
    expect_csv_error(small_with(7, "0,0,0,0,0"), {"duplicate", "line 4"});
}

TEST(TraceCsvErrors, Truncated) {
    // header present, no data rows
    std::vector<std::string> header(kSmallLines.begin(), kSmallLines.begin() + 3);
    expect_csv_error(join(header), {"truncated", "no data rows"});
    expect_csv_error(join({kSmallLines[0], kSmallLines[1]}), {"truncated", "no column header"});
    expect_csv_error(join({kSmallLines[0]}), {"truncated", "line 1"});
    // last line cut mid-row (no final newline)
    std::string text = join(kSmallLines);
    expect_csv_error(text.substr(0, text.size() - 5), {"truncated", "line 9", "3 columns"});
    expect_csv_error(text.substr(0, text.size() - 3), {"truncated", "line 9", "4 columns"});
    expect_csv_error(text.substr(0, text.size() - 2), {"truncated", "line 9", "count is empty"});
    expect_csv_error(text.substr(0, text.find("d_ffn")), {"truncated", "line 2"});
    // a complete last row without a newline is fine; one that lost digits is caught by the sums
    ScratchFile file("t.csv");
    write_bytes(file.path(), text.substr(0, text.size() - 1));
    EXPECT_EQ(read_trace_csv(file.path()).counts[7], 4);
    std::vector<std::string> cut = kSmallLines;
    cut.back() = "1,0,1,1,1";
    expect_csv_error(join(cut, false), {"sum to 5"});
}

TEST(TraceCsvErrors, SumsAreValidated) {
    expect_csv_error(small_with(7, "0,0,1,0,3"),
                     {"iteration 0, layer 0 sum to 9, expected tokens_per_iteration x top_k = 8 x 1 = 8"});
}

TEST(TraceCsvErrors, TransitionProblems) {
    const Trace trace = tiny_trace(true);
    ScratchFile good("good.csv");
    write_trace_csv(trace, good.path());
    const std::string text = read_bytes(good.path());
    const size_t section = text.find("# transitions\n");
    ASSERT_NE(section, std::string::npos);
    const std::string columns = "iteration,layer,from_expert,to_expert,tokens\n";
    const size_t rows = section + 14 + columns.size();
    const std::string first_row = text.substr(rows, text.find('\n', rows) + 1 - rows);
    const int64_t first_row_line = count_lines(text.substr(0, rows)) + 1;

    expect_csv_error(text.substr(0, rows) + "0,2,0,0,1\n" + text.substr(rows),
                     {"layer 2", "out of range", "num_layers - 1 = 2", "line " + std::to_string(first_row_line)});
    expect_csv_error(text + first_row, {"duplicate", "already given on line " + std::to_string(first_row_line)});
    expect_csv_error(text.substr(0, rows) + "0,0,0,0,nan\n" + text.substr(rows),
                     {"count is NaN", "from_expert 0, to_expert 0"});
    expect_csv_error(text.substr(0, section + 14), {"truncated", "no column header"});
    expect_csv_error(text.substr(0, rows), {"truncated", "no data rows"});
    expect_csv_error(text + "# transitions\n", {"second transitions section"});
    // a row dropped from the transitions disagrees with the counts
    expect_csv_error(text.substr(0, rows) + text.substr(rows + first_row.size()), {"transitions at iteration 0"});

    // a transitions section needs two layers
    expect_csv_error(join(kSmallLines) + "# transitions\n" + columns, {"num_layers = 1"});
}

}  // namespace
}  // namespace prophet
