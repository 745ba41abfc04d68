// trace_gzip_test.cpp: gzip-compressed CSV traces: round trip, multi-member files, the errors for a truncated or
// corrupt stream and a compressed non-CSV file, and the real trace in ../shared/data/ where it exists.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <string>

#include "trace/trace.h"
#include "trace/trace_gzip.h"
#include "trace_test_util.h"

namespace prophet {
namespace {

using testing::expect_input_error;
using testing::read_bytes;
using testing::ScratchFile;
using testing::write_bytes;

// gzip-compresses `bytes` into `path` (one member) with zlib's gzip writer
void write_gzip(const std::string& path, const std::string& bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
}

Trace small_trace() {
    return generate_trace_from_toml_string(R"([trace]
generator = "zipf"
seed = 3
num_experts = 4
num_devices = 2
top_k = 2
tokens_per_iteration = 64
num_iterations = 3
num_layers = 2
d_model = 32
d_ffn = 64
seq_len = 16
)", "inline");
}

TEST(TraceGzip, CompressedCsvLoadsLikeThePlainFile) {
    const Trace trace = small_trace();
    ScratchFile plain("t.csv"), packed("t.csv.gz");
    write_trace_csv(trace, plain.path());
    write_gzip(packed.path(), read_bytes(plain.path()));
    EXPECT_TRUE(is_gzip_file(packed.path()));
    EXPECT_FALSE(is_gzip_file(plain.path()));
    const Trace back = load_trace(packed.path());
    EXPECT_EQ(back.counts, trace.counts);
    EXPECT_EQ(back.meta.num_layers, 2);
    EXPECT_EQ(back.meta.d_model, 32);
}

TEST(TraceGzip, ConcatenatedMembersDecompressToTheConcatenation) {
    ScratchFile a("a.gz"), b("b.gz"), ab("ab.gz");
    write_gzip(a.path(), "hello, ");
    write_gzip(b.path(), "world");
    write_bytes(ab.path(), read_bytes(a.path()) + read_bytes(b.path()));
    EXPECT_EQ(gunzip_file(ab.path(), 1 << 20), "hello, world");
}

TEST(TraceGzip, TruncatedCorruptOversizedAndNonCsvAreInputErrors) {
    const Trace trace = small_trace();
    ScratchFile plain("t.csv"), packed("t.csv.gz"), cut("cut.gz"), bad("bad.gz"), toml("toml.gz");
    write_trace_csv(trace, plain.path());
    write_gzip(packed.path(), read_bytes(plain.path()));
    const std::string bytes = read_bytes(packed.path());
    write_bytes(cut.path(), bytes.substr(0, bytes.size() / 2));
    expect_input_error([&] { load_trace(cut.path()); }, {cut.path(), "truncated"});
    std::string flipped = bytes;
    flipped[flipped.size() - 6] ^= 0x5a;  // inside the CRC-32 trailer
    write_bytes(bad.path(), flipped);
    expect_input_error([&] { load_trace(bad.path()); }, {bad.path(), "corrupt gzip"});
    expect_input_error([&] { gunzip_file(packed.path(), 16); }, {packed.path(), "more than 16 bytes"});
    write_gzip(toml.path(), "[trace]\ngenerator = \"zipf\"\n");
    expect_input_error([&] { load_trace(toml.path()); }, {toml.path(), "not a CSV trace"});
}

TEST(TraceGzip, RealSmartMoeTraceWhereItExists) {
    const std::string path = std::string(PROPHET_SOURCE_DIR) +
                             "/../shared/data/smartmoe-gpt/gpt-moe-16gpu-e32-iter1-2491.csv.gz";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "real trace absent: " << path << " (GPL-3.0 data, never copied into the repository)";
    const Trace t = load_trace(path);
    EXPECT_EQ(t.meta.num_iterations, 250);
    EXPECT_EQ(t.meta.num_layers, 24);
    EXPECT_EQ(t.meta.num_devices, 16);
    EXPECT_EQ(t.meta.num_experts, 32);
    EXPECT_EQ(t.meta.top_k, 2);
    int64_t first = 0;  // iteration 0, layer 0: 131072 tokens x top-2 assignments over all devices and experts
    for (int i = 0; i < 16 * 32; ++i) first += t.counts[static_cast<size_t>(i)];
    EXPECT_EQ(first, 131072 * 2);
}

}  // namespace
}  // namespace prophet
