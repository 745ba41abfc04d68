// The per-op model (sim/op_model.h): hand-computed GEMM interpolation, the ring all-reduce formula, the [ops]
// section's round trip and its errors, and the model's features on a hand-built step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "../temp_dir_test.h"
#include "balance/cluster.h"
#include "core/error.h"
#include "core/stats.h"
#include "op_test_util.h"
#include "sim/op_model.h"
#include "store/store.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

using prophet::sim::test_util::unit_tables;

}  // namespace

// Each GemmOp reads its own rates: unit_tables' rate depends on M only (nn 1, 2, 4 GFLOP/s at M = 16, 64, 256;
// nt x2, tn x4), so a GEMM takes 2MNK / that rate, wherever N and K lie (clamped to the grid).
TEST(OpModel, GemmSecondsAreFlopOverTheOpsRate) {
    const OpTables t = unit_tables();
    struct Row {
        double m;
        int n, k;
        GemmOp op;
        double gflop_s;
    };
    const Row rows[] = {
        {64, 128, 64, GemmOp::kNN, 2.0},    // a grid M: its rate, N and K inside the grid
        {32, 128, 64, GemmOp::kNN, 1.5},    // halfway in log M between 16 and 64
        {128, 32, 32, GemmOp::kNN, 3.0},    // halfway in log M between 64 and 256
        {8, 128, 64, GemmOp::kNN, 1.0},     // below the grid: the smallest M's rate
        {1024, 4096, 4, GemmOp::kNN, 4.0},  // beyond every axis: the corner's rate
        {64, 128, 64, GemmOp::kNT, 4.0},    // the data gradient's own rates
        {64, 128, 64, GemmOp::kTN, 8.0},    // the weight gradient's own rates
    };
    for (const Row& r : rows)
        EXPECT_NEAR(gemm_seconds(t, r.m, r.n, r.k, r.op), 2.0 * r.m * r.n * r.k / (r.gflop_s * 1e9), 1e-15)
            << "M " << r.m << " N " << r.n << " K " << r.k << " " << gemm_op_name(r.op);
    EXPECT_EQ(gemm_seconds(t, 0, 128, 64), 0.0);
}

namespace {

// a grid over M = 16 .. 1024, N = K = 8 .. 2048 (factor 4) whose nn rate is rate(m, n, k) at every point
template <class Rate>
GemmGrid synthetic_grid(Rate rate) {
    GemmGrid g;
    g.m = {16, 64, 256, 1024};
    g.n = g.k = {8, 32, 128, 512, 2048};
    for (const double m : g.m)
        for (const double n : g.n)
            for (const double k : g.k) g.flops_per_s[0].push_back(rate(m, n, k));
    return g;
}

}  // namespace

// Every grid point gives back its measured rate exactly, whatever the rates are.
TEST(GemmGrid, ReproducesEveryGridPoint) {
    const GemmGrid g = synthetic_grid([](double m, double n, double k) {
        return 1e9 * (1 + std::fmod(m * 7 + n * 13 + k * 3, 17.0));  // no pattern in the rates
    });
    size_t i = 0;
    for (const double m : g.m)
        for (const double n : g.n)
            for (const double k : g.k) {
                EXPECT_DOUBLE_EQ(gemm_flops_per_s(g, m, n, k), g.flops_per_s[0][i]) << m << " " << n << " " << k;
                ++i;
            }
}

