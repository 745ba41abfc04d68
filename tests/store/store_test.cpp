// store_test.cpp: the SQLite store: schema and pragmas, round trips, upserts, transactions.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "store/store.h"
#include "store_test_fixture.h"

namespace prophet {
namespace {

namespace fs = std::filesystem;

TEST_F(StoreTest, CreatesSchemaWithApplicationIdAndVersion) {
    {
        Store store = Store::open(db_path_);
        EXPECT_EQ(store.path(), db_path_);
    }
    EXPECT_TRUE(fs::exists(db_path_));
    EXPECT_EQ(query_int("PRAGMA application_id"), 0x50525054);
    EXPECT_EQ(query_int("PRAGMA user_version"), 2);
    for (const char* table : {"runs", "params", "metrics", "expert_load", "placements", "events", "bench", "traces",
                              "plan_results"}) {
        EXPECT_EQ(query_int(std::string("SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='") + table +
                            "' AND sql LIKE '%STRICT%'"),
                  1)
            << table;
    }
    EXPECT_EQ(query_int("SELECT count(*) FROM pragma_table_info('metrics') WHERE name='layer' AND dflt_value='-1'"),
              1);
    EXPECT_EQ(query_int("SELECT count(*) FROM pragma_table_info('runs') WHERE name='simulated' AND \"notnull\"=1"), 1);
}

TEST_F(StoreTest, PragmasAreSet) {
    Store store = Store::open(db_path_);
    // journal_mode is persistent in the file: a fresh connection sees WAL
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    // foreign keys are enforced on Store's connection: a metric for an unknown run is refused
    try {
        store.put_metric("no_such_run", "loss", 0, 1.0);
        FAIL() << "foreign key not enforced";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitDatabase);
        EXPECT_NE(std::string(e.what()).find("FOREIGN KEY"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("put_metric"), std::string::npos) << e.what();
    }
}

TEST_F(StoreTest, ReopenKeepsData) {
    std::string run_id;
    {
        Store store = Store::open(db_path_);
        run_id = store.begin_run(sample_info());
    }
    Store store = Store::open(db_path_);
    EXPECT_EQ(store.get_run(run_id).info.experiment, "exp_a");
    EXPECT_EQ(query_int("SELECT count(*) FROM runs"), 1);
}

TEST_F(StoreTest, RunRoundTrip) {
    Store store = Store::open(db_path_);
    RunInfo info = sample_info();
    std::string run_id = store.begin_run(info);
    ASSERT_EQ(run_id.size(), 16u);
    EXPECT_EQ(run_id.find_first_not_of("0123456789abcdef"), std::string::npos);

    RunRow row = store.get_run(run_id);
    EXPECT_EQ(row.run_id, run_id);
    EXPECT_EQ(row.status, "running");
    EXPECT_GT(row.started_ms, 1600000000000);
    EXPECT_FALSE(row.ended_ms.has_value());
    EXPECT_TRUE(row.heartbeat_ms.has_value());
    EXPECT_EQ(row.info.experiment, info.experiment);
    EXPECT_EQ(row.info.command, info.command);
    EXPECT_EQ(row.info.config_toml, info.config_toml);
    EXPECT_EQ(row.info.config_hash, info.config_hash);
    EXPECT_EQ(row.info.overrides, info.overrides);
    EXPECT_EQ(row.info.git_sha, info.git_sha);
    EXPECT_TRUE(row.info.git_dirty);
    EXPECT_EQ(row.info.prophet_version, info.prophet_version);
    EXPECT_EQ(row.info.seed, 42);
    EXPECT_EQ(row.info.world_size, 4);
    EXPECT_EQ(row.info.backend, "cuda");
    EXPECT_EQ(row.info.hardware_json, info.hardware_json);
    EXPECT_TRUE(row.info.simulated);
    EXPECT_EQ(row.info.parent_id, "");

    store.heartbeat(run_id);
    store.finish_run(run_id, "failed", 6, "rank 1 timed out");
    row = store.get_run(run_id);
    EXPECT_EQ(row.status, "failed");
    ASSERT_TRUE(row.exit_code.has_value());
    EXPECT_EQ(*row.exit_code, 6);
    EXPECT_EQ(row.error, "rank 1 timed out");
    ASSERT_TRUE(row.ended_ms.has_value());
    EXPECT_GE(*row.ended_ms, row.started_ms);

    store.mark_resumed(run_id, 50);
    row = store.get_run(run_id);
    EXPECT_EQ(row.status, "running");
    EXPECT_EQ(row.resumed_from_step, std::optional<int64_t>(50));
    EXPECT_FALSE(row.ended_ms.has_value());

    info.parent_id = run_id;
    info.experiment = "exp_b";
    std::string child = store.begin_run(info);
    EXPECT_NE(child, run_id);
    EXPECT_EQ(store.get_run(child).info.parent_id, run_id);
    EXPECT_EQ(store.list_runs().size(), 2u);
    auto only_b = store.list_runs("exp_b");
    ASSERT_EQ(only_b.size(), 1u);
    EXPECT_EQ(only_b[0].run_id, child);
    EXPECT_EQ(store.list_runs("", 1).size(), 1u);

    try {
        store.get_run("0000000000000000");
        FAIL() << "get_run of an unknown id did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("no run"), std::string::npos);
    }
    EXPECT_THROW(store.finish_run("0000000000000000", "finished", 0, ""), Error);
    EXPECT_THROW(store.finish_run(run_id, "bogus", 0, ""), Error);
}

TEST_F(StoreTest, ParamsRoundTripAndUpsert) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    store.put_params(run_id, {{"moe.num_experts", "8"}, {"balance.policy", "\"prophet\""}});
    store.put_params(run_id, {{"moe.num_experts", "16"}});
    auto params = store.get_params(run_id);
    ASSERT_EQ(params.size(), 2u);
    EXPECT_EQ(params[0], std::make_pair(std::string("balance.policy"), std::string("\"prophet\"")));
    EXPECT_EQ(params[1], std::make_pair(std::string("moe.num_experts"), std::string("16")));
}

TEST_F(StoreTest, MetricsRoundTripWithNanAndInf) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    store.put_metric(run_id, "loss", 0, 2.5);
    store.put_metric(run_id, "loss", 1, std::numeric_limits<double>::quiet_NaN());
    store.put_metric(run_id, "loss", 2, std::numeric_limits<double>::infinity());
    store.put_metric(run_id, "max_mean", 1, 1.25, /*layer=*/3, /*rank=*/2);
    store.put_metric(run_id, "max_mean", 1, 1.5, /*layer=*/4, /*rank=*/2);

