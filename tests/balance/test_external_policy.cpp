// test_external_policy.cpp: the external-policy protocol (schema v1) in process: the command line split without a
// shell, every reply defect as exit 3 naming the field, and a live process (tests/fixtures/external_policy_fixture.py)
// answering, timing out and exiting.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "balance/cluster.h"
#include "balance/external_policy.h"
#include "balance/policy_registry.h"
#include "core/coprocess.h"
#include "core/error.h"

using namespace prophet;

namespace {

struct SplitCase {
    const char* line;
    std::vector<std::string> words;
};

TEST(ExternalCommandLine, SplitsWithoutAShell) {
    const std::vector<SplitCase> cases = {
        {"python3 policy.py", {"python3", "policy.py"}},
        {"  a\tb  ", {"a", "b"}},
        {"a 'b c' d", {"a", "b c", "d"}},
        {"a \"b \\\" c\"", {"a", "b \" c"}},
        {"a b\\ c", {"a", "b c"}},
        {"echo $HOME;rm *|x", {"echo", "$HOME;rm", "*|x"}},  // no expansion, no separators: plain words
        {"x'y'\"z\"", {"xyz"}},
        {"a ''", {"a", ""}},
    };
    for (const SplitCase& c : cases) EXPECT_EQ(split_command_line(c.line, "balance.external"), c.words) << c.line;
}

TEST(ExternalCommandLine, RefusesMalformedLines) {
    for (const char* line : {"a 'b", "a \"b", "   ", ""}) {
        try {
            split_command_line(line, "balance.external");
            ADD_FAILURE() << "no error for [" << line << "]";
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), kExitConfig) << line;
            EXPECT_NE(std::string(e.what()).find("balance.external"), std::string::npos) << e.what();
        }
    }
}

struct ReplyCase {
    const char* name;
    const char* line;   // the reply, for D = 2, E = 4
    const char* field;  // what the error must name
};

TEST(ExternalReply, EveryDefectIsExit3NamingTheField) {
    const std::vector<ReplyCase> cases = {
        {"not JSON", "{\"type\": \"placement\", ", "not JSON"},
        {"not an object", "[1, 2]", "not a JSON object"},
        {"unknown field", R"({"type":"placement","experts":[[0],[0],[1],[1]],"fractions":[]})", "fractions"},
        {"wrong type", R"({"type":"placements","experts":[[0],[0],[1],[1]]})", "type"},
        {"missing type", R"({"experts":[[0],[0],[1],[1]]})", "type"},
        {"missing experts", R"({"type":"placement"})", "experts is missing"},
        {"missing an expert", R"({"type":"placement","experts":[[0],[0],[1]]})", "has 3 entries, needs 4"},
        {"only copy dropped", R"({"type":"placement","experts":[[0],[],[1],[1]]})", "experts[1] is empty"},
        {"device out of range", R"({"type":"placement","experts":[[0],[2],[1],[1]]})", "experts[1] holds 2"},
        {"device not an integer", R"({"type":"placement","experts":[[0],["1"],[1],[1]]})", "experts[1] holds \"1\""},
        {"device twice", R"({"type":"placement","experts":[[0,1,1],[0],[1],[1]]})", "names device 1 twice"},
        {"list not a list", R"({"type":"placement","experts":[[0],0,[1],[1]]})", "experts[1] is 0"},
        {"over the replica cap", R"({"type":"placement","experts":[[0,1],[0,1],[1],[1]]})", "over its 1 slots"},
    };
    for (const ReplyCase& c : cases) {
        try {
            parse_placement_reply(c.line, 2, 4, /*max_replicas=*/1, "the test request");
            ADD_FAILURE() << c.name << ": accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), kExitConfig) << c.name;
            EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << c.name << ": " << e.what();
            EXPECT_NE(std::string(e.what()).find("the test request"), std::string::npos) << e.what();
        }
    }
}

