// The whole iteration (SimOptions::dense): hand-computed timelines with embedding, attention, LM head, the dense
// all-reduce (blocking and bucketed) and the optimizer in both schedules; the bucketed all-reduce hidden behind
// a long backward and exposed beside a short one; the all-reduce by algorithm; measured cluster fields kept.
#include <gtest/gtest.h>

#include <cmath>

#include "../balance/balance_fixtures.h"
#include "core/error.h"
#include "sim/dense_ops.h"
#include "sim/simulator.h"
#include "timeline_check.h"

using namespace prophet;
using namespace prophet::sim;
using prophet::sim::timeline_check::Expected;
using prophet::sim::timeline_check::expect_timeline;

namespace {

constexpr OpPart W = OpPart::kWhole;
constexpr OpPart N = OpPart::kUnderNec;
constexpr OpPart X = OpPart::kUnderExpert;

// D = E = 2, every device routes one token to each expert (every layer): static placement, H = {2, 2},
// R = {1, 1}: all-to-all 1 s, FEC 2 s, BEC 4 s, no Trans or Agg.
struct Tiny {
    std::vector<int64_t> counts;
    TraceView view;
    explicit Tiny(int L) {
        counts.assign(static_cast<size_t>(4) * L, 1);  // 2 x 2 ones per layer
        view.counts = counts.data();
        view.num_iterations = 1;
        view.num_layers = L;
        view.num_devices = 2;
        view.num_experts = 2;
    }
    std::vector<std::vector<Placement>> placements() const {
        return {std::vector<Placement>(view.num_layers, Placement::make_static(2, 2))};
    }
};

// The unit cost model (C = F = T = N = b = 1, t = 4 FLOP/s, links 1 B/s) with no measured FNEC / BNEC and a
// memory bandwidth of 1 B/s; V = 2, NH = 1. By dense_ops.h:
//   embed 3 N C b / M = 3 s each way; attn_fwd (8 + 4) / 4 + (5 + 2) / 1 = 10 s, attn_bwd 20 s;
//   fnec 5 s, bnec 10 s; head_fwd 2*2/4 + (2 + 4) = 7 s, head_bwd 8/4 + 2 * 6 = 14 s;
//   gradient bytes head 2, block 4 + 8 + 2 = 14, embedding (2 + 1) = 3; ring all-reduce over D = 2 on one node:
//   2 (D-1)/D bytes / 1 B/s = 1 s per byte; optimizer 8 (5 + 14 L + 2 L) / 1 = 8 (5 + 16 L) s.
CostModel dense_cost_model() {
    CostModel m = prophet::testing::unit_cost_model(2);
    m.cluster.fnec_s = -1;
    m.cluster.bnec_s = -1;
    m.cluster.memory_bytes_per_s = 1.0;
    return m;
}

SimOptions dense_options(ScheduleKind kind, AllReduceMode mode) {
    SimOptions o;
    o.schedule = kind;
    o.dense.enabled = true;
    o.dense.vocab = 2;
    o.dense.num_heads = 1;
    o.dense.all_reduce = mode;
    o.dense.bucket_bytes = 10;
    return o;
}

double all_reduce_busy(const IterationResult& it) { return it.kind_busy_s[static_cast<int>(OpKind::kAllReduce)]; }
double all_reduce_exposed(const IterationResult& it) {
    return it.kind_exposed_s[static_cast<int>(OpKind::kAllReduce)];
}

// Every op but the all-reduces and the optimizer (identical in both all-reduce modes), by hand.
// none, L = 1: every op in sequence.
std::vector<Expected> none_l1_ops() {
    return {
        {OpKind::kEmbedFwd, -1, W, {{0, 3}}},
        {OpKind::kAttnFwd, 0, W, {{3, 13}}},
        {OpKind::kGate, 0, W, {{13, 13}}},
        {OpKind::kPlan, 0, W, {{13, 13}}},
        {OpKind::kTrans, 0, W, {{13, 13}}},
        {OpKind::kDispatchA2a, 0, W, {{13, 14}}},
        {OpKind::kFec, 0, W, {{14, 16}}},
        {OpKind::kCombineA2a, 0, W, {{16, 17}}},
        {OpKind::kFnec, 0, W, {{17, 22}}},
        {OpKind::kHeadFwd, -1, W, {{22, 29}}},
        {OpKind::kHeadBwd, -1, W, {{29, 43}}},
        {OpKind::kBnec, 0, W, {{43, 53}}},
        {OpKind::kCombineA2aBwd, 0, W, {{53, 54}}},
        {OpKind::kBec, 0, W, {{54, 58}}},
        {OpKind::kDispatchA2aBwd, 0, W, {{58, 59}}},
        {OpKind::kAgg, 0, W, {{59, 59}}},
        {OpKind::kAttnBwd, 0, W, {{59, 79}}},
        {OpKind::kEmbedBwd, -1, W, {{79, 82}}},
    };
}

// blockwise, L = 2.
std::vector<Expected> blockwise_l2_ops() {
    return {
        {OpKind::kTrans, 0, W, {{0, 0}}},
        {OpKind::kEmbedFwd, -1, W, {{0, 3}}},
        {OpKind::kAttnFwd, 0, W, {{3, 13}}},
        {OpKind::kGate, 0, W, {{13, 13}}},
        {OpKind::kPlan, 0, W, {{13, 13}}},
        {OpKind::kDispatchA2a, 0, W, {{13, 14}}},
        {OpKind::kTrans, 1, X, {{14, 14}}},
        {OpKind::kFec, 0, W, {{14, 16}}},
        {OpKind::kCombineA2a, 0, W, {{16, 17}}},
        {OpKind::kTrans, 1, N, {{17, 17}}},
        {OpKind::kFnec, 0, W, {{17, 22}}},
        {OpKind::kAttnFwd, 1, W, {{22, 32}}},
        {OpKind::kGate, 1, W, {{32, 32}}},
        {OpKind::kPlan, 1, W, {{32, 32}}},
        {OpKind::kDispatchA2a, 1, W, {{32, 33}}},
        {OpKind::kFec, 1, W, {{33, 35}}},
        {OpKind::kCombineA2a, 1, W, {{35, 36}}},
        {OpKind::kFnec, 1, W, {{36, 41}}},
        {OpKind::kHeadFwd, -1, W, {{41, 48}}},
        {OpKind::kHeadBwd, -1, W, {{48, 62}}},
        {OpKind::kBnec, 1, W, {{62, 72}}},
        {OpKind::kCombineA2aBwd, 1, W, {{72, 73}}},
        {OpKind::kBec, 1, W, {{73, 77}}},
        {OpKind::kDispatchA2aBwd, 1, W, {{77, 78}}},
        {OpKind::kAttnBwd, 1, W, {{78, 98}}},
        {OpKind::kAgg, 1, N, {{78, 78}}},
        {OpKind::kBnec, 0, W, {{98, 108}}},
        {OpKind::kCombineA2aBwd, 0, W, {{108, 109}}},
        {OpKind::kAgg, 1, X, {{109, 109}}},
        {OpKind::kBec, 0, W, {{109, 113}}},
        {OpKind::kDispatchA2aBwd, 0, W, {{113, 114}}},
        {OpKind::kAttnBwd, 0, W, {{114, 134}}},
        {OpKind::kAgg, 0, W, {{114, 114}}},
        {OpKind::kEmbedBwd, -1, W, {{134, 137}}},
    };
}

// `ops` followed by `more`
std::vector<Expected> with(std::vector<Expected> ops, const std::vector<Expected>& more) {
    ops.insert(ops.end(), more.begin(), more.end());
    return ops;
}

}  // namespace