    auto loss = store.get_metrics(run_id, "loss");
    ASSERT_EQ(loss.size(), 3u);
    EXPECT_EQ(loss[0].value, 2.5);
    EXPECT_EQ(loss[0].layer, -1);
    EXPECT_EQ(loss[0].rank, -1);
    EXPECT_TRUE(std::isnan(loss[1].value));
    EXPECT_TRUE(std::isinf(loss[2].value) && loss[2].value > 0);
    EXPECT_GT(loss[0].ts_ms, 0);
    EXPECT_EQ(query_int("SELECT is_nan FROM metrics WHERE key='loss' AND step=1"), 1);
    EXPECT_EQ(query_int("SELECT value IS NULL FROM metrics WHERE key='loss' AND step=1"), 1);
    EXPECT_EQ(query_int("SELECT is_nan FROM metrics WHERE key='loss' AND step=2"), 0);

    auto per_layer = store.get_metrics(run_id, "max_mean");
    ASSERT_EQ(per_layer.size(), 2u);
    EXPECT_EQ(per_layer[0].layer, 3);
    EXPECT_EQ(per_layer[0].rank, 2);
    EXPECT_EQ(per_layer[1].value, 1.5);
    EXPECT_EQ(store.get_metrics(run_id).size(), 5u);
}

TEST_F(StoreTest, MetricUpsertDoesNotDuplicate) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    for (int pass = 0; pass < 3; ++pass) {
        for (int step = 0; step < 10; ++step) store.put_metric(run_id, "loss", step, step + pass * 100.0);
    }
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 10);
    auto rows = store.get_metrics(run_id, "loss");
    ASSERT_EQ(rows.size(), 10u);
    EXPECT_EQ(rows[7].value, 207.0);
    // a NaN overwritten by a number clears is_nan
    store.put_metric(run_id, "loss", 3, std::nan(""));
    store.put_metric(run_id, "loss", 3, 1.0);
    EXPECT_EQ(query_int("SELECT is_nan FROM metrics WHERE step=3"), 0);
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 10);
}

TEST_F(StoreTest, ExpertLoadRoundTripIsBitExact) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    const int num_devices = 3, num_experts = 5;
    std::vector<int64_t> tokens(num_devices * num_experts);  // [D][E]
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i * 1000003) - 7;
    tokens[4] = std::numeric_limits<int64_t>::max();
    tokens[9] = std::numeric_limits<int64_t>::min();
    store.put_expert_load(run_id, 12, 2, tokens.data(), num_devices, num_experts);

    auto row = store.get_expert_load(run_id, 12, 2);
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->num_devices, num_devices);
    EXPECT_EQ(row->num_experts, num_experts);
    EXPECT_EQ(row->tokens, tokens);
    EXPECT_FALSE(store.get_expert_load(run_id, 12, 3).has_value());
    // int64 little-endian on disk: -7, then 999996 = 0x0f423c
    EXPECT_EQ(query_int("SELECT length(tokens) FROM expert_load"), 8 * num_devices * num_experts);
    EXPECT_EQ(query_int("SELECT hex(substr(tokens, 1, 16)) = 'F9FFFFFFFFFFFFFF3C420F0000000000' FROM expert_load"), 1);
}

