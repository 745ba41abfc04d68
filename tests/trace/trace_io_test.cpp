// trace_io_test.cpp: the binary trace file (round trips, every corruption is rejected with a clear exit-3
// error), validate_trace and load_trace's content sniffing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

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

// A file split into its parts, to corrupt one of them and put it back together.
struct FileParts {
    std::string magic;
    nlohmann::ordered_json header;
    std::string data;

    static FileParts read(const std::string& path) {
        const std::string bytes = read_bytes(path);
        FileParts parts;
        parts.magic = bytes.substr(0, 8);
        uint64_t length = 0;
        for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[8 + i]);
        parts.header = nlohmann::ordered_json::parse(bytes.substr(16, length));
        parts.data = bytes.substr(16 + length);
        return parts;
    }
    void write(const std::string& path) const { write_raw(path, header.dump()); }
    void write_raw(const std::string& path, const std::string& header_text) const {
        std::string bytes = magic;
        for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header_text.size() >> (8 * i)) & 0xff);
        write_bytes(path, bytes + header_text + data);
    }
};

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

TEST(TraceFile, RoundTripWithTransitionsIsBitExact) {
    ScratchFile file("a.trace");
    ScratchFile again("b.trace");
    const Trace trace = tiny_trace(true);
    ASSERT_TRUE(trace.has_transitions());
    write_trace_file(trace, file.path());
    const Trace back = read_trace_file(file.path());
    expect_same(trace, back);
    write_trace_file(back, again.path());
    EXPECT_EQ(read_bytes(file.path()), read_bytes(again.path()));
    EXPECT_FALSE(std::filesystem::exists(file.path() + ".tmp"));

    const FileParts parts = FileParts::read(file.path());
    EXPECT_EQ(parts.magic, "PRTRACE1");
    EXPECT_EQ(parts.header["format_version"], 1);
    EXPECT_EQ(parts.header["has_transitions"], true);
    EXPECT_EQ(parts.header["source"], "synthetic:zipf");
    EXPECT_EQ(parts.data.size(), (trace.counts.size() + trace.transitions.size()) * 8);
    EXPECT_EQ((read_bytes(file.path()).size() - parts.data.size()) % 8, 0u) << "data must start 8-byte aligned";
}

TEST(TraceFile, RoundTripWithoutTransitionsIsBitExact) {
    ScratchFile file("a.trace");
    ScratchFile again("b.trace");
    const Trace trace = tiny_trace(false);
    ASSERT_FALSE(trace.has_transitions());
    write_trace_file(trace, file.path());
    const Trace back = read_trace_file(file.path());
    expect_same(trace, back);
    EXPECT_FALSE(back.has_transitions());
    write_trace_file(back, again.path());
    EXPECT_EQ(read_bytes(file.path()), read_bytes(again.path()));
    EXPECT_EQ(FileParts::read(file.path()).header["has_transitions"], false);
}

TEST(TraceFile, DataIsLittleEndianInt64) {
    Trace trace;
    trace.meta.num_iterations = 1;
    trace.meta.num_layers = 1;
    trace.meta.num_devices = 1;
    trace.meta.num_experts = 2;
    trace.meta.top_k = 1;
    trace.meta.tokens_per_iteration = (int64_t{1} << 40) + 3;
    trace.meta.source = "hand";
    trace.counts = {(int64_t{1} << 40) + 1, 2};
    ScratchFile file("le.trace");
    write_trace_file(trace, file.path());
    const FileParts parts = FileParts::read(file.path());
    ASSERT_EQ(parts.data.size(), 16u);
    const unsigned char expected[16] = {1, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    EXPECT_EQ(std::memcmp(parts.data.data(), expected, 16), 0);
    expect_same(trace, read_trace_file(file.path()));
}

TEST(TraceFile, OverwritesAtomically) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(true), file.path());
    const Trace other = tiny_trace(false);
    write_trace_file(other, file.path());
    expect_same(other, read_trace_file(file.path()));
    EXPECT_FALSE(std::filesystem::exists(file.path() + ".tmp"));
}

TEST(TraceFile, WriteRefusesAnInvalidTrace) {
    ScratchFile file("a.trace");
    Trace trace = tiny_trace(true);
    trace.counts[5] += 1;
    expect_input_error([&] { write_trace_file(trace, file.path()); }, {file.path(), "sum"});
    EXPECT_FALSE(std::filesystem::exists(file.path()));
}

TEST(TraceFile, RejectsMissingFile) {
    ScratchFile file("absent.trace");
    expect_input_error([&] { read_trace_file(file.path()); }, {file.path(), "no such file"});
    expect_input_error([&] { load_trace(file.path()); }, {file.path(), "no such file"});
}

TEST(TraceFile, RejectsWrongMagic) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(true), file.path());
    std::string bytes = read_bytes(file.path());
    bytes[7] = '2';
    write_bytes(file.path(), bytes);
    expect_input_error([&] { read_trace_file(file.path()); }, {file.path(), "not a prophet trace file", "magic"});
}