TEST(DenseOps, DurationsFromTheModelDims) {
    const DenseOpTimes d = dense_op_times(dense_cost_model(), dense_options(ScheduleKind::kNone,
                                                                           AllReduceMode::kBlocking).dense, 2, 2);
    EXPECT_DOUBLE_EQ(d.embed_fwd_s, 3);
    EXPECT_DOUBLE_EQ(d.attn_fwd_s, 10);
    EXPECT_DOUBLE_EQ(d.attn_bwd_s, 20);
    EXPECT_DOUBLE_EQ(d.fnec_s, 5);
    EXPECT_DOUBLE_EQ(d.bnec_s, 10);
    EXPECT_DOUBLE_EQ(d.head_fwd_s, 7);
    EXPECT_DOUBLE_EQ(d.head_bwd_s, 14);
    EXPECT_DOUBLE_EQ(d.optimizer_s, 8 * (5 + 16 * 2));
    EXPECT_EQ(d.grad_bytes, (std::vector<double>{2, 14, 14, 3}));
    EXPECT_FALSE(d.all_reduce_in_tail);
}

TEST(DenseOps, MeasuredClusterFieldsKeepTheirMeaning) {
    // measured FNEC / BNEC hold attention, embedding and head (calibration spreads them over the blocks); a
    // measured step tail holds the all-reduce and the optimizer
    CostModel m = dense_cost_model();
    m.cluster.fnec_s = 1.5;
    m.cluster.bnec_s = 2.5;
    m.cluster.step_tail_s = 4.0;
    const DenseOpTimes d =
        dense_op_times(m, dense_options(ScheduleKind::kNone, AllReduceMode::kBlocking).dense, 1, 2);
    EXPECT_DOUBLE_EQ(d.fnec_s, 1.5);
    EXPECT_DOUBLE_EQ(d.bnec_s, 2.5);
    EXPECT_EQ(d.attn_fwd_s + d.attn_bwd_s + d.embed_fwd_s + d.embed_bwd_s + d.head_fwd_s + d.head_bwd_s, 0.0);
    EXPECT_DOUBLE_EQ(d.optimizer_s, 4.0);
    EXPECT_TRUE(d.all_reduce_in_tail);
    Tiny tiny(1);
    const SimResult r = simulate(tiny.view, tiny.placements(), m,
                                 dense_options(ScheduleKind::kNone, AllReduceMode::kBlocking));
    EXPECT_DOUBLE_EQ(all_reduce_busy(r.iterations[0]), 0.0);
    // fwd: a2a 1 + FEC 2 + a2a 1 + FNEC 1.5; bwd: BNEC 2.5 + a2a 1 + BEC 4 + a2a 1; tail 4
    EXPECT_DOUBLE_EQ(r.iterations[0].iteration_s, 1 + 2 + 1 + 1.5 + 2.5 + 1 + 4 + 1 + 4.0);
}