// A rate that is multilinear in (log M, log N, log K) is reproduced exactly between the grid points, and clamped
// (the edge's rate) beyond them.
TEST(GemmGrid, InterpolatesMultilinearlyInLogSpace) {
    const auto lg = [](double x) { return std::log2(x); };
    const auto rate = [&](double m, double n, double k) {
        return 1e9 *
               (1 + 0.5 * lg(m) + 0.25 * lg(n) + 0.1 * lg(k) + 0.02 * lg(m) * lg(n) + 0.01 * lg(m) * lg(n) * lg(k));
    };
    const GemmGrid g = synthetic_grid(rate);
    struct Row {
        double m, n, k;     // where
        double em, en, ek;  // the point whose rate it must be (the clamped coordinates)
    };
    const Row rows[] = {
        {40, 100, 300, 40, 100, 300},    // inside: exact
        {500, 9, 2000, 500, 9, 2000},    // inside, near the edges
        {4, 100, 300, 16, 100, 300},     // below M: clamped to 16
        {4096, 3, 9000, 1024, 8, 2048},  // beyond all three axes
    };
    for (const Row& r : rows)
        EXPECT_NEAR(gemm_flops_per_s(g, r.m, r.n, r.k), rate(r.em, r.en, r.ek), 1e-6 * rate(r.em, r.en, r.ek))
            << r.m << " " << r.n << " " << r.k;
}

// Where the measured rates rise with M (every N, K), the interpolated rate never falls along M, at any N, K.
TEST(GemmGrid, MonotoneWhereTheDataAre) {
    const GemmGrid g = synthetic_grid([](double m, double n, double k) {
        return 1e9 * m / (m + 40) * (1 + std::fmod(n * 5 + k, 11.0));  // rising in M, arbitrary in N and K
    });
    for (const double n : {8.0, 20.0, 700.0, 2048.0})
        for (const double k : {8.0, 50.0, 1500.0}) {
            double last = 0;
            for (double m = 8; m <= 2048; m *= 1.1) {
                const double r = gemm_flops_per_s(g, m, n, k);
                EXPECT_GE(r, last * (1 - 1e-12)) << "M " << m << " N " << n << " K " << k;
                last = r;
            }
        }
}

