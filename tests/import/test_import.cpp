// test_import.cpp: each engine format's hand-written fixture (tests/fixtures/import/) into a trace whose per-layer
// expert loads equal the file's; the split and rescale rules; round trip through the binary trace file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "import/import.h"

namespace prophet {
namespace {

const std::string kFixtures = std::string(PROPHET_SOURCE_DIR) + "/tests/fixtures/import/";

// loads[iteration][layer][expert], summed by hand from each fixture (the dense layer and the empty step left out)
using Loads = std::vector<std::vector<std::vector<int64_t>>>;

struct RoundTripCase {
    const char* name;
    ImportOptions options;
    int devices, top_k;
    int64_t tokens;
    const char* split;  // "recorded" or "uniform", as the source records it
    Loads loads;
};

ImportOptions opts(const char* format, std::vector<std::string> files, int devices, int top_k) {
    ImportOptions o;
    o.format = format;
    for (std::string& f : files) f = kFixtures + f;
    o.files = files;
    o.devices = devices;
    o.top_k = top_k;
    return o;
}

ImportOptions megatron_opts() {
    ImportOptions o = opts("megatron", {"megatron"}, 2, 2);
    o.ep_size = 2;
    o.pp_size = 2;
    return o;
}

const RoundTripCase kRoundTrip[] = {
    {"sglang_steps",
     opts("sglang", {"sglang-steps.json"}, 3, 2),
     3,
     2,
     6,
     "uniform",
     {{{5, 3, 2, 2}, {4, 4, 3, 1}}, {{6, 2, 2, 2}, {3, 3, 3, 3}}, {{1, 2, 3, 6}, {7, 1, 2, 2}}}},
    {"sglang_summed", opts("sglang", {"sglang-summed.json"}, 2, 1), 2, 1, 4, "uniform", {{{3, 1, 0, 0}, {2, 2, 0, 0}}}},
    {"vllm",
     opts("vllm", {"vllm.json"}, 4, 2),
     4,
     2,
     4,
     "uniform",
     {{{4, 2, 1, 1}, {2, 2, 2, 2}}, {{3, 3, 1, 1}, {1, 1, 1, 5}}, {{0, 0, 4, 4}, {6, 0, 1, 1}}}},
    // layers: (stage 0, layer 1), (stage 1, layer 0), (stage 1, layer 1); stage 0's layer 0 is dense (no records)
    {"megatron",
     megatron_opts(),
     2,
     2,
     8,
     "uniform",
     {{{5, 3, 3, 5}, {2, 2, 6, 6}, {5, 5, 3, 3}}, {{6, 2, 4, 4}, {4, 4, 4, 4}, {8, 0, 4, 4}}}},
    {"trtllm_directory",
     opts("trtllm", {"trtllm"}, 0, 0),
     2,
     2,
     8,
     "recorded",
     {{{4, 4, 4, 4}, {2, 6, 6, 2}}, {{6, 2, 2, 6}, {6, 2, 4, 4}}}},
    {"eplb_csv", opts("eplb", {"eplb-weight.csv"}, 4, 2), 4, 2, 8, "uniform", {{{10, 2, 3, 1}, {4, 4, 4, 4}}}},
    {"eplb_json", opts("eplb", {"eplb-weight.json"}, 4, 2), 4, 2, 8, "uniform", {{{10, 2, 3, 1}, {4, 4, 4, 4}}}},
};

class ImportRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(ImportRoundTrip, PerLayerLoadsEqualTheFile) {
    const RoundTripCase& c = GetParam();
    const Trace trace = import_engine_trace(c.options).trace;
    ASSERT_EQ(trace.meta.num_iterations, static_cast<int>(c.loads.size()));
    ASSERT_EQ(trace.meta.num_layers, static_cast<int>(c.loads[0].size()));
    EXPECT_EQ(trace.meta.num_experts, 4);
    EXPECT_EQ(trace.meta.num_devices, c.devices);
    EXPECT_EQ(trace.meta.top_k, c.top_k);
    EXPECT_EQ(trace.meta.tokens_per_iteration, c.tokens);
    for (int i = 0; i < trace.meta.num_iterations; ++i)
        for (int l = 0; l < trace.meta.num_layers; ++l)
            EXPECT_EQ(expert_loads(trace, i, l), c.loads[i][l]) << "iteration " << i << ", layer " << l;
}

TEST_P(ImportRoundTrip, SourceRecordsTheFormatAndRules) {
    const RoundTripCase& c = GetParam();
    const Trace trace = import_engine_trace(c.options).trace;
    const std::string prefix = "import:" + c.options.format + " split=" + c.split + " tokens=exact file=";
    EXPECT_EQ(trace.meta.source.rfind(prefix, 0), 0u) << trace.meta.source;
}

TEST_P(ImportRoundTrip, BinaryFileReadsBackTheSameTrace) {
    const RoundTripCase& c = GetParam();
    const Trace trace = import_engine_trace(c.options).trace;
    const auto path = std::filesystem::temp_directory_path() / ("prophet-import-" + std::string(c.name) + ".ptrace");
    write_trace_file(trace, path.string());
    const Trace back = read_trace_file(path.string());
    std::filesystem::remove(path);
    EXPECT_EQ(back.counts, trace.counts);
    EXPECT_EQ(back.meta.source, trace.meta.source);
}

INSTANTIATE_TEST_SUITE_P(Formats, ImportRoundTrip, ::testing::ValuesIn(kRoundTrip),
                         [](const auto& info) { return std::string(info.param.name); });

// The per-device rows of the trtllm fixture are the ranks' own bincounts, unchanged (make-trtllm-fixture.py).
TEST(ImportTrtllm, RecordedSplitKeepsEachRanksRow) {
    const Trace trace = import_engine_trace(opts("trtllm", {"trtllm"}, 0, 0)).trace;
    const std::vector<int64_t> rank0_5_3 = {3, 1, 2, 2}, rank1_6_4 = {5, 1, 1, 1};
    EXPECT_EQ(std::vector<int64_t>(trace.layer_counts(0, 0), trace.layer_counts(0, 0) + 4), rank0_5_3);
    EXPECT_EQ(std::vector<int64_t>(trace.layer_counts(1, 1) + 4, trace.layer_counts(1, 1) + 8), rank1_6_4);
}

TEST(ImportTrtllm, ExplicitFilesEqualTheDirectory) {
    const Trace from_dir = import_engine_trace(opts("trtllm", {"trtllm"}, 0, 0)).trace;
    const Trace from_files =
        import_engine_trace(
            opts("trtllm", {"trtllm/rank1.safetensors", "trtllm/meta_info.json", "trtllm/rank0.safetensors"}, 0, 0))
            .trace;
    EXPECT_EQ(from_files.counts, from_dir.counts);
}

// Uniform spread: each expert's column sums to its load, device rows differ by at most one token.
TEST(ImportSplit, UniformSpreadKeepsLoadsAndBalancesDevices) {
    const Trace trace = import_engine_trace(opts("sglang", {"sglang-steps.json"}, 5, 2)).trace;
    for (int i = 0; i < trace.meta.num_iterations; ++i)
        for (int l = 0; l < trace.meta.num_layers; ++l) {
            const int64_t* m = trace.layer_counts(i, l);
            int64_t low = INT64_MAX, high = 0;
            for (int d = 0; d < 5; ++d) {
                int64_t row = 0;
                for (int e = 0; e < 4; ++e) {
                    row += m[d * 4 + e];
                    EXPECT_LE(std::abs(m[d * 4 + e] - m[e]), 1) << "expert " << e << " uneven across devices";
                }
                low = std::min(low, row);
                high = std::max(high, row);
            }
            EXPECT_LE(high - low, 1) << "iteration " << i << ", layer " << l;
        }
}

// Steps routing different numbers of tokens: refused unless rescaled; rescaled, every share stays within one token.
TEST(ImportRescale, VaryingStepsNeedRescale) {
    try {
        import_engine_trace(opts("vllm", {"vllm-varying.json"}, 2, 2));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("--rescale-tokens"), std::string::npos) << e.what();
    }
}

TEST(ImportRescale, SharesStayWithinOneToken) {
    ImportOptions o = opts("vllm", {"vllm-varying.json"}, 2, 2);
    o.rescale_tokens = 5;
    const Trace trace = import_engine_trace(o).trace;
    const Loads source = {{{4, 2, 1, 1}, {2, 2, 2, 2}}, {{6, 3, 2, 1}, {3, 3, 3, 3}}, {{1, 1, 1, 1}, {0, 0, 2, 2}}};
    EXPECT_EQ(trace.meta.tokens_per_iteration, 5);
    EXPECT_NE(trace.meta.source.find("tokens=rescaled-5"), std::string::npos);
    for (int i = 0; i < 3; ++i)
        for (int l = 0; l < 2; ++l) {
            const std::vector<int64_t> loads = expert_loads(trace, i, l);
            int64_t total = 0;
            for (int64_t v : source[i][l]) total += v;
            for (int e = 0; e < 4; ++e)
                EXPECT_LT(std::abs(static_cast<double>(loads[e]) - source[i][l][e] * 10.0 / total), 1.0)
                    << "iteration " << i << ", layer " << l << ", expert " << e;
        }
}

TEST(ImportOptionsCheck, MissingTopKIsAUsageError) {
    try {
        import_engine_trace(opts("sglang", {"sglang-summed.json"}, 2, 0));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitUsage);
        EXPECT_NE(std::string(e.what()).find("--top-k"), std::string::npos) << e.what();
    }
}

TEST(ImportOptionsCheck, TopKAgainstTheFileIsAConfigError) {
    try {
        import_engine_trace(opts("trtllm", {"trtllm"}, 0, 4));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("records 2 experts per token"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace prophet
