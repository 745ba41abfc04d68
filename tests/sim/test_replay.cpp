// Replay of recorded steps (sim/replay.h): hand-built DAGs, and the committed fixture tests/fixtures/replay-2rank.db
// (two real 2-rank runs with --timeline, schedules none and blockwise; tests/fixtures/make-replay-fixture.sh):
// replaying its recorded durations reproduces every measured step within 3%, and a copy with one op's duration
// changed does not.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "op_test_util.h"
#include "sim/replay.h"
#include "store/store.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

const std::string kFixture = std::string(PROPHET_SOURCE_DIR) + "/tests/fixtures/replay-2rank.db";
constexpr double kExactness = 0.03;  // the replay's own error bound per step (issue 12)

using prophet::sim::test_util::op;

using K = prophet::OpKind;
using Lane = prophet::OpLane;

// rewrites one timeline event's payload in a copy of the fixture: fn(rows) edits the [kind, lane, block, part,
// start_us, end_us] rows
void mutate_event(const std::string& path, int64_t event_id, const std::function<void(nlohmann::json&)>& fn) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* get = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT data FROM events WHERE id = ?", -1, &get, nullptr), SQLITE_OK);
    sqlite3_bind_int64(get, 1, event_id);
    ASSERT_EQ(sqlite3_step(get), SQLITE_ROW);
    nlohmann::json rows = nlohmann::json::parse(reinterpret_cast<const char*>(sqlite3_column_text(get, 0)));
    sqlite3_finalize(get);
    fn(rows);
    sqlite3_stmt* put = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE events SET data = ? WHERE id = ?", -1, &put, nullptr), SQLITE_OK);
    const std::string text = rows.dump();
    sqlite3_bind_text(put, 1, text.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(put, 2, event_id);
    ASSERT_EQ(sqlite3_step(put), SQLITE_DONE);
    sqlite3_finalize(put);
    sqlite3_close(db);
}

// The op whose doubling or halving the mutation tests apply: of the fixture's oldest run (schedule none), the local
// compute op (expert compute, LM head, attention backward) that is the largest fraction of its step.
struct Target {
    std::string run_id;
    int64_t step = 0;
    int64_t event_id = 0;       // its rank's timeline event
    std::vector<int64_t> step_events;  // every rank's timeline event of the step
    size_t row = 0;             // its row in the payload
    double start = 0, end = 0;  // us
    double fraction = 0;        // duration / measured step
};

Target longest_local_op(const std::string& path) {
    Store store = Store::open(path);
    Target best;
    best.run_id = store.list_runs().back().run_id;
    std::map<int64_t, double> step_ms;
    for (const MetricRow& m : store.get_metrics(best.run_id, "step_ms"))
        if (m.rank == -1) step_ms[m.step] = m.value;
    for (const EventRow& ev : store.get_events(best.run_id)) {
        if (ev.kind != "timeline" || ev.step == 0 || !step_ms.count(ev.step)) continue;
        const nlohmann::json rows = nlohmann::json::parse(ev.data_json);
        for (size_t i = 0; i < rows.size(); ++i) {
            const std::string kind = rows[i][0];
            if (kind != "fec" && kind != "bec" && kind != "head" && kind != "attn_bwd") continue;
            const double a = rows[i][4], b = rows[i][5];
            const double fraction = (b - a) * 1e-3 / step_ms[ev.step];
            if (fraction > best.fraction) {
                best.step = ev.step;
                best.event_id = ev.id;
                best.row = i;
                best.start = a;
                best.end = b;
                best.fraction = fraction;
            }
        }
    }
    for (const EventRow& ev : store.get_events(best.run_id))
        if (ev.kind == "timeline" && ev.step == best.step) best.step_events.push_back(ev.id);
    return best;
}

double step_error(const std::string& path, const std::string& run_id, int64_t step) {
    Store store = Store::open(path);
    for (const StepReplay& s : replay_recorded(load_recorded_run(store, run_id)))
        if (s.step == step) return s.error();
    ADD_FAILURE() << "no step " << step;
    return 0;
}

}  // namespace

