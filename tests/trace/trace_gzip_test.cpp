// trace_gzip_test.cpp: gzip-compressed CSV traces: round trip, multi-member files, the errors for a truncated or
// corrupt stream and a compressed non-CSV file, and the real trace in ../shared/data/ where it exists.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <functional>
#include <string>

#include "core/error.h"
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

// Runs `body`, expects a prophet::Error with exit code 4 (resources) whose message holds every word.
void expect_resource_error(const std::function<void()>& body, std::initializer_list<std::string> words) {
    try {
        body();
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitResource) << e.what();
        for (const std::string& word : words)
            EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << "no \"" << word << "\" in: " << e.what();
    }
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

TEST(TraceGzip, EveryDefectiveGzipIsRefusedNamingTheFile) {
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
    expect_resource_error([&] { gunzip_file(packed.path(), 16); }, {packed.path(), "more than 16 bytes"});
    write_gzip(toml.path(), "[trace]\ngenerator = \"zipf\"\n");
    expect_input_error([&] { load_trace(toml.path()); }, {toml.path(), "not a CSV trace"});
}

// gzip bombs (issue 26 item 2), made here: a CSV header whose metadata declares num_iterations x num_layers x
// num_devices x num_experts cells, then `blank_bytes` newlines, which deflate ~1000:1. The CSV reader bounded the
// cells by the decompressed size, so a 10 KB file of 10 MB of newlines could declare 2^29 cells and allocated 4 GiB
// (and 40 s) before failing; now the decompressed size is bounded by the compressed size and the cells too.
struct GzipBomb {
    const char* label;
    int iterations, layers;  // x 16 devices x 32 experts
    size_t blank_bytes;
    const char* limit_named;  // in the exit-4 message
};

class TraceGzipBomb : public ::testing::TestWithParam<GzipBomb> {};

TEST_P(TraceGzipBomb, RefusedBeforeAllocatingWithExitFour) {
    const GzipBomb& b = GetParam();
    ScratchFile bomb(std::string(b.label) + ".csv.gz");
    write_gzip(bomb.path(), "# prophet trace csv v1\n# num_iterations=" + std::to_string(b.iterations) +
                                " num_layers=" + std::to_string(b.layers) +
                                " num_devices=16 num_experts=32 top_k=1 tokens_per_iteration=1 d_model=0 d_ffn=0 "
                                "seq_len=0 source=bomb\n" +
                                std::string(b.blank_bytes, '\n') + "iteration,layer,device,expert,tokens\n0,0,0,0,1\n");
    ASSERT_LT(std::filesystem::file_size(bomb.path()), 64u << 10) << "the bomb is meant to be small";
    expect_resource_error([&] { load_trace(bomb.path()); }, {bomb.path(), b.limit_named});
}

INSTANTIATE_TEST_SUITE_P(
    Bombs, TraceGzipBomb,
    ::testing::Values(GzipBomb{"cells", 1024, 1024, 10u << 20, "cells"},                // 2^29 cells declared (4 GiB)
                      GzipBomb{"ratio", 1, 1, 20u << 20, "more than 16777216 bytes"}),  // 20 MB > 16 MiB floor
    [](const auto& info) { return std::string(info.param.label); });

TEST(TraceGzip, DecompressedLimitFollowsTheCompressedSize) {
    EXPECT_EQ(gunzip_limit_bytes(0), kMinGunzipLimitBytes);
    EXPECT_EQ(gunzip_limit_bytes(1000), kMinGunzipLimitBytes);
    EXPECT_EQ(gunzip_limit_bytes(8618285), 8618285 * kMaxGunzipRatio);  // the real trace: 33 MB of 8.6 MB (3.8x)
    EXPECT_EQ(gunzip_limit_bytes(uint64_t(1) << 40), kMaxGunzippedTraceBytes);
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
