// flow's plans pinned: the placement plan_flow picks on a table of instances, as a fingerprint (FNV-1a of the
// owners and the replica flags) with the report's counts, recorded from the planner before its speed-ups (the
// sparse relabelling, reused buffers). A speed-up must not change which placement flow picks; the predicted time
// may move only by summation order (relative 1e-12).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "balance/policy_flow.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

uint64_t fingerprint(const Placement& p) {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a 64
    auto mix = [&](uint64_t byte) { h = (h ^ byte) * 1099511628211ULL; };
    for (int o : p.owner)
        for (int shift = 0; shift < 32; shift += 8) mix((static_cast<uint32_t>(o) >> shift) & 0xff);
    for (uint8_t r : p.replica) mix(r);
    return h;
}

struct PinnedPlan {
    const char* name;
    int D, E;
    double zipf_s;
    int cap;                // balance.max_replicas_per_device
    int horizon;            // balance.flow_horizon
    bool topology;          // balance.flow_topology
    bool transfer_aware;    // balance.flow_transfer_aware
    int batches;            // plans after each of these batches (1: one plan from static)
    int cost_eq;            // balance.cost_eq (6 or 8)
    double trans_scale;     // Trans and Agg bandwidths times this (large: replicas and owner moves are cheap)
    int extra_copy_rounds;  // balance.flow_extra_copy_rounds (0: the candidate families alone)
    // recorded before the speed-ups
    uint64_t placement;
    int replicas, candidates;
    bool repacked;
    double predicted_s;
};

class FlowPinned : public ::testing::TestWithParam<PinnedPlan> {};

TEST_P(FlowPinned, PicksTheRecordedPlacement) {
    const PinnedPlan c = GetParam();
    CostModel cost = testing::paper_cost_model(c.D, 2048);
    cost.cluster.trans_bytes_per_s *= c.trans_scale;
    cost.cluster.agg_bytes_per_s *= c.trans_scale;
    BalanceOptions o;
    o.route_rule = RouteRule::kFlow;
    o.max_replicas_per_device = c.cap;
    o.flow_horizon = c.horizon;
    o.flow_topology = c.topology;
    o.flow_transfer_aware = c.transfer_aware;
    o.cost_eq = c.cost_eq;
    o.flow_extra_copy_rounds = c.extra_copy_rounds;
    Placement p = Placement::make_static(c.D, c.E);  // each batch's plan starts from the last one
    FlowPlanReport rep;
    FlowScratch scratch;  // reused across the batches, as a planning thread does
    for (int b = 0; b < c.batches; ++b) {
        const std::vector<int64_t> counts = testing::skewed_counts(c.D, c.E, 2048, c.zipf_s, 11 + b);
        p = plan_flow(counts.data(), c.D, c.E, cost, o, p, &rep, FlowScoring::kFastSplit, &scratch);
    }
    EXPECT_EQ(fingerprint(p), c.placement);
    EXPECT_EQ(rep.replicas, c.replicas);
    EXPECT_EQ(rep.candidates, c.candidates);
    EXPECT_EQ(rep.repacked, c.repacked);
    EXPECT_NEAR(rep.predicted_s, c.predicted_s, 1e-12 * std::abs(c.predicted_s));
    if (HasFailure())  // the row as it is now, to re-record after a change meant to change plans
        std::printf("{\"%s\", %d, %d, %.1f, %d, %d, %s, %s, %d, %d, %g, %d, 0x%016llxULL, %d, %d, %s, %.17g},\n",
                    c.name, c.D, c.E, c.zipf_s, c.cap, c.horizon, c.topology ? "true" : "false",
                    c.transfer_aware ? "true" : "false", c.batches, c.cost_eq, c.trans_scale, c.extra_copy_rounds,
                    static_cast<unsigned long long>(fingerprint(p)), rep.replicas, rep.candidates,
                    rep.repacked ? "true" : "false", rep.predicted_s);
}