TEST(ExternalReply, FirstHolderIsTheOwnerTheRestReplicas) {
    const Placement p = parse_placement_reply(R"({"type":"placement","experts":[[1,0],[0],[1],[0,1]]})", 2, 4, 0, "r");
    EXPECT_EQ(p.owner, (std::vector<int>{1, 0, 1, 0}));
    EXPECT_TRUE(p.holds(0, 0));
    EXPECT_TRUE(p.holds(3, 1));
    EXPECT_EQ(p.num_replicas(), 2);
}

TEST(ExternalReply, WindowReplyNeedsEveryLayer) {
    const std::string one = R"([[0],[0],[1],[1]])";
    EXPECT_EQ(
        parse_window_reply("{\"type\":\"placements\",\"layers\":[" + one + "," + one + "]}", 2, 2, 4, 0, "w").size(),
        2u);
    try {
        parse_window_reply("{\"type\":\"placements\",\"layers\":[" + one + "]}", 2, 2, 4, 0, "w");
        ADD_FAILURE() << "one layer of two accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("layers"), std::string::npos) << e.what();
    }
}

// A live process: tests/fixtures/external_policy_fixture.py in the given mode, D = 4, E = 8, L = 2.
struct Live {
    BalanceOptions options;
    CostModel cost;
    std::vector<int64_t> counts = std::vector<int64_t>(32, 5);
    explicit Live(const std::string& mode, double timeout_s = 10.0) {
        options.external_command = "/usr/bin/python3 '" + std::string(PROPHET_SOURCE_DIR) +
                                   "/tests/fixtures/external_policy_fixture.py' " + mode;
        options.external_timeout_s = timeout_s;
        cost.cluster.num_devices = 4;
        cost.cluster.devices_per_node = 4;
        cost.cluster.compute_flops = 1e12;
        cost.cluster.a2a_bandwidth = {{0, 1e9}};
        cost.cluster.trans_bytes_per_s = cost.cluster.agg_bytes_per_s = 1e9;
        cost.model.d_model = 8;
        cost.model.d_ffn = 16;
    }
    LayerPlanRequest request() const {
        LayerPlanRequest r;
        r.iteration = 1;
        r.counts = counts.data();
        r.num_devices = 4;
        r.num_experts = 8;
        r.cost = &cost;
        r.options = &options;
        return r;
    }
};

TEST(ExternalProcess, StaticFixtureAnswersTheStaticPlacement) {
    Live live("static");
    PolicySession session(live.options, live.cost, 2, 8);
    const Placement p = policy_row("external").plan_layer(live.request(), session);
    const Placement expected = Placement::make_static(4, 8);
    EXPECT_EQ(p.owner, expected.owner);
    EXPECT_EQ(p.replica, expected.replica);
}

struct FailureCase {
    const char* mode;
    double timeout_s;
    int exit_code;
    const char* message;
};

TEST(ExternalProcess, FailuresEndTheRunWithTheirExitCode) {
    const std::vector<FailureCase> cases = {
        {"malformed", 10, kExitConfig, "not JSON"},
        {"missing_expert", 10, kExitConfig, "has 7 entries, needs 8"},
        {"empty_holders", 10, kExitConfig, "experts[0] is empty"},
        {"unknown_field", 10, kExitConfig, "fractions"},
        {"bad_hello", 10, kExitConfig, "schema"},
        {"'slow' 5", 1.0, kExitDistributed, "s (balance.external_timeout_s"},
        {"exit", 10, kExitDistributed, "exited with status 3"},
    };
    for (const FailureCase& c : cases) {
        Live live(c.mode, c.timeout_s);
        PolicySession session(live.options, live.cost, 2, 8);
        try {
            policy_row("external").plan_layer(live.request(), session);
            ADD_FAILURE() << c.mode << ": no error";
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), c.exit_code) << c.mode << ": " << e.what();
            EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.mode << ": " << e.what();
        }
    }
}

TEST(ExternalProcess, MissingProgramIsAConfigError) {
    BalanceOptions options;
    options.external_command = "/no/such/program --flag";
    CostModel cost;
    cost.cluster.num_devices = 4;
    try {
        PolicySession session(options, cost, 2, 8);
        session.external();
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("balance.external"), std::string::npos) << e.what();
    }
}

}  // namespace
