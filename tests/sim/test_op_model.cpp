// The per-op model (sim/op_model.h): hand-computed GEMM interpolation, the ring all-reduce formula, the [ops]
// section's round trip and its errors, and the model's features on a hand-built step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "../temp_dir_test.h"
#include "balance/cluster.h"
#include "core/error.h"
#include "op_test_util.h"
#include "sim/op_model.h"
#include "store/store.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

using prophet::sim::test_util::unit_tables;

}  // namespace

TEST(OpModel, GemmInterpolatesInRows) {
    const OpTables t = unit_tables();
    EXPECT_NEAR(gemm_seconds(t, 64, 128, 64), 20e-6, 1e-12);   // a table point
    EXPECT_NEAR(gemm_seconds(t, 40, 128, 64), 15e-6, 1e-12);   // halfway 16..64: 10 + 24/48 * 10
    EXPECT_NEAR(gemm_seconds(t, 160, 128, 64), 50e-6, 1e-12);  // halfway 64..256: 20 + 96/192 * 60
    EXPECT_NEAR(gemm_seconds(t, 512, 128, 64), 160e-6, 1e-12); // past the end on the last segment: 80 + 256 * 60/192
    EXPECT_NEAR(gemm_seconds(t, 8, 128, 64), 5e-6, 1e-12);     // below: the smallest M's rate
    EXPECT_EQ(gemm_seconds(t, 0, 128, 64), 0.0);
    // a shape without a table: its FLOP at the rate the table reaches at that FLOP count. The table's points:
    // M = 16: 262144 FLOP in 10 us (26.2 GFLOP/s), M = 64: 1048576 FLOP in 20 us (52.4 GFLOP/s), M = 256: 80 us
    // (52.4 GFLOP/s). 2 * 128 * 32 * 32 = 262144 FLOP: exactly the first point's rate -> 10 us
    EXPECT_NEAR(gemm_seconds(t, 128, 32, 32), 10e-6, 1e-12);
    // 524288 FLOP (M = 256 of 32 x 32): halfway in log FLOP between the first two points -> 39.3 GFLOP/s
    EXPECT_NEAR(gemm_seconds(t, 256, 32, 32), 524288.0 / (0.5 * (262144.0 / 10e-6 + 1048576.0 / 20e-6)), 1e-12);
    // below every point: the smallest point's rate
    EXPECT_NEAR(gemm_seconds(t, 4, 32, 32), 2.0 * 4 * 32 * 32 / (262144.0 / 10e-6), 1e-15);
}

// A transposed GEMM (GemmOp) reads its own table; without one it falls back to the forward (nn) table of the same
// (N, K), then to the FLOP rate.
TEST(OpModel, TransposedGemmsUseTheirOwnTablesElseTheForwardOne) {
    OpTables t = unit_tables();
    GemmTable nt;
    nt.op = GemmOp::kNT;
    nt.n = 128;
    nt.k = 64;
    nt.m = {16, 64, 256};
    nt.seconds = {30e-6, 60e-6, 240e-6};
    t.gemms.push_back(nt);
    EXPECT_NEAR(gemm_seconds(t, 64, 128, 64, GemmOp::kNT), 60e-6, 1e-12);
    EXPECT_NEAR(gemm_seconds(t, 40, 128, 64, GemmOp::kNT), 45e-6, 1e-12);  // 30 + 24/48 * 30
    EXPECT_NEAR(gemm_seconds(t, 64, 128, 64), 20e-6, 1e-12);              // nn unchanged by the nt table
    EXPECT_NEAR(gemm_seconds(t, 64, 128, 64, GemmOp::kTN), 20e-6, 1e-12); // no tn table: the nn one
    EXPECT_NEAR(gemm_seconds(t, 128, 32, 32, GemmOp::kTN), gemm_seconds(t, 128, 32, 32), 1e-15);  // FLOP rate
}

TEST(OpModel, AttentionRateAtFurtherShapes) {
    OpTables t = unit_tables();
    t.attn_flops_per_s_at[{128, 8}] = 3e9;
    EXPECT_EQ(attn_flops_per_s(t, 128, 8), 3e9);
    EXPECT_EQ(attn_flops_per_s(t, 128, 4), 1e9);  // another head count: the calibration model's rate
}