TEST(TraceFile, RejectsFilesWithoutATraceHeader) {
    ScratchFile file("a.toml");
    write_bytes(file.path(), kTinyToml);
    expect_input_error([&] { read_trace_file(file.path()); }, {"magic"});
    write_bytes(file.path(), "PRT");
    expect_input_error([&] { read_trace_file(file.path()); }, {"magic"});
    write_bytes(file.path(), "PRTRACE1\x10");
    expect_input_error([&] { read_trace_file(file.path()); }, {"truncated"});
}

TEST(TraceFile, RejectsHeaderLengthBeyondFileSize) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(true), file.path());
    std::string bytes = read_bytes(file.path());
    bytes[14] = 1;  // header length += 2^48
    write_bytes(file.path(), bytes);
    expect_input_error([&] { read_trace_file(file.path()); }, {"header length", "exceeds the file size"});
    bytes[14] = 0;
    bytes[11] = 7;  // 117 MiB more header than there is file
    write_bytes(file.path(), bytes);
    expect_input_error([&] { read_trace_file(file.path()); }, {"header length", "exceeds the file size"});
}

TEST(TraceFile, RejectsBadJson) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(true), file.path());
    FileParts parts = FileParts::read(file.path());
    std::string text = parts.header.dump();
    text[text.size() - 1] = ',';
    parts.write_raw(file.path(), text);
    expect_input_error([&] { read_trace_file(file.path()); }, {file.path(), "not valid JSON"});
    parts.write_raw(file.path(), "[1, 2]");
    expect_input_error([&] { read_trace_file(file.path()); }, {"must be an object"});
}

TEST(TraceFile, RejectsMissingOrInvalidHeaderFields) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(true), file.path());
    const FileParts good = FileParts::read(file.path());
    auto expect_field_error = [&](const std::function<void(nlohmann::ordered_json&)>& edit,
                                  std::initializer_list<std::string> words) {
        FileParts parts = good;
        edit(parts.header);
        parts.write(file.path());
        expect_input_error([&] { read_trace_file(file.path()); }, words);
    };
    for (const char* field : {"num_iterations", "num_layers", "num_devices", "num_experts", "top_k",
                              "tokens_per_iteration", "d_model", "d_ffn", "seq_len", "source", "has_transitions",
                              "format_version"})
        expect_field_error([&](auto& h) { h.erase(field); }, {field, "missing"});
    expect_field_error([](auto& h) { h["num_devices"] = 0; }, {"num_devices", "out of range"});
    expect_field_error([](auto& h) { h["num_experts"] = -4; }, {"num_experts", "out of range"});
    expect_field_error([](auto& h) { h["tokens_per_iteration"] = 0; }, {"tokens_per_iteration", "out of range"});
    expect_field_error([](auto& h) { h["d_model"] = -1; }, {"d_model", "out of range"});
    expect_field_error([](auto& h) { h["num_layers"] = "3"; }, {"num_layers", "must be an integer"});
    expect_field_error([](auto& h) { h["num_layers"] = 2.5; }, {"num_layers", "must be an integer"});
    expect_field_error([](auto& h) { h["num_iterations"] = uint64_t{1} << 63; }, {"num_iterations", "out of range"});
    expect_field_error([](auto& h) { h["top_k"] = 5; }, {"top_k", "out of range"});
    expect_field_error([](auto& h) { h["has_transitions"] = 1; }, {"has_transitions", "true or false"});
    expect_field_error([](auto& h) { h["source"] = 3; }, {"source", "string"});
    expect_field_error([](auto& h) { h["format_version"] = 2; }, {"format_version"});
}

TEST(TraceFile, RejectsAbsurdSizesBeforeAllocating) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(true), file.path());
    FileParts parts = FileParts::read(file.path());
    parts.header["num_iterations"] = 2147483647;
    parts.header["num_layers"] = 2147483647;
    parts.header["num_devices"] = 2147483647;
    parts.header["num_experts"] = 2147483647;
    parts.write(file.path());
    expect_input_error([&] { read_trace_file(file.path()); }, {"too large", "2^31"});

    parts = FileParts::read(file.path());
    parts.header["num_iterations"] = 1;
    parts.header["num_layers"] = 65536;
    parts.header["num_devices"] = 1;
    parts.header["num_experts"] = 1024;  // counts fit, transitions would be 2^36
    parts.write(file.path());
    expect_input_error([&] { read_trace_file(file.path()); }, {"too large", "transitions"});
}

TEST(TraceFile, RejectsTruncatedData) {
    ScratchFile file("a.trace");
    const Trace trace = tiny_trace(true);
    write_trace_file(trace, file.path());
    const std::string bytes = read_bytes(file.path());
    const size_t data_start = bytes.size() - (trace.counts.size() + trace.transitions.size()) * 8;

    write_bytes(file.path(), bytes.substr(0, bytes.size() - 1));
    expect_input_error([&] { read_trace_file(file.path()); },
                       {"truncated: expected " + std::to_string(trace.transitions.size() * 8) +
                            " bytes of transitions", "found " + std::to_string(trace.transitions.size() * 8 - 1)});
    write_bytes(file.path(), bytes.substr(0, data_start + 40));
    expect_input_error([&] { read_trace_file(file.path()); },
                       {"truncated: expected " + std::to_string(trace.counts.size() * 8) + " bytes of counts",
                        "found 40"});
}