TEST(ReplayGraph, CollectiveRunsFromTheLastArrivalToOneEnd) {
    // rank 0 computes 10 us, rank 1 30 us, then an all-to-all of 5 us after the last arrival (rank 0 recorded
    // 25 us: 20 of them waiting for rank 1), then 1 us of unpack each
    const std::vector<ReplayOp> ops = {op(K::kFec, 0, 0, 10),       op(K::kDispatch, 0, 10, 35),
                                       op(K::kUnpack, 0, 35, 36),   op(K::kFec, 1, 0, 30),
                                       op(K::kDispatch, 1, 30, 35), op(K::kUnpack, 1, 35, 36)};
    const ReplayGraph g = build_replay_graph(ops, 2, false, "test");
    ReplayDurations d = recorded_durations(g);
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == K::kDispatch) {
            EXPECT_DOUBLE_EQ(d.own_us[i], 5.0) << "rank " << g.ops[i].rank;
        }
    EXPECT_DOUBLE_EQ(run_replay(g, d).step_us, 36.0);
    // rank 0's compute doubled to 20 us: still under rank 1's 30, the step does not change
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == K::kFec && g.ops[i].rank == 0) d.own_us[i] = 20;
    EXPECT_DOUBLE_EQ(run_replay(g, d).step_us, 36.0);
    // rank 1's compute at 40 us: every rank's all-to-all moves 10 us later
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == K::kFec && g.ops[i].rank == 1) d.own_us[i] = 40;
    const ReplayTimes t = run_replay(g, d);
    EXPECT_DOUBLE_EQ(t.step_us, 46.0);
    EXPECT_DOUBLE_EQ(t.rank_step_us[0], 46.0);
}

TEST(ReplayGraph, WaitEndsWithTheTransferItWaitsFor) {
    // one rank: attn 0-10, a Trans on the comm lane submitted after attn (10-50), fec 10-30, then trans_wait
    // blocked until 50, then combine... the wait takes no time of its own
    const std::vector<ReplayOp> ops = {op(K::kAttn, 0, 0, 10), op(K::kTrans, 0, 10, 50, 1, Lane::kComm, 2),
                                       op(K::kFec, 0, 10, 30), op(K::kTransWait, 0, 30, 50, 1),
                                       op(K::kPack, 0, 50, 52)};
    const ReplayGraph g = build_replay_graph(ops, 1, true, "test");
    ReplayDurations d = recorded_durations(g);
    EXPECT_DOUBLE_EQ(run_replay(g, d).step_us, 52.0);
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == K::kTrans) d.own_us[i] = 10;  // a faster link: the wait vanishes
    EXPECT_DOUBLE_EQ(run_replay(g, d).step_us, 32.0);
}

TEST(ReplayGraph, TransferThatMovesNothingIsNoUnit) {
    // a placement without replicas: each rank's Trans returns at once (rank 0 done at 11 before rank 1 starts at
    // 20): not a unit, each op keeps its own 1 us; the all-to-all after it is one (spans overlap)
    const std::vector<ReplayOp> ops = {op(K::kTrans, 0, 10, 11),    op(K::kDispatch, 0, 11, 31),
                                       op(K::kFec, 1, 0, 20),       op(K::kTrans, 1, 20, 21),
                                       op(K::kDispatch, 1, 21, 31)};
    const ReplayGraph g = build_replay_graph(ops, 2, false, "test");
    const ReplayDurations d = recorded_durations(g);
    for (size_t i = 0; i < g.ops.size(); ++i) {
        if (g.ops[i].kind == K::kTrans) {
            EXPECT_FALSE(g.collective[g.unit[i]]);
            EXPECT_DOUBLE_EQ(d.own_us[i], 1.0);
        }
        if (g.ops[i].kind == K::kDispatch) {
            EXPECT_TRUE(g.collective[g.unit[i]]);
            EXPECT_DOUBLE_EQ(d.own_us[i], 10.0);
        }
    }
    EXPECT_DOUBLE_EQ(run_replay(g, d).step_us, 31.0);
}

TEST(ReplayGraph, CollectiveMissingOnARankIsAnInputError) {
    const std::vector<ReplayOp> ops = {op(K::kDispatch, 0, 0, 5), op(K::kFec, 1, 0, 5)};
    EXPECT_THROW(build_replay_graph(ops, 2, false, "test"), Error);
}