TEST_F(StoreTest, PlacementsAndEventsRoundTrip) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    store.put_placement_row(run_id, 5, 1, /*expert=*/0, /*replica=*/0, /*rank=*/2);
    store.put_placement_row(run_id, 5, 1, 0, 1, 3);
    store.put_placement_row(run_id, 5, 1, 1, 0, 0);
    store.put_placement_row(run_id, 5, 1, 0, 1, 1);  // replica 1 of expert 0 moved: upsert
    auto rows = store.get_placements(run_id, 5, 1);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].expert, 0);
    EXPECT_EQ(rows[0].replica, 0);
    EXPECT_EQ(rows[0].rank, 2);
    EXPECT_EQ(rows[1].replica, 1);
    EXPECT_EQ(rows[1].rank, 1);
    EXPECT_EQ(rows[2].expert, 1);
    EXPECT_TRUE(store.get_placements(run_id, 6, 1).empty());

    store.put_event(run_id, 10, 0, "info", "plan", "replicated expert 3", R"({"expert":3})");
    store.put_event(run_id, 11, -1, "error", "timeout", "rank 1 stuck", "");
    auto events = store.get_events(run_id);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].step, 10);
    EXPECT_EQ(events[0].rank, 0);
    EXPECT_EQ(events[0].level, "info");
    EXPECT_EQ(events[0].kind, "plan");
    EXPECT_EQ(events[0].message, "replicated expert 3");
    EXPECT_EQ(events[0].data_json, R"({"expert":3})");
    EXPECT_EQ(events[1].rank, -1);
    EXPECT_EQ(events[1].data_json, "");
    EXPECT_LT(events[0].id, events[1].id);
    EXPECT_EQ(query_int("SELECT count(*) FROM events WHERE data IS NULL"), 1);
}

TEST_F(StoreTest, PlanResultsAndBenchRoundTrip) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    PlanResultRow r;
    r.run_id = run_id;
    r.policy = "prophet";
    r.iteration = 7;
    r.layer = 2;
    r.predicted_eq6_ms = 1.5;
    r.predicted_eq8_ms = 1.25;
    r.max_mean_load = 1.1;
    r.balance_std = 0.05;
    r.a2a_bytes = 1e9;
    r.trans_bytes = 2.5e6;
    r.agg_bytes = 3.5e6;
    r.replicas = 4;
    r.plan_us = 123.5;
    r.dropped_tokens = 17;
    store.put_plan_result(r);
    PlanResultRow other = r;
    other.policy = "static";
    other.balance_std = std::nan("");
    store.put_plan_result(other);
    r.replicas = 5;
    store.put_plan_result(r);  // upsert

    auto rows = store.get_plan_results(run_id);
    ASSERT_EQ(rows.size(), 2u);
    const PlanResultRow& got = rows[0];
    EXPECT_EQ(got.policy, "prophet");
    EXPECT_EQ(got.run_id, run_id);
    EXPECT_EQ(got.iteration, 7);
    EXPECT_EQ(got.layer, 2);
    EXPECT_EQ(got.predicted_eq6_ms, 1.5);
    EXPECT_EQ(got.predicted_eq8_ms, 1.25);
    EXPECT_EQ(got.max_mean_load, 1.1);
    EXPECT_EQ(got.balance_std, 0.05);
    EXPECT_EQ(got.a2a_bytes, 1e9);
    EXPECT_EQ(got.trans_bytes, 2.5e6);
    EXPECT_EQ(got.agg_bytes, 3.5e6);
    EXPECT_EQ(got.replicas, 5);
    EXPECT_EQ(got.plan_us, 123.5);
    EXPECT_EQ(got.dropped_tokens, 17);
    EXPECT_EQ(rows[1].policy, "static");
    EXPECT_TRUE(std::isnan(rows[1].balance_std));

    store.put_bench(run_id, "BM_plan/64", 0, 1000.5, 990.25, 100, R"({"items":64})");
    store.put_bench(run_id, "BM_plan/64", 1, 1001.5, 991.25, 100, "");
    auto bench = store.get_bench(run_id);
    ASSERT_EQ(bench.size(), 2u);
    EXPECT_EQ(bench[0].name, "BM_plan/64");
    EXPECT_EQ(bench[0].rep, 0);
    EXPECT_EQ(bench[0].real_ns, 1000.5);
    EXPECT_EQ(bench[0].cpu_ns, 990.25);
    EXPECT_EQ(bench[0].iterations, 100);
    EXPECT_EQ(bench[0].counters_json, R"({"items":64})");
    EXPECT_EQ(bench[1].rep, 1);
}