TEST(DenseOps, AllReduceByAlgorithm) {
    ClusterSpec c;
    c.num_devices = 8;
    c.devices_per_node = 4;
    c.intra_node_bytes_per_s = 100;
    c.inter_node_bytes_per_s = 10;
    c.a2a_latency_s = 0.5;
    // ring over 8: 2 * 7/8 * 800 B over the slowest ring link (10 B/s) + 14 latencies
    EXPECT_DOUBLE_EQ(all_reduce_s(c, 800, AllReduceAlgorithm::kRing), 2.0 * 7 / 8 * 800 / 10 + 14 * 0.5);
    // hierarchical: 2 * 3/4 * 800 / 100 inside the nodes + 2 * 1/2 * 200 / 10 across, + (6 + 2) latencies
    const double hier = 2.0 * 3 / 4 * 800 / 100 + 2.0 * 1 / 2 * 200 / 10 + 8 * 0.5;
    EXPECT_DOUBLE_EQ(all_reduce_s(c, 800, AllReduceAlgorithm::kHierarchical), hier);
    EXPECT_DOUBLE_EQ(all_reduce_s(c, 800, AllReduceAlgorithm::kAuto), hier);  // several nodes: hierarchical
    c.node_nic_bytes_per_s = 20;  // four devices share 20 B/s: 5 each
    EXPECT_DOUBLE_EQ(all_reduce_s(c, 800, AllReduceAlgorithm::kHierarchical),
                     2.0 * 3 / 4 * 800 / 100 + 2.0 * 1 / 2 * 200 / 5 + 8 * 0.5);
    c.devices_per_node = 8;  // one node: the ring
    EXPECT_DOUBLE_EQ(all_reduce_s(c, 800, AllReduceAlgorithm::kAuto), 2.0 * 7 / 8 * 800 / 100 + 14 * 0.5);
    c.num_devices = 1;
    EXPECT_EQ(all_reduce_s(c, 800, AllReduceAlgorithm::kRing), 0.0);
}

