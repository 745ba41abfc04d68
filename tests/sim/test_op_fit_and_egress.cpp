// One term of the per-op model checked on hand-built runs (sim/op_model.h):
//   - Trans and Agg over an emulated link pace only what a rank SENDS (its egress queue): the home in Trans, the
//     other holders in Agg. Two ranks that each send one expert take one expert's time at the link.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "sim/op_model.h"

using namespace prophet;
using namespace prophet::sim;

namespace {

using prophet::sim::test_util::op;
using prophet::sim::test_util::unit_tables;

// D = 2 ranks; C = 64, F = 128 (one expert: 2 C F floats = 65536 B); owner routing, no link
RecordedRun unit_run(int E) {
    RecordedRun run;
    run.run_id = "unit";
    run.num_ranks = 2;
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"model.V", "16"}, {"model.T", "8"}, {"model.C", "64"}, {"model.NH", "1"}, {"model.L", "1"},
             {"model.E", std::to_string(E)}, {"model.K", "1"}, {"model.F", "128"}, {"model.B", "2"},
             {"balance.route_to", "owner"}, {"comm.link_gbps", "0.0"}})
        run.params.emplace_back(k, v);
    return run;
}

}  // namespace

// Trans and Agg of one layer over E = 4 experts (e0, e1 at home on rank 0; e2, e3 on rank 1), unit_tables'
// point-to-point (10 us per message + 2 GB/s); the link: 1 MB/s egress, 100 us per message. The unit takes the
// slowest rank: 10 us x the messages it sends or receives + max(bytes it sends or receives / 2 GB/s, bytes it
// SENDS / 1 MB/s) + 100 us x the messages it sends.
TEST(OpTransferEgress, PacesOnlyWhatEachRankSends) {
    using K = prophet::OpKind;
    constexpr double kExpert = 65536;  // bytes
    struct Row {
        const char* what;
        std::vector<std::pair<int, int>> replicas;  // (expert, rank) added to the static placement
        K kind;
        bool link;
        double expected_s;
    };
    const double both_ways = 20e-6 + kExpert / 1e6 + 100e-6;            // each rank sends one expert
    const double one_way = 20e-6 + 2 * kExpert / 1e6 + 2 * 100e-6;       // one rank sends two
    const Row rows[] = {
        {"e0 to rank 1, e2 to rank 0: Trans", {{0, 1}, {2, 0}}, K::kTrans, true, both_ways},
        {"e0 to rank 1, e2 to rank 0: Agg", {{0, 1}, {2, 0}}, K::kAgg, true, both_ways},
        {"e0, e1 to rank 1: Trans (rank 0 sends both)", {{0, 1}, {1, 1}}, K::kTrans, true, one_way},
        {"e0, e1 to rank 1: Agg (rank 1 sends both)", {{0, 1}, {1, 1}}, K::kAgg, true, one_way},
        {"no link: bytes moved at the table's rate", {{0, 1}, {2, 0}}, K::kTrans, false, 20e-6 + 2 * kExpert / 2e9},
    };
    for (const Row& r : rows) {
        const RecordedRun run = unit_run(4);
        OpModelConfig c = op_model_config(run);
        if (r.link) {
            c.link_bytes_per_s = 1e6;
            c.link_latency_s = 100e-6;
        }
        RecordedStep step;
        step.counts = {10, 10, 10, 10, 10, 10, 10, 10};
        step.placements = {Placement::make_static(2, 4)};
        for (const auto& [e, d] : r.replicas) step.placements[0].add_replica(e, d);
        const ReplayGraph g = build_replay_graph({op(r.kind, 0, 0, 1), op(r.kind, 1, 0, 1)}, 2, false, "test");
        const ReplayDurations d = predict_durations(unit_tables(), c, step, g);
        for (size_t i = 0; i < g.ops.size(); ++i)
            EXPECT_NEAR(d.own_us[i], r.expected_s * 1e6, 1e-6) << r.what << ", rank " << g.ops[i].rank;
    }
}