TEST(OpModel, RingAllReduce) {
    const OpTables t = unit_tables();
    // D = 4, 8 MB: 2 * 3 steps of (4 us + 8e6 / (4 * 1e9) s) = 6 * 2004 us
    EXPECT_NEAR(ring_allreduce_seconds(t, 8e6, 4), 6 * (4e-6 + 2e-3), 1e-12);
    EXPECT_NEAR(ring_allreduce_seconds(t, 1000, 2), 2 * (4e-6 + 1000 / 2e9), 1e-15);
    EXPECT_EQ(ring_allreduce_seconds(t, 1e6, 1), 0.0);
}

class OpTablesFile : public prophet::testing::TempDirTest {};

TEST_F(OpTablesFile, RoundTripsThroughAClusterFileThePlannerStillReads) {
    const std::string path = (dir_ / "c.toml").string();
    {
        std::ofstream out(path);
        out << "[cluster]\nname = \"x\"\nnum_devices = 2\ndevices_per_node = 2\ncompute_tflop_s = 0.1\n"
               "a2a_gbit_s = [10.0]\na2a_max_message_kib = []\ntrans_gbit_s = 5.0\n";
        out << op_tables_to_toml(unit_tables());
    }
    const OpTables t = load_op_tables(path);
    ASSERT_EQ(t.gemms.size(), 1u);
    EXPECT_EQ(t.gemms[0].op, GemmOp::kNN);
    EXPECT_EQ(t.link_message_s, 0.0);
    EXPECT_EQ(t.gemms[0].n, 128);
    EXPECT_EQ(t.gemms[0].k, 64);
    EXPECT_EQ(t.gemms[0].m, (std::vector<double>{16, 64, 256}));
    EXPECT_NEAR(t.gemms[0].seconds[2], 80e-6, 1e-12);
    EXPECT_NEAR(t.p2p_bytes_per_s, 2e9, 1);
    EXPECT_NEAR(t.allreduce_latency_s, 4e-6, 1e-12);
    EXPECT_EQ(t.calibrated_on, "unit");
    // the planner's reader ignores [ops]
    EXPECT_EQ(load_cluster_file(path).num_devices, 2);
}

TEST_F(OpTablesFile, RoundTripsEveryTable) {
    OpTables in = unit_tables();
    in.gemms.push_back(in.gemms[0]);
    in.gemms[1].op = GemmOp::kTN;
    in.gemms[1].seconds = {1e-6, 2e-6, 3e-6};
    in.link_message_s = 125e-6;
    in.attn_flops_per_s_at[{96, 4}] = 2.5e9;
    const std::string path = (dir_ / "c.toml").string();
    std::ofstream(path) << op_tables_to_toml(in);
    const OpTables t = load_op_tables(path);
    ASSERT_EQ(t.gemms.size(), 2u);
    EXPECT_EQ(t.gemms[1].op, GemmOp::kTN);
    EXPECT_NEAR(gemm_seconds(t, 256, 128, 64, GemmOp::kTN), 3e-6, 1e-12);
    EXPECT_NEAR(t.link_message_s, 125e-6, 1e-12);
    EXPECT_NEAR(attn_flops_per_s(t, 96, 4), 2.5e9, 1);
}

TEST_F(OpTablesFile, BadGemmOpNamesTheFieldWithTheAllowedValues) {
    OpTables in = unit_tables();
    in.gemms.push_back(in.gemms[0]);
    in.gemms[1].op = GemmOp::kTN;
    const std::string path = (dir_ / "c.toml").string();
    // a bad op names the field and the allowed values
    std::string text = op_tables_to_toml(in);
    text.replace(text.find("\"tn\""), 4, "\"tt\"");
    std::ofstream(path) << text;
    try {
        load_op_tables(path);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ops.gemm_op"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("nn, nt, tn"), std::string::npos) << e.what();
    }
}

TEST_F(OpTablesFile, MissingOrBadFieldsNameThemselves) {
    const std::string path = (dir_ / "c.toml").string();
    {
        std::ofstream out(path);
        out << "[ops]\nstream_latency_us = 1\n";
    }
    try {
        load_op_tables(path);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ops.stream_gbyte_s"), std::string::npos) << e.what();
    }
    {
        std::ofstream out(path);
        out << "[cluster]\nname = \"x\"\n";
    }
    EXPECT_THROW(load_op_tables(path), Error);  // no [ops] section: says how to calibrate
}

