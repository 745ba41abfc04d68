// Config: defaults < file < --set, and one clear error (exit 3) per bad key or value.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/config.h"
#include "core/error.h"
#include "core/sha256.h"
#include "core/toml_text.h"

using namespace prophet;

namespace {

Schema test_schema() {
    Schema s;
    s.add_int("train.steps", 20, 1, 1000000, "steps");
    s.add_float("balance.alpha", 3.0, 0.0, 100.0, "Eq 7 alpha", true);
    s.add_bool("plan.topology_aware", false, "topology");
    s.add_string("balance.policy", "static", {"static", "prophet"}, "policy");
    s.add_string("store.path", "results/prophet.db", {}, "store");
    KeySpec list;
    list.key = "sweep.seeds";
    list.type = ValueType::kIntList;
    list.default_value = std::vector<int64_t>{1};
    list.min = 0;
    list.help = "seeds";
    s.add(list);
    return s;
}

// runs fn, expects a prophet::Error with the exit code, returns its message
template <typename Fn>
std::string error_of(Fn fn, int exit_code) {
    try {
        fn();
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), exit_code) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error thrown";
    return "";
}

}  // namespace

TEST(Config, SetOverridesTheFileWhichOverridesTheDefaults) {
    const Schema schema = test_schema();
    Config c(schema);
    EXPECT_EQ(c.get_int("train.steps"), 20);
    EXPECT_EQ(c.source("train.steps"), "default");
    c.merge_toml_string("[train]\nsteps = 50\n[balance]\nalpha = 2\n", "a.toml");
    EXPECT_EQ(c.get_int("train.steps"), 50);
    EXPECT_DOUBLE_EQ(c.get_float("balance.alpha"), 2.0);  // an integer is accepted for a float key
    EXPECT_EQ(c.source("train.steps"), "a.toml");
    c.apply_set("train.steps=70");
    c.apply_set("balance.policy=prophet");  // bare word = string
    c.apply_set("sweep.seeds=[1, 2, 3]");
    EXPECT_EQ(c.get_int("train.steps"), 70);
    EXPECT_EQ(c.get_string("balance.policy"), "prophet");
    EXPECT_EQ(c.get_int_list("sweep.seeds"), (std::vector<int64_t>{1, 2, 3}));
    EXPECT_EQ(c.source("train.steps"), "--set");
    EXPECT_TRUE(c.has("train.steps"));
    EXPECT_FALSE(c.has("store.path"));
}

TEST(Config, UnknownKeyErrorNamesTheKeyWithASuggestion) {
    const Schema schema = test_schema();
    Config c(schema);
    const std::string m = error_of([&] { c.apply_set("balance.alpah=2"); }, kExitConfig);
    EXPECT_NE(m.find("balance.alpah"), std::string::npos) << m;
    EXPECT_NE(m.find("unknown key"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean balance.alpha"), std::string::npos) << m;
    const std::string m2 = error_of([&] { c.merge_toml_string("[train]\nstepz = 3\n", "f.toml"); }, kExitConfig);
    EXPECT_NE(m2.find("train.stepz"), std::string::npos) << m2;
}

TEST(Config, InvalidValuesNameKeyValueRuleAndFix) {
    const Schema schema = test_schema();
    Config c(schema);
    std::string m = error_of([&] { c.apply_set("train.steps=0"); }, kExitConfig);
    EXPECT_NE(m.find("train.steps = 0"), std::string::npos) << m;
    EXPECT_NE(m.find("[1, 1000000]"), std::string::npos) << m;
    EXPECT_NE(m.find("fix:"), std::string::npos) << m;
    m = error_of([&] { c.apply_set("balance.alpha=0"); }, kExitConfig);  // exclusive lower bound
    EXPECT_NE(m.find("(0.0, 100.0]"), std::string::npos) << m;
    m = error_of([&] { c.apply_set("balance.alpha=nan"); }, kExitConfig);
    EXPECT_NE(m.find("balance.alpha = nan"), std::string::npos) << m;
    m = error_of([&] { c.apply_set("train.steps=2.5"); }, kExitConfig);
    EXPECT_NE(m.find("must be an integer"), std::string::npos) << m;
    m = error_of([&] { c.apply_set("balance.policy=greedy"); }, kExitConfig);
    EXPECT_NE(m.find("static|prophet"), std::string::npos) << m;
    m = error_of([&] { c.apply_set("plan.topology_aware=yes"); }, kExitConfig);
    EXPECT_NE(m.find("plan.topology_aware"), std::string::npos) << m;
    m = error_of([&] { c.apply_set("sweep.seeds=[1, -2]"); }, kExitConfig);
    EXPECT_NE(m.find("sweep.seeds"), std::string::npos) << m;
    error_of([&] { c.apply_set("novalue"); }, kExitUsage);
    // nothing changed by the failed sets
    EXPECT_EQ(c.get_int("train.steps"), 20);
    EXPECT_EQ(c.get_string("balance.policy"), "static");
}

TEST(Config, TomlSyntaxErrorGivesLine) {
    const Schema schema = test_schema();
    Config c(schema);
    const std::string m = error_of([&] { c.merge_toml_string("[train]\nsteps = = 3\n", "bad.toml"); }, kExitConfig);
    EXPECT_NE(m.find("bad.toml"), std::string::npos) << m;
    EXPECT_NE(m.find("line 2"), std::string::npos) << m;
}

TEST(Config, RequiredKeysMustBeGiven) {
    Schema s;
    KeySpec k;
    k.key = "cluster.num_devices";
    k.type = ValueType::kInt;
    k.required = true;
    k.min = 1;
    k.help = "D";
    s.add(k);
    Config c(s, "cluster file x.toml");
    const std::string m = error_of([&] { c.check_required(); }, kExitConfig);
    EXPECT_NE(m.find("cluster.num_devices"), std::string::npos) << m;
    EXPECT_NE(m.find("x.toml"), std::string::npos) << m;
    c.apply_set("cluster.num_devices=4");
    c.check_required();
    EXPECT_EQ(c.get_int("cluster.num_devices"), 4);
}

TEST(Config, CanonicalTomlIsSortedParsableAndHashed) {
    const Schema schema = test_schema();
    Config a(schema), b(schema);
    a.apply_set("train.steps=70");
    a.apply_set("balance.alpha=2.5");
    b.apply_set("balance.alpha=2.5");
    b.apply_set("train.steps=70");
    EXPECT_EQ(a.canonical_toml(), b.canonical_toml());  // order of --set does not matter
    EXPECT_EQ(a.hash(), b.hash());
    b.apply_set("train.steps=71");
    EXPECT_NE(a.hash(), b.hash());
    // the canonical form reads back to the same values
    Config c(schema);
    c.merge_toml_string(a.canonical_toml(), "canonical");
    EXPECT_EQ(c.canonical_toml(), a.canonical_toml());
    EXPECT_NE(a.canonical_toml().find("[balance]\nalpha = 2.5\n"), std::string::npos) << a.canonical_toml();
}

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex(std::string(1000, 'a')).size(), 64u);
}

