// The trace writers and a symlink planted at their old fixed temporary name "<out>.tmp" (issue 26 item 3): the
// writers used to open that name with create+truncate, so `ln -s victim out.ptrace.tmp` made them overwrite the
// victim. Now the temporary is unique and created exclusively (core/atomic_file.h): the symlink and its victim
// stay as they were, and the output is the trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "trace/trace.h"
#include "trace_test_util.h"

namespace prophet {
namespace {

using testing::read_bytes;
using testing::ScratchFile;
using testing::write_bytes;

struct TraceWriter {
    const char* name;
    void (*write)(const Trace&, const std::string&);
};

class TraceWriterTemporary : public ::testing::TestWithParam<TraceWriter> {};

Trace small_trace() {
    return generate_trace_from_toml_string(
        "[trace]\ngenerator = \"zipf\"\nseed = 3\nnum_experts = 4\n"
        "num_devices = 2\ntop_k = 2\ntokens_per_iteration = 32\n"
        "num_iterations = 2\nnum_layers = 2\n",
        "small.toml");
}

TEST_P(TraceWriterTemporary, SymlinkAtTheOldTemporaryNameIsLeftAlone) {
    ScratchFile out(std::string("out-") + GetParam().name);
    ScratchFile victim("victim");
    write_bytes(victim.path(), "victim's bytes\n");
    std::filesystem::create_symlink(victim.path(), out.path() + ".tmp");
    const Trace trace = small_trace();
    GetParam().write(trace, out.path());
    EXPECT_EQ(read_bytes(victim.path()), "victim's bytes\n");
    EXPECT_TRUE(std::filesystem::is_symlink(out.path() + ".tmp"));
    EXPECT_FALSE(std::filesystem::is_symlink(out.path()));
    const Trace back = load_trace(out.path());
    EXPECT_EQ(back.counts, trace.counts);
    EXPECT_EQ(back.transitions, trace.transitions);
}

INSTANTIATE_TEST_SUITE_P(Writers, TraceWriterTemporary,
                         ::testing::Values(TraceWriter{"binary", write_trace_file},
                                           TraceWriter{"csv", write_trace_csv}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