TEST(OpModel, ExpertComputeFollowsTheRowsEachRankComputes) {
    // D = 2, E = 2, one layer: rank 0 routes 30 tokens to e0 and 10 to e1, rank 1 routes 20 to e0 and 0 to e1;
    // static placement: e0 on rank 0, e1 on rank 1, routed to the owner -> rank 0 computes 50 rows of e0,
    // rank 1 10 rows of e1; rank 0 sends 10, receives 20
    const OpTables t = unit_tables();
    OpModelConfig c;
    c.V = 16, c.T = 8, c.C = 64, c.NH = 1, c.L = 1, c.E = 2, c.K = 1, c.F = 128, c.B = 2, c.D = 2;
    c.route_rule = "owner";
    RecordedStep step;
    step.counts = {30, 10, 20, 0};
    step.placements = {Placement::make_static(2, 2)};
    std::vector<ReplayOp> ops;
    for (int r = 0; r < 2; ++r) {
        ops.push_back(test_util::op(prophet::OpKind::kFec, r, 0, 1));
        ops.push_back(test_util::op(prophet::OpKind::kDispatch, r, 1, 2));
    }
    const ReplayGraph g = build_replay_graph(ops, 2, false, "test");
    const ReplayDurations d = predict_durations(t, c, step, g);
    for (size_t i = 0; i < g.ops.size(); ++i) {
        const ReplayOp& op = g.ops[i];
        if (op.kind == prophet::OpKind::kFec) {
            const double m = op.rank == 0 ? 50 : 10;
            // x W1 (N = F = 128, K = C = 64: the table) + h W2 (64 x 128: no table, FLOP at the best rate) + gelu
            const double expected = gemm_seconds(t, m, 128, 64) + gemm_seconds(t, m, 64, 128) +
                                    (1e-6 + 2 * m * 128 * 4 / 1e9);
            EXPECT_NEAR(d.own_us[i], expected * 1e6, 1e-6) << "rank " << op.rank;
        } else {
            // the slowest rank: rank 0 receives 20 rows of 64 floats: 5 us latency + 5120 B / 1 GB/s
            EXPECT_NEAR(d.own_us[i], (5e-6 + 20 * 64 * 4 / 1e9) * 1e6, 1e-6);
        }
    }
    // an emulated 8 Mbit/s link (1 MB/s egress) with 100 us per message: rank 1 sends 20 rows of 256 B, 5.12 ms at
    // the link, slower than the table's 5.12 us; one peer, one message
    c.link_bytes_per_s = 1e6;
    c.link_latency_s = 100e-6;
    const ReplayDurations slow = predict_durations(t, c, step, g);
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == prophet::OpKind::kDispatch) {
            EXPECT_NEAR(slow.own_us[i], (5e-6 + 20 * 64 * 4 / 1e6 + 100e-6) * 1e6, 1e-6);
        }
    // the emulation's own cost per paced message (link_message_s) adds to the one message; without a link it is
    // not charged
    OpTables paced = t;
    paced.link_message_s = 40e-6;
    const ReplayDurations with_cost = predict_durations(paced, c, step, g);
    c.link_bytes_per_s = 0;
    const ReplayDurations no_link = predict_durations(paced, c, step, g);
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == prophet::OpKind::kDispatch) {
            EXPECT_NEAR(with_cost.own_us[i], (5e-6 + 20 * 64 * 4 / 1e6 + 100e-6 + 40e-6) * 1e6, 1e-6);
            EXPECT_NEAR(no_link.own_us[i], (5e-6 + 20 * 64 * 4 / 1e9) * 1e6, 1e-6);
        }
}