INSTANTIATE_TEST_SUITE_P(
    Table, FlowPinned,
    ::testing::Values(PinnedPlan{"e8_d4", 4, 8, 1.2, 0, 0, true, true, 1, 6, 1, 0, 0x3cd159ae5ed53d23ULL, 0, 10, false,
                                 0.017958163705546218},
                      PinnedPlan{"e32_d16", 16, 32, 1.2, 0, 0, true, true, 1, 6, 1, 0, 0xb195a045c2c0e182ULL, 3, 19,
                                 false, 0.020473516158207285},
                      PinnedPlan{"e32_d16_flat", 16, 32, 1.2, 0, 0, false, true, 1, 6, 1, 0, 0xb195a045c2c0e182ULL, 3,
                                 19, false, 0.020473516158207285},
                      PinnedPlan{"e32_d16_unaware", 16, 32, 0.8, 0, 0, true, false, 1, 6, 1, 0, 0xdfc72c2e49eb9a03ULL,
                                 480, 40, false, 0.0057747459442016869},
                      PinnedPlan{"e64_d16_cap1", 16, 64, 1.4, 1, 0, true, true, 1, 6, 1, 0, 0x01dbc6f1fee0a4c7ULL, 6,
                                 22, false, 0.021909257551596641},
                      PinnedPlan{"e64_d32_stream", 32, 64, 1.2, 0, 0, true, true, 4, 6, 1, 0, 0x6cbd5cd576d4ca95ULL, 16,
                                 30, false, 0.021721692418151261},
                      PinnedPlan{"e64_d32_horizon", 32, 64, 1.2, 0, 8, true, true, 3, 6, 1, 0, 0x6b979c8dae7d245bULL,
                                 12, 27, false, 0.021061170310812324},
                      PinnedPlan{"e256_d64", 64, 256, 1.2, 0, 0, true, true, 1, 6, 1, 0, 0x98159f2b6c88ec7bULL, 24, 35,
                                 false, 0.022290052919215687},
                      PinnedPlan{"e256_d64_stream", 64, 256, 0.8, 0, 0, true, true, 3, 6, 1, 0, 0x20002320a9457adfULL,
                                 6, 26, false, 0.020856261084145653},
                      PinnedPlan{"e256_d64_cap2", 64, 256, 1.4, 2, 0, true, true, 1, 6, 1, 0, 0x17c71dba342227c1ULL, 32,
                                 38, false, 0.023038235392717085},
                      PinnedPlan{"e32_d16_eq8", 16, 32, 1.2, 0, 0, true, true, 1, 8, 1, 0, 0xabe821a6abc5ce57ULL, 6, 23,
                                 false, 0.012646546170980395},
                      PinnedPlan{"e32_d16_cheap_trans", 16, 32, 1.2, 0, 0, true, true, 1, 6, 100, 0,
                                 0x9b908a51071079f5ULL, 48, 41, false, 0.0080665835548683479},
                      PinnedPlan{"e32_d16_stream_free_trans", 16, 32, 1.2, 0, 0, true, true, 3, 6, 1000, 0,
                                 0xdfc72c2e49eb9a03ULL, 480, 44, false, 0.0063474082503350146},
                      PinnedPlan{"e256_d64_eq8", 64, 256, 1.2, 0, 0, true, true, 1, 8, 1, 0, 0xc6261589d0720ac1ULL, 32,
                                 38, false, 0.012529763589019607},
                      PinnedPlan{"e256_d64_cheap_trans", 64, 256, 1.2, 0, 0, true, true, 1, 6, 100, 0,
                                 0xe7e401c10e49ac4bULL, 64, 48, false, 0.0086851993370532198},
                      PinnedPlan{"e256_d64_unaware", 64, 256, 1.2, 0, 0, true, false, 1, 6, 1, 0, 0xa6da599e939d3f83ULL,
                                 16128, 86, false, 0.0057747459442012428},
                      PinnedPlan{"e256_d64_stream_eq8_cheap", 64, 256, 1.2, 0, 0, true, true, 3, 8, 100, 0,
                                 0x519c853734291d39ULL, 2048, 74, false, 0.0065205456242016808},
                      PinnedPlan{"e32_d16_extra", 16, 32, 1.2, 0, 0, true, true, 1, 6, 1, 8, 0xb195a045c2c0e182ULL, 3,
                                 23, false, 0.020473516158207285},
                      PinnedPlan{"e64_d16_cap1_extra", 16, 64, 1.4, 1, 0, true, true, 1, 6, 1, 8, 0x01dbc6f1fee0a4c7ULL,
                                 6, 28, false, 0.021909257551596641},
                      PinnedPlan{"e64_d32_stream_extra", 32, 64, 1.2, 0, 0, true, true, 4, 6, 1, 8,
                                 0x6cbd5cd576d4ca95ULL, 16, 38, false, 0.021721692418151261},
                      PinnedPlan{"e64_d32_horizon_extra", 32, 64, 1.2, 0, 8, true, true, 3, 6, 1, 8,
                                 0x6b979c8dae7d245bULL, 12, 35, false, 0.021061170310812324},
                      PinnedPlan{"e256_d64_extra", 64, 256, 1.2, 0, 0, true, true, 1, 6, 1, 8, 0x98159f2b6c88ec7bULL,
                                 24, 43, false, 0.022290052919215687},
                      PinnedPlan{"e32_d16_eq8_extra", 16, 32, 1.2, 0, 0, true, true, 1, 8, 1, 8, 0xccefaa03365b8d94ULL,
                                 7, 35, false, 0.012185029543081233},
                      PinnedPlan{"e32_d16_cheap_trans_extra", 16, 32, 1.2, 0, 0, true, true, 1, 6, 100, 8,
                                 0xa6e88b1b977e6db4ULL, 49, 57, false, 0.0079716000455350138},
                      PinnedPlan{"e256_d64_cheap_trans_extra", 64, 256, 1.2, 0, 0, true, true, 1, 6, 100, 8,
                                 0xe7e401c10e49ac4bULL, 64, 56, false, 0.0086851993370532198},
                      PinnedPlan{"e32_d16_unaware_extra", 16, 32, 0.8, 0, 0, true, false, 1, 6, 1, 8,
                                 0xdfc72c2e49eb9a03ULL, 480, 40, false, 0.0057747459442016869}),
    [](const ::testing::TestParamInfo<PinnedPlan>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