// none, L = 1, blocking: every op in sequence; the all-reduce of 19 B after the embedding backward.
TEST(WholeIteration, NoneBlockingByHand) {
    Tiny tiny(1);
    const SimResult r = simulate(tiny.view, tiny.placements(), dense_cost_model(),
                                 dense_options(ScheduleKind::kNone, AllReduceMode::kBlocking));
    expect_timeline(r, with(none_l1_ops(), {
                                       {OpKind::kAllReduce, -1, W, {{82, 101}}},
                                       {OpKind::kOptimizer, -1, W, {{101, 269}}},
                                   }));
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 269);
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 4 + 19);  // four all-to-alls and the all-reduce
    EXPECT_DOUBLE_EQ(it.compute_s, 269 - 23);
    EXPECT_DOUBLE_EQ(all_reduce_exposed(it), 19);
    EXPECT_DOUBLE_EQ(it.kind_busy_s[static_cast<int>(OpKind::kHeadBwd)], 14);
}

// none, L = 1, bucketed (10 B): head (2 B) + block 0 (14 B) close a 16 B bucket after attn_bwd(0); it runs on
// the all-reduce's stream beside the embedding backward; the embedding's 3 B follow.
TEST(WholeIteration, NoneBucketedByHand) {
    Tiny tiny(1);
    const SimResult r = simulate(tiny.view, tiny.placements(), dense_cost_model(),
                                 dense_options(ScheduleKind::kNone, AllReduceMode::kBucketed));
    expect_timeline(r, with(none_l1_ops(), {
                                       {OpKind::kAllReduce, -1, W, {{79, 95}}, 0},
                                       {OpKind::kAllReduce, -1, W, {{95, 98}}, 1},
                                       {OpKind::kOptimizer, -1, W, {{98, 266}}},
                                   }));
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 266);
    EXPECT_DOUBLE_EQ(all_reduce_exposed(it), 13 + 3);  // 3 s of the first bucket beside embed_bwd
    EXPECT_DOUBLE_EQ(it.iteration_s, it.compute_s + it.exposed_comm_s);
}

// blockwise, L = 2, blocking: the 33 B all-reduce (2 + 2 x 14 + 3) after the embedding backward.
TEST(WholeIteration, BlockwiseBlockingByHand) {
    Tiny tiny(2);
    const SimResult r = simulate(tiny.view, tiny.placements(), dense_cost_model(),
                                 dense_options(ScheduleKind::kBlockwise, AllReduceMode::kBlocking));
    expect_timeline(r, with(blockwise_l2_ops(), {
                                       {OpKind::kAllReduce, -1, W, {{137, 170}}},
                                       {OpKind::kOptimizer, -1, W, {{170, 466}}},
                                   }));
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 466);
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 8 + 33);
    EXPECT_DOUBLE_EQ(it.iteration_s, it.compute_s + it.exposed_comm_s);
}

// blockwise, L = 2, bucketed (10 B): buckets of 16 B (head + block 1, after attn_bwd(1)), 14 B (block 0, after
// attn_bwd(0)) and 3 B (embedding); the all-reduce stream runs beside the comm stream, so cb(0) is not held up.
TEST(WholeIteration, BlockwiseBucketedByHand) {
    Tiny tiny(2);
    const SimResult r = simulate(tiny.view, tiny.placements(), dense_cost_model(),
                                 dense_options(ScheduleKind::kBlockwise, AllReduceMode::kBucketed));
    expect_timeline(r, with(blockwise_l2_ops(), {
                                       {OpKind::kAllReduce, -1, W, {{98, 114}}, 0},
                                       {OpKind::kAllReduce, -1, W, {{134, 148}}, 1},
                                       {OpKind::kAllReduce, -1, W, {{148, 151}}, 2},
                                       {OpKind::kOptimizer, -1, W, {{151, 447}}},
                                   }));
    const IterationResult& it = r.iterations[0];
    EXPECT_DOUBLE_EQ(it.iteration_s, 447);
    // a2a 8 s; all-reduce: [98, 114] less bnec(0) and bec(0) (its uncovered 2 s are cb(0), db(0)'s), then
    // [134, 151] less embed_bwd's 3 s
    EXPECT_DOUBLE_EQ(it.exposed_comm_s, 8 + 14);
    EXPECT_DOUBLE_EQ(all_reduce_exposed(it), 2 + 11 + 3);
    EXPECT_DOUBLE_EQ(it.iteration_s, it.compute_s + it.exposed_comm_s);
}