// Error messages quote TOML values with toml_node_text: arrays and tables by our own printer (toml++'s casts
// log10 of a float below 1 to size_t, undefined behaviour), scalars as value_to_toml writes them.
TEST(TomlNodeText, QuotesEveryNodeKindAsTomlText) {
    const toml::table t = toml::parse(
        "a = [0.1, 1e3, -0.25]\nb = { x = 1, y = \"q\\\"\" }\nc = []\nd = true\ne = 2024-01-02\nf = [[1, 2], [\"z\"]]\n");
    EXPECT_EQ(prophet::toml_node_text(*t.get("a")), "[" + prophet::value_to_toml(prophet::Value(0.1)) + ", " +
                                                         prophet::value_to_toml(prophet::Value(1e3)) + ", " +
                                                         prophet::value_to_toml(prophet::Value(-0.25)) + "]");
    EXPECT_EQ(prophet::toml_node_text(*t.get("b")), "{ x = 1, y = \"q\\\"\" }");
    EXPECT_EQ(prophet::toml_node_text(*t.get("c")), "[]");
    EXPECT_EQ(prophet::toml_node_text(*t.get("d")), "true");
    EXPECT_EQ(prophet::toml_node_text(*t.get("e")), "2024-01-02");
    EXPECT_EQ(prophet::toml_node_text(*t.get("f")), "[[1, 2], [\"z\"]]");
    // the fuzzer's input: an unknown key holding such an array is named with its value
    const prophet::Schema empty;
    prophet::Config config(empty, "test");
    try {
        config.merge_toml_string("skew = [0.1, 1e3]\n", "t.toml");
        ADD_FAILURE() << "unknown key accepted";
    } catch (const prophet::Error& e) {
        EXPECT_NE(std::string(e.what()).find("skew = " + prophet::toml_node_text(*t.get("a")).substr(0, 4)),
                  std::string::npos)
            << e.what();
    }
}

// value_to_toml writes any string as a TOML basic string that reads back as itself and as nothing else: quotes,
// backslashes and every control character escaped (the files prophet writes carry names from hostile inputs:
// a cluster's name, a sweep's paths). Each case: `key = <written>` parses to one key holding exactly the string.
struct TomlStringCase {
    const char* name;
    std::string value;
};
void PrintTo(const TomlStringCase& c, std::ostream* os) { *os << c.name; }
class TomlStringLiteral : public ::testing::TestWithParam<TomlStringCase> {};

TEST_P(TomlStringLiteral, ReadsBackAsItselfAndNothingElse) {
    const std::string& value = GetParam().value;
    const std::string written = prophet::value_to_toml(prophet::Value(value));
    toml::table t;
    ASSERT_NO_THROW(t = toml::parse("key = " + written + "\n")) << written;
    EXPECT_EQ(t.size(), 1u) << written;
    ASSERT_TRUE(t["key"].is_string()) << written;
    EXPECT_EQ(t["key"].value_or(std::string()), value) << written;
}

INSTANTIATE_TEST_SUITE_P(
    Strings, TomlStringLiteral,
    ::testing::Values(TomlStringCase{"plain", "2xH100 (rail NICs)"}, TomlStringCase{"quote", "a \"b\" c"},
                      TomlStringCase{"backslash", "C:\\dir\\"}, TomlStringCase{"newline", "a\nb"},
                      TomlStringCase{"carriage_return", "a\rb"}, TomlStringCase{"tab_and_form_feed", "a\tb\fc\bd"},
                      TomlStringCase{"other_control", "a\001b\037c"}, TomlStringCase{"nul", std::string("a\0b", 3)},
                      TomlStringCase{"delete", "a\177b"},
                      TomlStringCase{"injected_key", "x\"\ncompute_tflop_s = 1e9\n# \""},
                      TomlStringCase{"utf8", "r\xc3\xa9seau \xe2\x86\x92 n\xc5\x93ud"}),
    [](const ::testing::TestParamInfo<TomlStringCase>& info) { return std::string(info.param.name); });