Trace make_trace(bool with_transitions) {
    Trace t;
    t.meta.num_iterations = 3;
    t.meta.num_layers = 2;
    t.meta.num_devices = 2;
    t.meta.num_experts = 4;
    t.meta.top_k = 2;
    t.meta.tokens_per_iteration = 1 << 20;
    t.meta.d_model = 512;
    t.meta.d_ffn = 2048;
    t.meta.seq_len = 128;
    t.meta.source = "synthetic:zipf";
    t.counts.resize(3 * 2 * 2 * 4);
    for (size_t i = 0; i < t.counts.size(); ++i) t.counts[i] = static_cast<int64_t>((i * 2654435761u) % 100000);
    t.counts[0] = std::numeric_limits<int64_t>::max();
    if (with_transitions) {
        t.transitions.resize(3 * 1 * 4 * 4);
        for (size_t i = 0; i < t.transitions.size(); ++i) t.transitions[i] = static_cast<int64_t>(i * i) - 3;
    }
    return t;
}

void expect_same_trace(const Trace& a, const Trace& b) {
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

TEST_F(StoreTest, TraceRoundTripIsBitExact) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    Trace with = make_trace(true);
    Trace without = make_trace(false);
    without.counts[5] = 99;

    std::string id_with = store.save_trace(with, "");
    std::string id_without = store.save_trace(without, run_id);
    EXPECT_NE(id_with, id_without);

    expect_same_trace(store.load_trace(id_with), with);
    Trace by_run = store.load_trace(run_id);
    expect_same_trace(by_run, without);
    EXPECT_FALSE(by_run.has_transitions());
    EXPECT_EQ(query_int("SELECT count(*) FROM traces WHERE transitions IS NULL"), 1);
    EXPECT_EQ(query_int("SELECT count(*) FROM traces WHERE run_id IS NULL"), 1);

    // the latest trace of a run wins
    Trace newer = make_trace(true);
    newer.counts[1] = 1;
    store.save_trace(newer, run_id);
    expect_same_trace(store.load_trace(run_id), newer);
    EXPECT_EQ(store.list_traces(run_id).size(), 2u);
    EXPECT_EQ(store.list_traces().size(), 3u);

    try {
        store.load_trace("nothing_here");
        FAIL() << "load_trace of an unknown id did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("no trace"), std::string::npos) << e.what();
    }

    Trace bad = make_trace(true);
    bad.counts.pop_back();
    EXPECT_THROW(store.save_trace(bad, ""), Error);
}

TEST_F(StoreTest, CorruptTraceBlobIsReported) {
    Store store = Store::open(db_path_);
    std::string trace_id = store.save_trace(make_trace(false), "");
    raw_exec(db_path_, "UPDATE traces SET counts = x'0102'");
    try {
        store.load_trace(trace_id);
        FAIL() << "a truncated counts blob was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitDatabase);
        EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
    }
}

TEST_F(StoreTest, ThrowingTransactionLeavesNothing) {
    Store store = Store::open(db_path_);
    std::string run_id = store.begin_run(sample_info());
    EXPECT_THROW(store.transaction([&] {
        EXPECT_TRUE(store.in_transaction());
        for (int step = 0; step < 5; ++step) store.put_metric(run_id, "loss", step, 1.0);
        std::vector<int64_t> tokens(4, 1);
        store.put_expert_load(run_id, 0, 0, tokens.data(), 2, 2);
        store.put_event(run_id, 0, 0, "info", "plan", "x", "");
        store.begin_run(sample_info());
        throw std::runtime_error("boom");
    }),
                 std::runtime_error);
    EXPECT_FALSE(store.in_transaction());
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 0);
    EXPECT_EQ(query_int("SELECT count(*) FROM expert_load"), 0);
    EXPECT_EQ(query_int("SELECT count(*) FROM events"), 0);
    EXPECT_EQ(query_int("SELECT count(*) FROM runs"), 1);

    // a committed transaction writes everything, visible to another connection
    store.transaction([&] {
        for (int step = 0; step < 5; ++step) store.put_metric(run_id, "loss", step, 1.0);
        store.transaction([&] { store.put_metric(run_id, "loss", 99, 2.0); });  // nested joins the outer
    });
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 6);
    // the store stays usable after a rollback
    store.put_metric(run_id, "loss", 100, 3.0);
    EXPECT_EQ(query_int("SELECT count(*) FROM metrics"), 7);
}

}  // namespace
}  // namespace prophet
