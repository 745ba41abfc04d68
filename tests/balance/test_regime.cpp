// test_regime.cpp: balance.regime = auto follows the routing a command replays (balance/regime.h): serving for a
// trace imported from an inference engine's statistics, training for every other source; an explicit regime wins.
#include <gtest/gtest.h>

#include <string>

#include "balance/regime.h"

namespace prophet {
namespace {

struct RegimeCase {
    const char* name;
    const char* regime;  // balance.regime as set
    const char* source;  // the trace's meta.source
    const char* expected;
};

const RegimeCase kCases[] = {
    {"sglang_import", "auto", "import:sglang split=uniform tokens=exact file=a.json", "serving"},
    {"vllm_import", "auto", "import:vllm split=uniform tokens=exact file=a.json", "serving"},
    {"trtllm_import", "auto", "import:trtllm split=recorded tokens=exact file=meta_info.json (+2 files)", "serving"},
    {"eplb_import", "auto", "import:eplb split=uniform tokens=rescaled-4096 file=w.csv", "serving"},
    {"megatron_import", "auto", "import:megatron split=recorded tokens=exact file=rank0.jsonl", "training"},
    {"generated", "auto", "synthetic:drift", "training"},
    {"profiled", "auto", "profile:run-1", "training"},
    {"engine_name_not_a_prefix", "auto", "file:import:sglang split=uniform", "training"},
    {"engine_name_without_separator", "auto", "import:sglangx split=uniform", "training"},
    {"explicit_training_wins", "training", "import:sglang split=uniform tokens=exact file=a.json", "training"},
    {"explicit_serving_wins", "serving", "synthetic:zipf", "serving"},
};

class Regime : public testing::TestWithParam<RegimeCase> {};

TEST_P(Regime, ResolvesFromTheTraceSource) {
    const RegimeCase& c = GetParam();
    EXPECT_EQ(resolve_regime(c.regime, c.source), c.expected);
}

INSTANTIATE_TEST_SUITE_P(Sources, Regime, testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(RegimeConfig, AutoIsReplacedByTheResolvedRegime) {
    Schema schema;
    add_regime_keys(schema, "auto");
    Config config(schema, "test");
    resolve_regime_in(config, "import:vllm split=uniform tokens=exact file=v.json");
    EXPECT_EQ(config.get_string("balance.regime"), "serving");
}

}  // namespace
}  // namespace prophet