// Bucketed hides the all-reduce behind a long backward (only the buckets after the last block's backward stay
// exposed) and not behind a short one; blocking exposes all of it either way.
TEST(WholeIteration, BucketedAllReduceHidesBehindLongBackwardOnly) {
    const int L = 4;
    Tiny tiny(L);
    for (const bool long_compute : {true, false}) {
        CostModel m = dense_cost_model();
        m.cluster.memory_bytes_per_s = 0;                        // no streaming terms
        m.cluster.compute_flops = long_compute ? 0.01 : 1e12;   // attn_bwd 2400 s | 2.4e-11 s per block
        SimOptions bucketed = dense_options(ScheduleKind::kBlockwise, AllReduceMode::kBucketed);
        bucketed.dense.bucket_bytes = 14;  // one bucket per block (the head's 2 B join block L-1's)
        const SimOptions blocking = dense_options(ScheduleKind::kBlockwise, AllReduceMode::kBlocking);
        const IterationResult b = simulate(tiny.view, tiny.placements(), m, bucketed).iterations[0];
        const IterationResult k = simulate(tiny.view, tiny.placements(), m, blocking).iterations[0];
        const double total = 2 + 14.0 * L + 3;  // bytes = seconds on this ring
        EXPECT_DOUBLE_EQ(all_reduce_busy(b), total);
        EXPECT_DOUBLE_EQ(all_reduce_busy(k), total);
        EXPECT_DOUBLE_EQ(all_reduce_exposed(k), total) << "blocking: nothing computes beside it";
        if (long_compute) {
            // blocks 3..1's buckets hide behind the next block's backward but for the 1 s of its combine_bwd
            // all-to-all (exposed anyway); block 0's bucket runs beside the (no-time) embedding backward and the
            // embedding's after it: 14 + 3 s exposed, the rest saved
            EXPECT_NEAR(all_reduce_exposed(b), 3 * 1.0 + 14 + 3, 1e-6);
            EXPECT_NEAR(k.iteration_s - b.iteration_s, total - (14 + 3), 1e-6);
        } else {
            EXPECT_NEAR(all_reduce_exposed(b), total, 1e-6) << "no compute to hide behind";
        }
        EXPECT_NEAR(b.iteration_s, b.compute_s + b.exposed_comm_s, 1e-9 * b.iteration_s);
    }
}

TEST(WholeIteration, ScheduleListsEveryOpOnce) {
    for (ScheduleKind kind : {ScheduleKind::kNone, ScheduleKind::kBlockwise})
        for (AllReduceMode mode : {AllReduceMode::kBlocking, AllReduceMode::kBucketed}) {
            IterationOps x;
            x.dense = true;
            x.optimizer = true;
            x.all_reduce = mode;
            x.grad_bytes = {1, 5, 5, 5, 2};
            x.bucket_bytes = 6;
            const Schedule s = build_schedule(kind, 3, x);
            EXPECT_EQ(check_schedule(s), "");
            for (int l = 0; l < 3; ++l) {
                EXPECT_GE(s.find(OpKind::kAttnFwd, l), 0);
                EXPECT_GE(s.find(OpKind::kAttnBwd, l), 0);
            }
            for (OpKind k : {OpKind::kEmbedFwd, OpKind::kHeadFwd, OpKind::kHeadBwd, OpKind::kEmbedBwd})
                EXPECT_GE(s.find(k, -1), 0);
            double bytes = 0;
            int buckets = 0;
            for (const ScheduleOp& op : s.ops)
                if (op.kind == OpKind::kAllReduce) {
                    bytes += op.bytes;
                    ++buckets;
                    EXPECT_EQ(op.resource, Resource::kDenseComm);
                }
            EXPECT_DOUBLE_EQ(bytes, 18);
            // bucketed at 6 B: head + block 2 (6), block 1 (5) + block 0 (10), embedding (2)
            EXPECT_EQ(buckets, mode == AllReduceMode::kBlocking ? 1 : 3);
        }
    EXPECT_THROW(parse_all_reduce_mode("ddp"), Error);
    EXPECT_THROW(parse_all_reduce_algorithm("tree"), Error);
}
