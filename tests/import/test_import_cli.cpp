// test_import_cli.cpp: `prophet trace import --format F` on a malformed file of each format exits 3 naming the file
// and the field, and writes nothing; the happy path writes a trace file that `trace info` reads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "../cli/cli_util.h"
#include "../temp_dir_test.h"

namespace prophet {
namespace {

using testing::CliResult;
using testing::run_prophet;

struct MalformedCase {
    const char* name;
    const char* format;
    std::vector<std::pair<const char*, std::string>> files;  // written into the test's directory
    const char* input;  // the argument naming the input (a file or the directory "."), relative to it
    const char* args;
    const char* field;  // the message must contain it (and the file's name)
    const char* file;
};

std::string safetensors_with_header_length(uint64_t length) {
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>((length >> (8 * b)) & 0xff);
    return bytes + "{}";
}

const MalformedCase kMalformed[] = {
    {"sglang_negative",
     "sglang",
     {{"load.json", R"({"logical_count": [[1, 2], [3, -1]]})"}},
     "load.json",
     "--devices 2 --top-k 1",
     "logical_count[1][1] = -1 is negative",
     "load.json"},
    {"sglang_no_field",
     "sglang",
     {{"load.json", R"({"counts": [[1]]})"}},
     "load.json",
     "--devices 2 --top-k 1",
     "no field \"logical_count\"",
     "load.json"},
    {"vllm_short_row",
     "vllm",
     {{"h.json", R"({"load_history": [{"logical_expert_load": [[1, 1]]}, {"logical_expert_load": [[1]]}]})"}},
     "h.json",
     "--devices 2 --top-k 1",
     "load_history[1].logical_expert_load[0] has 1 entries",
     "h.json"},
    {"vllm_fraction",
     "vllm",
     {{"h.json", R"({"load_history": [{"logical_expert_load": [[1.5, 1]]}]})"}},
     "h.json",
     "--devices 2 --top-k 1",
     "logical_expert_load[0][0] = 1.5 is not an integer",
     "h.json"},
    {"megatron_text_count",
     "megatron",
     {{"rank0.jsonl", R"({"iter": 1, "block": "decoder", "layer": 0, "tpe": [[1, "x"]]})"}},
     ".",
     "--ep-size 1 --top-k 1",
     "tpe[0][1] = \"x\" is a string",
     "rank0.jsonl line 1"},
    {"megatron_no_iter",
     "megatron",
     {{"rank0.jsonl", R"({"block": "decoder", "layer": 0, "tpe": [[1, 1]]})"}},
     ".",
     "--ep-size 1 --top-k 1",
     "field \"iter\" is missing",
     "rank0.jsonl line 1"},
    {"trtllm_meta_field",
     "trtllm",
     {{"meta_info.json", R"({"num_experts_per_token": 2})"}, {"rank0.safetensors", safetensors_with_header_length(2)}},
     ".",
     "",
     "field \"num_experts\" is missing",
     "meta_info.json"},
    {"trtllm_truncated",
     "trtllm",
     {{"meta_info.json", R"({"num_experts": 4, "num_experts_per_token": 2})"},
      {"rank0.safetensors", safetensors_with_header_length(1000)}},
     ".",
     "",
     "truncated: header length 1000",
     "rank0.safetensors"},
    {"eplb_csv_cell", "eplb", {{"w.csv", "1,2\n3,x\n"}}, "w.csv", "--devices 2 --top-k 1", "line 2, column 2", "w.csv"},
    {"eplb_json_row",
     "eplb",
     {{"w.json", R"({"weight": [[1, 2], [3]]})"}},
     "w.json",
     "--devices 2 --top-k 1",
     "weight[1] has 1 entries",
     "w.json"},
};

class ImportMalformed : public testing::TempDirTest, public ::testing::WithParamInterface<MalformedCase> {};

TEST_P(ImportMalformed, ExitsThreeNamingFileAndField) {
    const MalformedCase& c = GetParam();
    const auto inputs = dir_ / "in";
    std::filesystem::create_directories(inputs);
    for (const auto& [name, content] : c.files) std::ofstream(inputs / name, std::ios::binary) << content;
    const auto out = dir_ / "out.ptrace";
    const CliResult r = run_prophet("",
                                    std::string("trace import --format ") + c.format + " '" +
                                        (inputs / c.input).string() + "' " + c.args + " -o '" + out.string() + "'",
                                    dir_);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find(c.field), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.file), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << "nothing is written on bad input";
}

INSTANTIATE_TEST_SUITE_P(Formats, ImportMalformed, ::testing::ValuesIn(kMalformed),
                         [](const auto& info) { return std::string(info.param.name); });

class ImportCli : public testing::TempDirTest {};

TEST_F(ImportCli, WritesATraceFileTraceInfoReads) {
    const auto out = dir_ / "v.ptrace";
    const CliResult r = run_prophet("",
                                    "trace import --format vllm tests/fixtures/import/vllm.json --devices 4 "
                                    "--top-k 2 -o '" +
                                        out.string() + "'",
                                    dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("spread uniformly over 4 devices"), std::string::npos) << r.err;
    const CliResult info = run_prophet("", "trace info --json '" + out.string() + "'", dir_);
    ASSERT_EQ(info.exit_code, 0) << info.err;
    const auto j = nlohmann::json::parse(info.out);
    EXPECT_EQ(j["iterations"], 3);
    EXPECT_EQ(j["devices"], 4);
    EXPECT_EQ(j["source"].get<std::string>().rfind("import:vllm split=uniform tokens=exact file=", 0), 0u);
}

TEST_F(ImportCli, WithoutOutImportsIntoTheStore) {
    const CliResult r = run_prophet("",
                                    "trace import --format eplb tests/fixtures/import/eplb-weight.csv --devices 2 "
                                    "--top-k 2 --store '" +
                                        db_ + "'",
                                    dir_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string id = r.out.substr(0, r.out.find('\n'));
    const auto out = dir_ / "back.ptrace";
    const CliResult exported =
        run_prophet("", "trace export " + id + " --store '" + db_ + "' -o '" + out.string() + "'", dir_);
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
}

TEST_F(ImportCli, EngineFormatOutsideImportIsAUsageError) {
    const CliResult r = run_prophet("", "trace convert tests/fixtures/import/vllm.json --format vllm -o x", dir_);
    EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace prophet