TEST(TraceFile, RejectsTrailingBytes) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(false), file.path());
    write_bytes(file.path(), read_bytes(file.path()) + std::string(8, '\0'));
    expect_input_error([&] { read_trace_file(file.path()); }, {"trailing bytes", "8 bytes"});
}

TEST(TraceFile, RejectsNegativeCount) {
    ScratchFile file("a.trace");
    const Trace trace = tiny_trace(false);
    write_trace_file(trace, file.path());
    FileParts parts = FileParts::read(file.path());
    // iteration 1, layer 2, device 1, expert 3 of [3][3][2][4]
    const size_t index = ((1 * 3 + 2) * 2 + 1) * 4 + 3;
    const int64_t negative = -1;
    std::memcpy(parts.data.data() + index * 8, &negative, 8);
    parts.write(file.path());
    expect_input_error([&] { read_trace_file(file.path()); },
                       {"negative count -1", "iteration 1, layer 2, device 1, expert 3"});
}

TEST(TraceFile, RejectsWrongRowSum) {
    ScratchFile file("a.trace");
    write_trace_file(tiny_trace(false), file.path());
    FileParts parts = FileParts::read(file.path());
    parts.header["tokens_per_iteration"] = 65;
    parts.write(file.path());
    expect_input_error([&] { read_trace_file(file.path()); },
                       {"iteration 0, layer 0 sum to 128", "expected tokens_per_iteration x top_k = 65 x 2 = 130"});
}

TEST(TraceFile, RejectsInconsistentTransitions) {
    ScratchFile file("a.trace");
    const Trace trace = tiny_trace(true);
    write_trace_file(trace, file.path());
    FileParts parts = FileParts::read(file.path());
    int64_t value = 0;
    const size_t offset = (trace.counts.size() + 5) * 8;
    std::memcpy(&value, parts.data.data() + offset, 8);
    value += 1;
    std::memcpy(parts.data.data() + offset, &value, 8);
    parts.write(file.path());
    expect_input_error([&] { read_trace_file(file.path()); }, {"transitions", "iteration 0, layers 0->1"});
}

TEST(TraceValidate, NamesTheFirstProblem) {
    Trace trace = tiny_trace(true);
    validate_trace(trace, "ok");
    Trace bad = trace;
    bad.counts[((2 * 3 + 1) * 2 + 0) * 4 + 2] = -5;
    expect_input_error([&] { validate_trace(bad, "origin-x"); },
                       {"origin-x", "negative count -5 at iteration 2, layer 1, device 0, expert 2"});
    bad = trace;
    bad.counts.pop_back();
    expect_input_error([&] { validate_trace(bad, "o"); }, {"counts has 71 elements", "72"});
    bad = trace;
    bad.transitions.pop_back();
    expect_input_error([&] { validate_trace(bad, "o"); }, {"transitions has"});
    bad = trace;
    bad.transitions[16 * 3 + 4 * 1 + 2] = -1;  // iteration 1, layers 1->2, experts 1->2 of [3][2][4][4]
    expect_input_error([&] { validate_trace(bad, "o"); },
                       {"negative transition count -1 at iteration 1, layers 1->2, experts 1->2"});
    bad = trace;
    bad.meta.top_k = 5;
    expect_input_error([&] { validate_trace(bad, "o"); }, {"top_k = 5 exceeds num_experts = 4"});
    bad = trace;
    bad.meta.num_devices = 0;
    expect_input_error([&] { validate_trace(bad, "o"); }, {"num_devices = 0"});
    bad = trace;
    std::swap(bad.counts[0], bad.counts[1]);  // same sums, but transitions no longer match the loads
    if (bad.counts[0] != bad.counts[1])
        expect_input_error([&] { validate_trace(bad, "o"); }, {"transitions", "disagree"});
}

TEST(LoadTrace, DecidesByContent) {
    ScratchFile binary("binary.toml");  // the extension must not matter
    ScratchFile text("text.trace");
    const Trace trace = tiny_trace(true);
    write_trace_file(trace, binary.path());
    write_bytes(text.path(), kTinyToml);
    expect_same(trace, load_trace(binary.path()));
    const Trace generated = load_trace(text.path());
    EXPECT_EQ(generated.counts, trace.counts);
    EXPECT_EQ(generated.transitions, trace.transitions);
}

TEST(LoadTrace, RejectsBinaryGarbage) {
    ScratchFile file("garbage");
    write_bytes(file.path(), std::string("\x01\x02\0\0\x05junk", 9));
    expect_input_error([&] { load_trace(file.path()); }, {file.path(), "neither a prophet trace file"});
    write_bytes(file.path(), "this is = = not toml");
    expect_input_error([&] { load_trace(file.path()); }, {file.path(), "TOML syntax error"});
    write_bytes(file.path(), "");
    expect_input_error([&] { load_trace(file.path()); }, {file.path(), "empty file"});
}

}  // namespace
}  // namespace prophet