TEST(ReplayGraph, PayloadRowsAreCheckedByName) {
    const auto ops = parse_timeline_payload(R"([["fec","compute",1,0,2.5,7.0],["trans","comm",0,2,1,3]])", 1, "t");
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0].kind, K::kFec);
    EXPECT_EQ(ops[1].lane, Lane::kComm);
    EXPECT_EQ(ops[1].part, 2);
    EXPECT_EQ(ops[0].rank, 1);
    EXPECT_THROW(parse_timeline_payload(R"([["warp","compute",1,0,2.5,7.0]])", 0, "t"), Error);
    EXPECT_THROW(parse_timeline_payload(R"([["fec","compute",1,0,7.0,2.5]])", 0, "t"), Error);
}

class ReplayFixture : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        TempDirTest::SetUp();
        if (!std::filesystem::exists(kFixture)) GTEST_SKIP() << "no fixture " << kFixture;
        copy_ = (dir_ / "fixture.db").string();
        std::filesystem::copy_file(kFixture, copy_);
    }
    std::string copy_;
};

TEST_F(ReplayFixture, RecordedDurationsReproduceEveryStepWithin3Percent) {
    Store store = Store::open(copy_);
    const std::vector<RunRow> runs = store.list_runs();
    ASSERT_EQ(runs.size(), 2u) << "the fixture holds one run per schedule";
    std::set<bool> schedules;
    for (const RunRow& row : runs) {
        const RecordedRun run = load_recorded_run(store, row.run_id);
        schedules.insert(run.blockwise);
        EXPECT_EQ(run.num_ranks, 2);
        ASSERT_GE(run.steps.size(), 4u);
        bool transfers = false;
        for (const RecordedStep& s : run.steps)
            for (const ReplayOp& o : s.ops) transfers |= o.kind == K::kTrans || o.kind == K::kAgg;
        EXPECT_TRUE(transfers) << row.run_id << ": the fixture must replicate experts (Trans/Agg in the timeline)";
        for (const StepReplay& s : replay_recorded(run))
            EXPECT_LE(std::abs(s.error()), kExactness) << row.run_id << " step " << s.step << ": replayed "
                                                       << s.replayed_ms << " ms, measured " << s.measured_ms;
    }
    EXPECT_EQ(schedules.size(), 2u) << "both schedules (none and blockwise)";
}

TEST_F(ReplayFixture, OneOpDoubledFailsTheCheck) {
    const Target t = longest_local_op(copy_);
    ASSERT_GE(t.fraction, 0.1) << "the fixture's longest op must be a tenth of its step for the check to see it";
    ASSERT_LE(std::abs(step_error(copy_, t.run_id, t.step)), kExactness);
    // its duration doubled in its rank's payload (nothing else moved): the replay must come out too long
    mutate_event(copy_, t.event_id, [&](nlohmann::json& rows) { rows[t.row][5] = t.end + (t.end - t.start); });
    EXPECT_GT(step_error(copy_, t.run_id, t.step), kExactness) << "a doubled op must make the replay too long";
}

TEST_F(ReplayFixture, OneOpHalvedFailsTheCheck) {
    const Target t = longest_local_op(copy_);
    ASSERT_GE(t.fraction, 0.1);
    // the op at half its duration, and every rank's record consistent with that: times inside the op's span
    // compressed by 2, later times moved earlier by the half (a monotone map, so every op still ends after it
    // starts and collectives still overlap); the measured step stays, so the replay must come out too short
    const double half = 0.5 * (t.end - t.start);
    const auto shrink = [&](double v) { return v <= t.start ? v : v <= t.end ? t.start + 0.5 * (v - t.start) : v - half; };
    for (int64_t id : t.step_events)
        mutate_event(copy_, id, [&](nlohmann::json& rows) {
            for (auto& row : rows) {
                row[4] = shrink(row[4].get<double>());
                row[5] = shrink(row[5].get<double>());
            }
        });
    EXPECT_LT(step_error(copy_, t.run_id, t.step), -kExactness) << "a halved op must make the replay too short";
}