// The fit of a realistic kernel: a rate that saturates in every dimension (peak x M/(M+48) x N/(N+24) x
// K/(K+32), the shape of a BLAS kernel's per-call overhead and edge effects), sampled on the factor-4 grid and
// predicted between the grid points, with the error each shape may have.
TEST(GemmGrid, FitsASaturatingKernelBetweenGridPoints) {
    const auto truth = [](double m, double n, double k) { return 100e9 * m / (m + 48) * n / (n + 24) * k / (k + 32); };
    const GemmGrid g = synthetic_grid(truth);
    struct Row {
        double m, n, k;
        double tolerance;  // |predicted / true - 1|
    };
    const Row rows[] = {
        {256, 2048, 64, 0.06},    // the calibration's expert GEMM: K between 32 and 128
        {256, 1024, 96, 0.04},    // a held-out expert: N and K off the grid
        {100, 1536, 96, 0.06},    // and M too
        {512, 384, 128, 0.04},    // a qkv projection
        {30, 8, 128, 0.10},       // a small gate GEMM: steepest part of the curves
        {2048, 4096, 4096, 0.04}  // beyond the grid: the corner's rate, the curve nearly flat there
    };
    for (const Row& r : rows) {
        const double predicted = gemm_flops_per_s(g, r.m, r.n, r.k);
        EXPECT_NEAR(predicted / truth(r.m, r.n, r.k), 1.0, r.tolerance) << r.m << " " << r.n << " " << r.k;
    }
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

// The all-reduce by size class: grid 1 KB -> 10 us, 100 KB -> 60 us, 1 MB -> 960 us, measured on 2 ranks
struct AllReduceSizeCase {
    const char* name;
    double bytes;
    int ranks;
    double seconds;
};

class AllReduceBySize : public ::testing::TestWithParam<AllReduceSizeCase> {};

TEST_P(AllReduceBySize, InterpolatesTheMeasuredSizes) {
    OpTables t = unit_tables();
    t.allreduce_ranks = 2;
    t.allreduce_sizes_bytes = {1e3, 1e5, 1e6};
    t.allreduce_sizes_s = {10e-6, 60e-6, 960e-6};
    EXPECT_NEAR(ring_allreduce_seconds(t, GetParam().bytes, GetParam().ranks), GetParam().seconds, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, AllReduceBySize,
    ::testing::Values(AllReduceSizeCase{"at_a_grid_size", 1e5, 2, 60e-6},
                      AllReduceSizeCase{"below_the_grid", 8, 2, 10e-6},
                      // within the first class: 10 + (50500 - 1000) * 50 / 99000 us
                      AllReduceSizeCase{"between_small_sizes", 50500, 2, 35e-6},
                      // within the second class: 60 + 450000 * 900 / 900000 us; the ring formula gives 454 us
                      AllReduceSizeCase{"between_large_sizes", 550000, 2, 510e-6},
                      AllReduceSizeCase{"beyond_the_grid", 2e6, 2, 1960e-6},
                      // another rank count than the grid's: the ring formula (2 steps x (4 us + 1000 / 2e9 s))
                      AllReduceSizeCase{"other_ranks_use_the_ring", 1000, 4, 6 * (4e-6 + 1000 / 4e9)},
                      AllReduceSizeCase{"one_rank_is_free", 1e5, 1, 0.0}),
    [](const ::testing::TestParamInfo<AllReduceSizeCase>& info) { return info.param.name; });

class OpTablesFile : public prophet::testing::TempDirTest {};

TEST_F(OpTablesFile, RoundTripsTheAllReduceSizes) {
    OpTables in = unit_tables();
    in.allreduce_ranks = 2;
    in.allreduce_sizes_bytes = {8, 4194304};
    in.allreduce_sizes_s = {12.5e-6, 3.25e-3};
    const std::string path = (dir_ / "c.toml").string();
    std::ofstream(path) << op_tables_to_toml(in);
    const OpTables t = load_op_tables(path);
    EXPECT_EQ(t.allreduce_ranks, 2);
    EXPECT_EQ(t.allreduce_sizes_bytes, in.allreduce_sizes_bytes);
    ASSERT_EQ(t.allreduce_sizes_s.size(), 2u);
    EXPECT_NEAR(t.allreduce_sizes_s[0], 12.5e-6, 1e-12);
    EXPECT_NEAR(t.allreduce_sizes_s[1], 3.25e-3, 1e-9);
}

// calibrated_on (a sweep's description of the calibration: its names and paths) is written escaped: a value with
// `"` and newlines loads back as itself and adds no key
TEST_F(OpTablesFile, CalibratedOnReadsBackAsWritten) {
    OpTables in = unit_tables();
    in.calibrated_on = "sweep \"a\"\nstream_gbyte_s = 1e9\n# c:\\x\r";
    const std::string path = (dir_ / "c.toml").string();
    std::ofstream(path) << op_tables_to_toml(in);
    OpTables t;
    ASSERT_NO_THROW(t = load_op_tables(path)) << op_tables_to_toml(in);
    EXPECT_EQ(t.calibrated_on, in.calibrated_on);
    EXPECT_EQ(t.stream_bytes_per_s, unit_tables().stream_bytes_per_s);
}

TEST_F(OpTablesFile, BadAllReduceSizesNameTheField) {
    const std::string path = (dir_ / "c.toml").string();
    const std::string base = op_tables_to_toml(unit_tables());
    const std::pair<const char*, const char*> cases[] = {
        {"allreduce_ranks = 2\nallreduce_sizes = [[4096, 30], [1024, 40]]\n", "ops.allreduce_sizes"},
        {"allreduce_ranks = 2\nallreduce_sizes = [[4096, -1]]\n", "ops.allreduce_sizes"},
        {"allreduce_sizes = [[4096, 30]]\n", "ops.allreduce_ranks"},
    };
    for (const auto& [text, field] : cases) {
        std::ofstream(path) << base << text;
        try {
            load_op_tables(path);
            ADD_FAILURE() << "accepted: " << text;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        }
    }
}

TEST_F(OpTablesFile, RoundTripsThroughAClusterFileThePlannerStillReads) {
    const std::string path = (dir_ / "c.toml").string();
    {
        std::ofstream out(path);
        out << "[cluster]\nname = \"x\"\nnum_devices = 2\ndevices_per_node = 2\ncompute_tflop_s = 0.1\n"
               "a2a_gbit_s = [10.0]\na2a_max_message_kib = []\ntrans_gbit_s = 5.0\n";
        out << op_tables_to_toml(unit_tables());
    }
    const OpTables t = load_op_tables(path);
    EXPECT_EQ(t.gemm.m, (std::vector<double>{16, 64, 256}));
    EXPECT_EQ(t.gemm.n, (std::vector<double>{32, 128}));
    EXPECT_EQ(t.gemm.k, (std::vector<double>{32, 128}));
    for (size_t op = 0; op < 3; ++op) EXPECT_EQ(t.gemm.flops_per_s[op], unit_tables().gemm.flops_per_s[op]) << op;
    EXPECT_EQ(t.link_message_s, 0.0);
    EXPECT_NEAR(t.p2p_bytes_per_s, 2e9, 1);
    EXPECT_NEAR(t.allreduce_latency_s, 4e-6, 1e-12);
    EXPECT_EQ(t.calibrated_on, "unit");
    // the planner's reader ignores [ops]
    EXPECT_EQ(load_cluster_file(path).num_devices, 2);
}

TEST_F(OpTablesFile, RoundTripsEveryTable) {
    OpTables in = unit_tables();
    in.gemm.flops_per_s[2][11] = 1.23456e9;  // tn at the last grid point
    in.link_message_s = 125e-6;
    in.attn_flops_per_s_at[{96, 4}] = 2.5e9;
    const std::string path = (dir_ / "c.toml").string();
    std::ofstream(path) << op_tables_to_toml(in);
    const OpTables t = load_op_tables(path);
    EXPECT_NEAR(gemm_flops_per_s(t.gemm, 256, 128, 128, GemmOp::kTN), 1.23456e9, 1e3);
    EXPECT_NEAR(t.link_message_s, 125e-6, 1e-12);
    EXPECT_NEAR(attn_flops_per_s(t, 96, 4), 2.5e9, 1);
}

// A grid whose rates do not cover every point, or an axis out of order, names the field.
TEST_F(OpTablesFile, BadGemmGridNamesTheField) {
    const std::string path = (dir_ / "c.toml").string();
    struct Row {
        std::string from, to;  // a text replacement in the written section
        std::string field;     // the field the error must name
    };
    const Row rows[] = {
        {"gemm_grid_m = [16, 64, 256]", "gemm_grid_m = [16, 256, 64]", "ops.gemm_grid_m"},
        {"gemm_grid_k = [32, 128]", "gemm_grid_k = [32, 128, 512]", "ops.gemm_gflop_s_nn"},
        {"gemm_gflop_s_tn = [", "gemm_gflop_s_tn = [-1, ", "ops.gemm_gflop_s_tn"},
    };
    for (const Row& r : rows) {
        std::string text = op_tables_to_toml(unit_tables());
        ASSERT_NE(text.find(r.from), std::string::npos) << r.from << " in\n" << text;
        text.replace(text.find(r.from), r.from.size(), r.to);
        std::ofstream(path) << text;
        try {
            load_op_tables(path);
            ADD_FAILURE() << "expected an error for " << r.to;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(r.field), std::string::npos) << e.what();
        }
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
            // x W1 (M x 128 x 64) + h W2 (M x 64 x 128) at the grid's rates + gelu + the cold weights (W1, W2:
            // 2 C F floats streamed once at 1 GB/s)
            const double expected = gemm_seconds(t, m, 128, 64) + gemm_seconds(t, m, 64, 128) +
                                    (1e-6 + 2 * m * 128 * 4 / 1e9) + (1e-6 + 2 * 64 * 128 * 4 / 1e9);
            EXPECT_NEAR(d.own_us[i], expected * 1e6, 1e-6) << "rank " << op.rank;
        } else {
            // the slowest rank: rank 0 receives 20 rows of 64 floats: 5 us latency + 5120 B / 1 GB/s
            EXPECT_NEAR(d.own_us[i], (5e-6 + 20 * 64 * 4 / 1e9) * 1e6, 1e-6);
        }
    }
    // an emulated 8 Mbit/s link (1 MB/s egress) with 100 us per message: rank 1 sends 20 rows of 256 B, 5.12 ms at
    // the link, then the inner copy at the table's 5.12 us; one peer, one message
    c.link_bytes_per_s = 1e6;
    c.link_latency_s = 100e-6;
    const ReplayDurations slow = predict_durations(t, c, step, g);
    for (size_t i = 0; i < g.ops.size(); ++i)
        if (g.ops[i].kind == prophet::OpKind::kDispatch) {
            EXPECT_NEAR(slow.own_us[i], (5e-6 + 20 * 64 * 4 / 1e9 + 20 * 64 * 4 / 1e6 + 100e-6) * 1e6, 1e-6);
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
            EXPECT_NEAR(with_cost.own_us[i], (5e-6 + 20 * 64 * 4 / 1e9 + 20 * 64 * 4 / 1e6 + 100e-6 + 40e-6) * 1e6,
                        1e-6);
            EXPECT_NEAR(no_link.own_us[i], (5e-6 + 20 * 64 * 4 / 1e9) * 1e6, 1e-6);
        }
}

