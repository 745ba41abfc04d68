// The layer lower bound (balance/bounds.h) against exact optima found by enumerating every placement and routing
// rule on small instances (D, E <= 4), and on constructed cases where the optimum is known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "balance/bounds.h"
#include "balance/policies.h"
#include "balance_fixtures.h"

namespace prophet {
namespace {

using testing::paper_cost_model;
using testing::skewed_counts;
using testing::unit_cost_model;

// Two nodes of D/2 devices, NVLink pairs inside a node, every resource limited (docs/cluster.md "Topology").
CostModel topology_cost_model(int D, TransBroadcast broadcast) {
    CostModel m = paper_cost_model(D, 64);
    ClusterSpec& c = m.cluster;
    c.devices_per_node = std::max(1, D / 2);
    c.nvlink_domain = std::max(1, D / 2);
    c.nvlink_bytes_per_s = 400e9 / 8;
    c.intra_node_bytes_per_s = 64e9 / 8;
    c.inter_node_bytes_per_s = 100e9 / 8;
    c.node_nic_bytes_per_s = 100e9 / 8;
    c.pcie_bytes_per_s = 128e9 / 8;
    c.gpu_injection_bytes_per_s = c.gpu_ejection_bytes_per_s = 450e9 / 8;
    c.nvlink_latency_s = 2e-6, c.intra_node_latency_s = 5e-6, c.inter_node_latency_s = 10e-6;
    c.topology = true;
    m.topology_aware = true;
    m.trans_broadcast = broadcast;
    return m;
}

enum class Cluster { kUnit, kPaper, kStar, kChain, kSlowNic };

CostModel make_model(Cluster kind, int D) {
    switch (kind) {
        case Cluster::kUnit:
            return unit_cost_model(D);
        case Cluster::kPaper:
            return paper_cost_model(D, 64);
        case Cluster::kStar:
            return topology_cost_model(D, TransBroadcast::kStar);
        case Cluster::kChain:
            return topology_cost_model(D, TransBroadcast::kChain);
        case Cluster::kSlowNic:
            break;
    }
    // the inter-node NICs are the bottleneck: the bound's node-level all-to-all term decides
    CostModel m = topology_cost_model(D, TransBroadcast::kStar);
    m.cluster.node_nic_bytes_per_s = m.cluster.inter_node_bytes_per_s = 1e9 / 8;
    m.model.d_ffn = 1;  // an expert weighs two tokens: replicas are cheap next to the all-to-all
    return m;
}

// The least time of each model over every placement (owners anywhere when all_owners, else the static homes) with
// at most `cap` replicas per device (0: none), and every routing rule: the exact optimum the bound must not exceed.
struct Optimum {
    double eq6 = INFINITY, eq8 = INFINITY, fastermoe = INFINITY, a2a_fec = INFINITY;
};

Optimum enumerate_optimum(const CostModel& m, const std::vector<int64_t>& counts, int D, int E, int cap,
                          bool all_owners) {
    Optimum best;
    std::vector<int> owner(E);
    int64_t owner_sets = 1;
    for (int e = 0; e < E; ++e) owner_sets *= all_owners ? D : 1;
    Placement probe = Placement::make_owners(D, std::vector<int>(E, 0));
    for (int64_t o = 0; o < owner_sets; ++o) {
        for (int e = 0, rest = static_cast<int>(o); e < E; ++e, rest /= D)
            owner[e] = all_owners ? rest % D : probe.home(e);
        for (uint32_t mask = 0; mask < (1u << (E * D)); ++mask) {
            Placement p = Placement::make_owners(D, owner);
            bool valid = true;
            for (int bit = 0; bit < E * D && valid; ++bit) {
                if (!(mask >> bit & 1u)) continue;
                valid = owner[bit / D] != bit % D;  // a replica flag on the owner: the same set is counted elsewhere
                if (valid) p.add_replica(bit / D, bit % D);
            }
            if (!valid || !check_placement(p, cap).empty()) continue;
            for (RouteRule rule : {RouteRule::kOwner, RouteRule::kLeastLoaded, RouteRule::kEvenSplit}) {
                const CostBreakdown c = predict_layer(m, compute_flow(counts.data(), D, E, p, rule), p);
                best.eq6 = std::min(best.eq6, c.eq6_s);
                best.eq8 = std::min(best.eq8, c.eq8_s);
                best.fastermoe = std::min(best.fastermoe, c.fastermoe_s);
                best.a2a_fec = std::min(best.a2a_fec, 4 * c.a2a_s + 3 * c.fec_s);
            }
        }
    }
    return best;
}

constexpr double kRel = 1e-12;  // rounding of the sums the bound and the cost model add in different orders

struct SmallCase {
    const char* name;
    int D, E, cap, layer, layers;
    Cluster cluster;
    double skew;
    uint64_t seed;
};

class BoundVsEnumeration : public ::testing::TestWithParam<SmallCase> {};

// No placement, owner, replica set or routing rule allowed by the budget beats the bound under any model.
TEST_P(BoundVsEnumeration, NoPlacementBeatsTheBound) {
    const SmallCase& c = GetParam();
    const CostModel m = model_for_layer(make_model(c.cluster, c.D), c.layer);
    const std::vector<int64_t> counts = skewed_counts(c.D, c.E, 40, c.skew, c.seed);
    const bool all_owners = c.D * c.E <= 9;  // owners anywhere up to 3 x 3, the static homes beyond
    const Optimum opt = enumerate_optimum(m, counts, c.D, c.E, c.cap, all_owners);
    const LayerBound b = layer_bound(m, counts.data(), c.D, c.E, BoundBudget{c.cap}, c.layer, c.layers);
    EXPECT_LE(b.eq6_s, opt.eq6 * (1 + kRel));
    EXPECT_LE(b.eq8_s, opt.eq8 * (1 + kRel));
    EXPECT_LE(b.fastermoe_s, opt.fastermoe * (1 + kRel));
    EXPECT_LE(b.sim_s, opt.a2a_fec * (1 + kRel));
    EXPECT_LE(b.eq6_l2l_s, b.eq6_s * (1 + kRel));
    EXPECT_GT(b.eq6_s, 0.0);
}

// The exhaustive policy (owners static, every replica set, the owner rule) is never below the bound.
TEST_P(BoundVsEnumeration, ExhaustivePolicyIsNeverBelowTheBound) {
    const SmallCase& c = GetParam();
    if (c.E % c.D != 0) GTEST_SKIP() << "exhaustive keeps the static owners, defined for E % D == 0 only";
    const CostModel m = model_for_layer(make_model(c.cluster, c.D), c.layer);
    const std::vector<int64_t> counts = skewed_counts(c.D, c.E, 40, c.skew, c.seed);
    const LayerBound b = layer_bound(m, counts.data(), c.D, c.E, BoundBudget{c.cap}, c.layer, c.layers);
    for (int eq : {6, 8}) {
        BalanceOptions o;
        o.cost_eq = eq;
        o.max_replicas_per_device = c.cap;
        const Placement p = plan_exhaustive(counts.data(), c.D, c.E, m, o);
        const CostBreakdown cost = predict_layer(m, compute_flow(counts.data(), c.D, c.E, p, RouteRule::kOwner), p);
        EXPECT_LE(eq == 6 ? b.eq6_s : b.eq8_s, layer_cost(cost, eq) * (1 + kRel)) << "Eq " << eq;
    }
}

const SmallCase kSmallCases[] = {
    {"unit_2x2_first", 2, 2, 0, 0, 4, Cluster::kUnit, 1.5, 1},
    {"unit_2x4_middle", 2, 4, 0, 1, 4, Cluster::kUnit, 1.2, 2},
    {"unit_4x2_last", 4, 2, 0, 3, 4, Cluster::kUnit, 2.0, 3},
    {"unit_3x3_cap1", 3, 3, 1, 1, 4, Cluster::kUnit, 1.5, 4},
    {"unit_4x4_cap1", 4, 4, 1, 2, 4, Cluster::kUnit, 1.0, 5},
    {"paper_2x2", 2, 2, 0, 1, 4, Cluster::kPaper, 1.5, 6},
    {"paper_3x3", 3, 3, 0, 0, 2, Cluster::kPaper, 0.8, 7},
    {"paper_4x4", 4, 4, 0, 1, 3, Cluster::kPaper, 1.5, 8},
    {"paper_4x4_cap1", 4, 4, 1, 1, 3, Cluster::kPaper, 2.5, 9},
    {"star_2x2", 2, 2, 0, 1, 4, Cluster::kStar, 1.5, 10},
    {"star_4x4", 4, 4, 0, 1, 4, Cluster::kStar, 1.2, 11},
    {"chain_4x4", 4, 4, 0, 2, 4, Cluster::kChain, 2.0, 12},
    {"chain_4x2_first", 4, 2, 0, 0, 4, Cluster::kChain, 1.0, 13},
    {"slow_nic_4x4", 4, 4, 0, 1, 4, Cluster::kSlowNic, 0.5, 14},
    {"slow_nic_4x4_cap1", 4, 4, 1, 2, 4, Cluster::kSlowNic, 1.0, 15},
};
INSTANTIATE_TEST_SUITE_P(Bounds, BoundVsEnumeration, ::testing::ValuesIn(kSmallCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Constructed cases whose optimum the bound reaches (docs/bounds.md "Tightness").
struct TightCase {
    const char* name;
    int D, E;
    std::vector<int64_t> counts;
    int model;  // 6, 8 or 'F' (FasterMoE's system)
};

double model_time(const LayerBound& b, int model) {
    return model == 6 ? b.eq6_s : model == 8 ? b.eq8_s : b.fastermoe_s;
}
double model_time(const Optimum& o, int model) { return model == 6 ? o.eq6 : model == 8 ? o.eq8 : o.fastermoe; }

class BoundTight : public ::testing::TestWithParam<TightCase> {
  protected:
    // unit model, a middle layer: its exact optimum over every placement, and the bound
    void solve(double* optimum, double* bound) const {
        const TightCase& c = GetParam();
        const CostModel m = model_for_layer(unit_cost_model(c.D), 1);
        *optimum = model_time(enumerate_optimum(m, c.counts, c.D, c.E, 0, true), c.model);
        *bound = model_time(layer_bound(m, c.counts.data(), c.D, c.E, BoundBudget{}, 1, 3), c.model);
    }
};

TEST_P(BoundTight, BoundEqualsTheOptimum) {
    double optimum = 0, bound = 0;
    solve(&optimum, &bound);
    EXPECT_NEAR(bound, optimum, 1e-9 * optimum);
}

// A bound 1% higher would claim more than the optimum achieves: the test that catches an over-eager bound.
TEST_P(BoundTight, BoundRaisedOnePercentExceedsTheOptimum) {
    double optimum = 0, bound = 0;
    solve(&optimum, &bound);
    EXPECT_GT(bound * 1.01, optimum);
}

const TightCase kTightCases[] = {
    // every token already on its expert's home: static is optimal (no all-to-all, compute at the mean)
    {"local_eq6", 2, 2, {100, 0, 0, 100}, 6},
    {"local_eq8", 2, 2, {100, 0, 0, 100}, 8},
    {"local_fastermoe", 2, 2, {100, 0, 0, 100}, 'F'},
    // both devices route only to expert 0: one replica on device 1 removes the all-to-all and halves compute
    {"one_replica_eq6", 2, 2, {100, 0, 100, 0}, 6},
    {"one_replica_eq8", 2, 2, {100, 0, 100, 0}, 8},
    {"one_replica_fastermoe", 2, 2, {100, 0, 100, 0}, 'F'},
};
INSTANTIATE_TEST_SUITE_P(Bounds, BoundTight, ::testing::ValuesIn(kTightCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
