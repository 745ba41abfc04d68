// op_test_util.h: shared builders of the per-op model's tests: small [ops] tables with round numbers and one
// recorded op.
#pragma once

#include "sim/op_model.h"

namespace prophet::sim::test_util {

// a GEMM grid over M = 16, 64, 256 and N, K = 32, 128 whose rate depends on M only: nn 1, 2, 4 GFLOP/s, nt twice
// and tn four times that; stream 1 us + 1 GB/s; attention 1 GFLOP/s; all-to-all 5 us per peer + 1 GB/s;
// point-to-point 10 us + 2 GB/s; ring all-reduce 4 us per step + 1 GB/s
inline OpTables unit_tables() {
    OpTables t;
    GemmGrid& g = t.gemm;
    g.m = {16, 64, 256};
    g.n = {32, 128};
    g.k = {32, 128};
    const double per_op[3] = {1.0, 2.0, 4.0};  // nn, nt, tn (GemmOp order)
    for (size_t op = 0; op < 3; ++op)
        for (const double by_m : {1e9, 2e9, 4e9})
            for (int nk = 0; nk < 4; ++nk) g.flops_per_s[op].push_back(by_m * per_op[op]);
    t.stream_latency_s = 1e-6;
    t.stream_bytes_per_s = 1e9;
    t.attn_flops_per_s = 1e9;
    t.a2a_latency_s = 5e-6;
    t.a2a_bytes_per_s = 1e9;
    t.p2p_latency_s = 10e-6;
    t.p2p_bytes_per_s = 2e9;
    t.allreduce_latency_s = 4e-6;
    t.allreduce_bytes_per_s = 1e9;
    t.calibrated_on = "unit";
    return t;
}

// one recorded op (times in microseconds from the step's origin)
inline ReplayOp op(prophet::OpKind kind, int rank, double start, double end, int block = 0,
                   prophet::OpLane lane = prophet::OpLane::kCompute, int part = 0) {
    ReplayOp o;
    o.kind = kind;
    o.lane = lane;
    o.block = block;
    o.part = part;
    o.rank = rank;
    o.start_us = start;
    o.end_us = end;
    return o;
}

}  // namespace prophet::sim::test_util