// Backward expert compute: per layer dx = dy W^T (nt) and dW = x^T dy (tn), from their own tables.
TEST(OpModel, ExpertBackwardUsesTheTransposedGemmTables) {
    OpTables t = unit_tables();  // nn (N = 128, K = 64)
    auto table = [](GemmOp op, int n, int k, double us) {
        GemmTable g;
        g.op = op;
        g.n = n;
        g.k = k;
        g.m = {16, 64, 256};
        g.seconds = {us * 1e-6, 4 * us * 1e-6, 16 * us * 1e-6};  // linear in M: us per 16 rows
        return g;
    };
    t.gemms.push_back(table(GemmOp::kNT, 64, 128, 1));   // dx of x W1 (W1 [64, 128]): [M, 64] over 128
    t.gemms.push_back(table(GemmOp::kTN, 128, 64, 2));   // dW1 [64, 128]
    t.gemms.push_back(table(GemmOp::kNT, 128, 64, 3));   // dh of h W2 (W2 [128, 64]): [M, 128] over 64
    t.gemms.push_back(table(GemmOp::kTN, 64, 128, 4));   // dW2 [128, 64]
    OpModelConfig c;
    c.V = 16, c.T = 8, c.C = 64, c.NH = 1, c.L = 1, c.E = 2, c.K = 1, c.F = 128, c.B = 2, c.D = 2;
    c.route_rule = "owner";
    RecordedStep step;
    step.counts = {32, 0, 0, 16};  // rank 0: 32 rows of e0; rank 1: 16 rows of e1; nothing crosses
    step.placements = {Placement::make_static(2, 2)};
    std::vector<ReplayOp> ops;
    for (int r = 0; r < 2; ++r) ops.push_back(test_util::op(prophet::OpKind::kBec, r, 0, 1));
    const ReplayGraph g = build_replay_graph(ops, 2, false, "test");
    const ReplayDurations d = predict_durations(t, c, step, g);
    for (size_t i = 0; i < g.ops.size(); ++i) {
        const double m = g.ops[i].rank == 0 ? 32 : 16;
        // (1 + 2 + 3 + 4) us per 16 rows + gelu' (1 us + 3 M F floats at 1 GB/s)
        EXPECT_NEAR(d.own_us[i], 10.0 * m / 16 + (1e-6 + 3 * m * 128 * 4 / 1e9) * 1e6, 1e-6) << "rank " << g.ops[i].rank;
    }
}

// fit_op_scales on the committed replay fixture's schedule-none run: after the fit, every fitted kind's modelled
// own time summed over the steps equals the recorded one; communication kinds keep no factor.
TEST(OpModel, ScalesFitTheCalibrationRunPerComputeKind) {
    const std::string dir = std::string(PROPHET_SOURCE_DIR) + "/tests/fixtures/";
    if (!std::filesystem::exists(dir + "replay-2rank.db")) GTEST_SKIP() << "no fixture";
    // a copy: opening a store may create its -wal / -shm files, never beside the committed fixture
    const std::string copy = ::testing::TempDir() + "/scales-fixture-" + std::to_string(getpid()) + ".db";
    std::filesystem::copy_file(dir + "replay-2rank.db", copy, std::filesystem::copy_options::overwrite_existing);
    Store store = Store::open(copy);
    RecordedRun run;
    for (const RunRow& row : store.list_runs("replay-fixture")) {
        run = load_recorded_run(store, row.run_id);
        if (!run.blockwise) break;
    }
    ASSERT_FALSE(run.blockwise);
    const OpTables fitted = fit_op_scales(load_op_tables(dir + "replay-2rank-cluster.toml"), run);
    ASSERT_TRUE(fitted.scale.count("fec") && fitted.scale.count("bec") && fitted.scale.count("attn"));
    EXPECT_FALSE(fitted.scale.count("dispatch") || fitted.scale.count("trans") || fitted.scale.count("allreduce"));
    const OpModelConfig config = op_model_config(run);
    std::map<std::string, std::pair<double, double>> sums;  // kind -> (recorded, modelled)
    for (const RecordedStep& s : run.steps) {
        if (s.step == run.steps.front().step) continue;
        const ReplayGraph g = build_replay_graph(s.ops, run.num_ranks, false, "test");
        const ReplayDurations rec = recorded_durations(g), mod = predict_durations(fitted, config, s, g);
        for (size_t i = 0; i < g.ops.size(); ++i) {
            sums[prophet::op_kind_name(g.ops[i].kind)].first += rec.own_us[i];
            sums[prophet::op_kind_name(g.ops[i].kind)].second += mod.own_us[i];
        }
    }
    for (const auto& [kind, factor] : fitted.scale) {
        EXPECT_GT(factor, 0.0) << kind;
        EXPECT_NEAR(sums[kind].second, sums[kind].first, 1e-9 * sums[kind].first) << kind;
    }
    // the factors survive the [ops] section's round trip
    const std::string path = ::testing::TempDir() + "/scaled-ops.toml";
    {
        std::ofstream out(path);
        out << op_tables_to_toml(fitted);
    }
    const OpTables back = load_op_tables(path);
    ASSERT_EQ(back.scale.size(), fitted.scale.size());
    for (const auto& [kind, factor] : fitted.scale) EXPECT_NEAR(back.scale.at(kind), factor, 1e-5 * factor) << kind;
    for (const std::string& f : {copy, copy + "-wal", copy + "-shm", path}) std::filesystem::remove(f);
}