// Backward expert compute: per layer dx = dy W^T (nt) and dW = x^T dy (tn), each at its own rates.
TEST(OpModel, ExpertBackwardUsesTheTransposedGemmRates) {
    const OpTables t = unit_tables();  // rate by M only: nn r(M), nt 2 r(M), tn 4 r(M)
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
        const double r = m == 32 ? 1.5e9 : 1e9;  // nn rate: M = 32 halfway in log between 16 and 64
        // two nt and two tn GEMMs of 2 M C F FLOP each: 2 x 2MCF / 2r + 2 x 2MCF / 4r = 3 MCF / r; + gelu' (1 us +
        // 3 M F floats at 1 GB/s); + the cold weights, read again and their gradients read and written (1 us + 3 x
        // 2 C F floats at 1 GB/s), per expert and not per row
        const double expected = 3 * m * 64 * 128 / r + 1e-6 + 3 * m * 128 * 4 / 1e9 + 1e-6 + 3 * 2 * 64 * 128 * 4 / 1e9;
        EXPECT_NEAR(d.own_us[i], expected * 1e6, 1e-6) << "rank " << g.ops[i].rank;
    }
}

// fit_op_scales on the committed replay fixture's schedule-none run: after the fit, the median over the steps of
// every fitted kind's recorded / modelled own time is 1; communication kinds keep no factor.
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
    std::map<std::string, std::vector<double>> ratios;  // kind -> per step: recorded / modelled
    for (const RecordedStep& s : run.steps) {
        if (s.step == run.steps.front().step) continue;
        const ReplayGraph g = build_replay_graph(s.ops, run.num_ranks, false, "test");
        const ReplayDurations rec = recorded_durations(g), mod = predict_durations(fitted, config, s, g);
        std::map<std::string, std::pair<double, double>> sums;  // kind -> (recorded, modelled) in this step
        for (size_t i = 0; i < g.ops.size(); ++i) {
            sums[prophet::op_kind_name(g.ops[i].kind)].first += rec.own_us[i];
            sums[prophet::op_kind_name(g.ops[i].kind)].second += mod.own_us[i];
        }
        for (const auto& [kind, sum] : sums)
            if (sum.second > 0 && sum.first > 0) ratios[kind].push_back(sum.first / sum.second);
    }
    for (const auto& [kind, factor] : fitted.scale) {
        EXPECT_GT(factor, 0.0) << kind;
        EXPECT_NEAR(median(ratios[kind]), 1.0, 1e-9) << kind;
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
