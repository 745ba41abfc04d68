// The layer lower bound (balance/bounds.h) against exact optima found by enumerating every placement and routing
// rule on small instances (D, E <= 4), and on constructed cases where the optimum is known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "balance/bounds.h"
#include "balance/policies.h"
#include "balance_fixtures.h"
#include "sim/simulator.h"

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

enum class Cluster {
    kUnit,
    kPaper,
    kStar,
    kChain,
    kSlowNic,
    kHeavyExperts,
    kNodePerDevice,
    kPcieNodes,
    kSlowChain,
    kNodeWindows
};

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
        case Cluster::kHeavyExperts:
        case Cluster::kNodePerDevice:
        case Cluster::kPcieNodes:
        case Cluster::kSlowChain:
        case Cluster::kNodeWindows:
            break;
    }
    if (kind == Cluster::kPcieNodes) {
        // two nodes without NVLink (PCIe inside, as hpwnv-16): the devices' ingress sum is 2.6x the nodes' inter-node
        // sum, so the bound adds its mixed all-to-all term (bounds.cpp set_mixed; the other clusters here are above
        // its 8x or have one device per node, where the two drains coincide)
        CostModel m = topology_cost_model(D, TransBroadcast::kChain);
        m.cluster.nvlink_domain = 1;
        m.model.d_ffn = 4;  // an expert weighs eight tokens: a few replicas pay
        return m;
    }
    if (kind == Cluster::kSlowChain) {
        // the PCIe nodes with a chain collective so slow that one copy (1.5 FNEC, 0.75 BNEC) outlasts the non-expert
        // window: every forward copy goes beside the expert compute (hpwnv-16 with d_ffn 4096: 17.9 ms against 11.5)
        CostModel m = make_model(Cluster::kPcieNodes, D);
        m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = m.expert_bytes() / (1.5 * m.fnec_s());
        return m;
    }
    if (kind == Cluster::kNodeWindows) {
        // one device per node, experts of 2000 x 2 x 2 bytes (one copy over the NIC 1.31 ms, beside 10 us of latency)
        // and non-expert windows of 1.5 and 3 copies: FNEC holds one expert's copy across nodes, BNEC two, so the
        // other node receivers' copies cross beside the expert compute (docs/bounds.md "Whole experts")
        CostModel m = make_model(Cluster::kNodePerDevice, D);
        m.model.d_ffn = 2000;
        const double copy_s = m.expert_bytes() / m.cluster.node_nic_bytes_per_s;
        m.cluster.fnec_s = 1.5 * copy_s;
        m.cluster.bnec_s = 3.0 * copy_s;
        return m;
    }
    if (kind == Cluster::kNodePerDevice) {
        // every device its own node with one NIC, star broadcast, an expert weighs 16 tokens: a hot expert's copies
        // on the other nodes all leave its owner's NIC (the per-owner egress term)
        CostModel m = topology_cost_model(D, TransBroadcast::kStar);
        m.cluster.devices_per_node = m.cluster.nvlink_domain = 1;
        m.cluster.nics_per_node = 1;
        m.model.d_ffn = 8;
        return m;
    }
    if (kind == Cluster::kHeavyExperts) {
        // experts weigh about a layer's tokens: a copy on the other node costs what it saves there (node transfer term)
        CostModel m = topology_cost_model(D, TransBroadcast::kStar);
        m.model.d_ffn = 8;
        return m;
    }
    // the inter-node NICs are the bottleneck: the bound's node-level all-to-all term decides
    CostModel m = topology_cost_model(D, TransBroadcast::kStar);
    m.cluster.node_nic_bytes_per_s = m.cluster.inter_node_bytes_per_s = 1e9 / 8;
    m.model.d_ffn = 1;  // an expert weighs two tokens: replicas are cheap next to the all-to-all
    return m;
}

// The least time of each model over every placement (owners anywhere when all_owners, else the static homes) with
// at most `cap` replicas per device (0: none), and every routing rule: the exact optimum the bound must not exceed.
// sim: the Sim column of this layer alone under the best schedule (none = Eq 6, fastermoe = fastermoe_s, blockwise
// = 4 A2A + 3 FEC, with Trans and Agg whole in the first layer, where nothing runs beside them).
struct Optimum {
    double eq6 = INFINITY, eq8 = INFINITY, fastermoe = INFINITY, sim = INFINITY;
};

// Every placement (owners anywhere when all_owners, else the static homes) with at most `cap` replicas per device
// (0: none), under every routing rule: fn(cost breakdown).
template <class Fn>
void for_each_outcome(const CostModel& m, const std::vector<int64_t>& counts, int D, int E, int cap, bool all_owners,
                      Fn fn) {
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
                const LayerFlow flow = compute_flow(counts.data(), D, E, p, rule);
                if constexpr (std::is_invocable_v<Fn, const CostBreakdown&, const Placement&, const LayerFlow&>)
                    fn(predict_layer(m, flow, p), p, flow);
                else
                    fn(predict_layer(m, flow, p));
            }
        }
    }
}

Optimum enumerate_optimum(const CostModel& m, const std::vector<int64_t>& counts, int D, int E, int cap,
                          bool all_owners) {
    Optimum best;
    for_each_outcome(m, counts, D, E, cap, all_owners, [&](const CostBreakdown& c) {
        best.eq6 = std::min(best.eq6, c.eq6_s);
        best.eq8 = std::min(best.eq8, c.eq8_s);
        best.fastermoe = std::min(best.fastermoe, c.fastermoe_s);
        const double exposed = m.first_block ? c.trans_s + c.agg_s : 0.0;
        best.sim = std::min({best.sim, c.eq6_s, c.fastermoe_s, 4 * c.a2a_s + 3 * c.fec_s + exposed});
    });
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
    EXPECT_LE(b.sim_s, opt.sim * (1 + kRel));
    EXPECT_LE(b.eq6_l2l_s, b.eq6_s * (1 + kRel));
    EXPECT_GT(b.eq6_s, 0.0);
    // how loose the bound is here (--gtest_output=xml shows it; docs/bounds.md "Small instances")
    RecordProperty("optimum_over_bound_eq6", std::to_string(opt.eq6 / b.eq6_s));
    RecordProperty("optimum_over_bound_sim", std::to_string(opt.sim / b.sim_s));
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
    {"heavy_4x4", 4, 4, 0, 1, 4, Cluster::kHeavyExperts, 1.2, 16},
    {"heavy_4x2_last", 4, 2, 0, 3, 4, Cluster::kHeavyExperts, 2.0, 17},
    // one device per node (three and four nodes): each expert's node receivers all take their copy from its owner
    {"node_per_device_3x2", 3, 2, 0, 1, 4, Cluster::kNodePerDevice, 1.5, 18},
    {"node_per_device_3x3_first", 3, 3, 0, 0, 4, Cluster::kNodePerDevice, 1.0, 19},
    {"node_per_device_4x2", 4, 2, 0, 2, 4, Cluster::kNodePerDevice, 2.5, 20},
    {"node_per_device_4x4_cap1", 4, 4, 1, 1, 4, Cluster::kNodePerDevice, 1.2, 21},
    // PCIe nodes, where the bound computes its mixed all-to-all term; in the two cap1 rows it lifts the bound (Eq 8 and
    // Sim by 3.0% and 1.8%, Eq 6 by 0% and 0.8%), so there an over-eager mixed term meets the enumerated optimum
    {"pcie_4x2_middle", 4, 2, 0, 1, 4, Cluster::kPcieNodes, 1.5, 23},
    {"pcie_4x4_first", 4, 4, 0, 0, 4, Cluster::kPcieNodes, 2.0, 25},
    {"pcie_4x4_cap1_mixed", 4, 4, 1, 1, 4, Cluster::kPcieNodes, 0.5, 29},
    {"pcie_4x4_cap1_mixed_skewed", 4, 4, 1, 2, 4, Cluster::kPcieNodes, 1.5, 35},
    // the chain's copies outlast FNEC: no forward copy fits the non-expert window
    {"slow_chain_4x2_middle", 4, 2, 0, 1, 4, Cluster::kSlowChain, 1.5, 36},
    {"slow_chain_4x4_cap1", 4, 4, 1, 2, 4, Cluster::kSlowChain, 1.0, 37},
    // non-expert windows that hold one and two copies across nodes: the node receivers beyond them
    {"node_windows_2x4", 2, 4, 0, 1, 4, Cluster::kNodeWindows, 0.5, 38},
    {"node_windows_3x3_last", 3, 3, 0, 3, 4, Cluster::kNodeWindows, 1.0, 39},

};
INSTANTIATE_TEST_SUITE_P(Bounds, BoundVsEnumeration, ::testing::ValuesIn(kSmallCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Constructed cases whose optimum the bound reaches (docs/bounds.md "Tightness").
struct TightCase {
    const char* name;
    int D, E;
    std::vector<int64_t> counts;
    int model;                          // 6, 8 or 'F' (FasterMoE's system)
    double transfer_bytes_per_s = 1.0;  // Trans and Agg rate of the unit model (tiny: no replica pays)
    Cluster cluster = Cluster::kUnit;
    int layer = 1;  // of 3
};

double model_time(const LayerBound& b, int model) {
    return model == 6 ? b.eq6_s : model == 8 ? b.eq8_s : b.fastermoe_s;
}
double model_time(const Optimum& o, int model) { return model == 6 ? o.eq6 : model == 8 ? o.eq8 : o.fastermoe; }

class BoundTight : public ::testing::TestWithParam<TightCase> {
  protected:
    // the case's model and layer (the unit model: a middle layer): its exact optimum over every placement, and the
    // bound
    void solve(double* optimum, double* bound) const {
        const TightCase& c = GetParam();
        CostModel m = model_for_layer(make_model(c.cluster, c.D), c.layer);
        if (c.cluster == Cluster::kUnit)
            m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = c.transfer_bytes_per_s;
        *optimum = model_time(enumerate_optimum(m, c.counts, c.D, c.E, 0, true), c.model);
        *bound = model_time(layer_bound(m, c.counts.data(), c.D, c.E, BoundBudget{}, c.layer, 3), c.model);
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
    // one expert routed to by both devices, replicas far too dear: its owner keeps one device's tokens, the other's
    // 100 cross (an owner moved away from home frees its home row, so only the best row per expert is free)
    {"owner_anywhere_eq6", 2, 1, {100, 100}, 6, 1e-6},
    {"owner_anywhere_eq8", 2, 1, {100, 100}, 8, 1e-6},
    // every device routes one token to each expert: a copy of each everywhere removes the all-to-all, and each copy
    // (1.5 s) outlasts FNEC (1 s), so no expert fits the non-expert window and Trans (3 s) goes beside FEC (2 s):
    // 1 s exposed. Only "no expert fits" reaches that (the longest expert alone, 1.5 s, hides under FEC)
    {"no_copy_fits_fnec_eq8", 2, 2, {1, 1, 1, 1}, 8, 4.0 / 3.0},
    // one device per node, one expert every device routes 100 tokens to: the best placement holds it everywhere (no
    // all-to-all, compute at the mean) and its owner's one NIC sends both copies, Trans = Agg = 2 expert_bytes / NIC
    // + latency; only the per-owner egress term reaches that (the node term lets the three NICs share the copies)
    {"owner_egress_eq6_first", 3, 1, {100, 100, 100}, 6, 0, Cluster::kNodePerDevice, 0},
    {"owner_egress_eq6_middle", 3, 1, {100, 100, 100}, 6, 0, Cluster::kNodePerDevice, 1},
    {"owner_egress_eq8_middle", 3, 1, {100, 100, 100}, 8, 0, Cluster::kNodePerDevice, 1},
    // two one-device nodes, every device routes 343 tokens (FEC 1.2 copies with all of them everywhere) or 514
    // (1.8) to each of five experts: the optimum holds every expert on both devices (no all-to-all, compute at the
    // mean) with owners three and two; FNEC holds one expert's copy, the other four cross the two NICs beside FEC,
    // two copies each (BNEC holds two; the other three hide beside 2 FEC). Only the node receivers beyond the first
    // windows reach that: without them the bound was 9.4% and 3.7% lower
    {"node_receivers_beyond_fnec_eq8", 2, 5, std::vector<int64_t>(10, 343), 8, 0, Cluster::kNodeWindows, 1},
    {"node_receivers_beyond_fnec_eq8_long_fec", 2, 5, std::vector<int64_t>(10, 514), 8, 0, Cluster::kNodeWindows, 1},
};
INSTANTIATE_TEST_SUITE_P(Bounds, BoundTight, ::testing::ValuesIn(kTightCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A chain broadcast has no per-owner term, so only the uncapped node arrays exist: a fresh thread (empty per-thread
// arrays) bounding a four-node chain layer must read no other (this crashed while the no-replica piece read cap 0).
TEST(BoundThreads, ChainLayerOnAFreshThreadIsBounded) {
    CostModel m = model_for_layer(make_model(Cluster::kNodePerDevice, 4), 1);
    m.trans_broadcast = TransBroadcast::kChain;
    const std::vector<int64_t> counts = skewed_counts(4, 2, 40, 1.5, 22);
    double bound = 0;
    std::thread worker([&] { bound = layer_bound(m, counts.data(), 4, 2, BoundBudget{}, 1, 3).eq6_s; });
    worker.join();
    EXPECT_LE(bound, enumerate_optimum(m, counts, 4, 2, 0, true).eq6 * (1 + kRel));
    EXPECT_GT(bound, 0.0);
}

// One layer's outcome under the blockwise schedule: its own 4 A2A + 3 FEC, its FEC, and its Trans and Agg as the
// simulator's `time` split cuts them (sim::split_transfer: whole experts, each timed alone, first fit into FNEC or
// BNEC; the rest beside the previous layer's FEC or BEC).
struct BlockOutcome {
    double own = 0, fec = 0, trans = 0, agg = 0;
    sim::TransferSplit trans_split, agg_split;
    // exposed beyond a previous layer of FEC prev_fec (layer l >= 1)
    double exposed(const CostModel& m, double prev_fec) const {
        return std::max(0.0, trans_split.under_expert_s - prev_fec) +
               std::max(0.0, trans_split.under_nec_s - m.fnec_s()) +
               std::max(0.0, agg_split.under_expert_s - 2 * prev_fec) +
               std::max(0.0, agg_split.under_nec_s - m.bnec_s());
    }
};

// The Sim column over a whole iteration: the least sum over layers of the simulator's MoE time under any
// schedule, every layer's placement and routing free. none pays Eq 6 and fastermoe fastermoe_s per layer; under
// blockwise a layer pays 4 A2A + 3 FEC, Trans(0) and Agg(0) whole, and for l >= 1 what of Trans(l) and Agg(l) the
// previous layer's FEC + FNEC and BEC + BNEC cannot hide, part by part as the time split cuts them (the schedule
// leaves nothing else beside them: docs/bounds.md).
double sim_optimum(const CostModel& cost, const std::vector<std::vector<int64_t>>& layers, int D, int E) {
    const int L = static_cast<int>(layers.size());
    double none = 0, fastermoe = 0;
    std::vector<double> best_before, fec_before;  // blockwise: least sum up to layer l-1 by its outcome, its FEC
    for (int l = 0; l < L; ++l) {
        CostModel m = model_for_layer(cost, l);
        m.trans_receivers = TransReceivers::kReplicaHolders;  // the simulator moves the replica holders' copies only
        std::vector<BlockOutcome> outcomes;
        double least6 = INFINITY, least_f = INFINITY;
        for_each_outcome(m, layers[l], D, E, 0, D * E <= 4,
                         [&](const CostBreakdown& c, const Placement& p, const LayerFlow& flow) {
                             least6 = std::min(least6, c.eq6_s);
                             least_f = std::min(least_f, c.fastermoe_s);
                             BlockOutcome o{4 * c.a2a_s + 3 * c.fec_s, c.fec_s, c.trans_s, c.agg_s, {}, {}};
                             o.trans_split = sim::split_transfer(m, flow, p, sim::SplitRule::kTime, m.fnec_s(), false);
                             o.agg_split = sim::split_transfer(m, flow, p, sim::SplitRule::kTime, m.bnec_s(), true);
                             outcomes.push_back(std::move(o));
                         });
        std::vector<double> best(outcomes.size(), INFINITY), fec(outcomes.size());
        for (size_t p = 0; p < outcomes.size(); ++p) {
            const BlockOutcome& o = outcomes[p];
            fec[p] = o.fec;
            if (l == 0) best[p] = o.own + o.trans + o.agg;
            for (size_t q = 0; l > 0 && q < best_before.size(); ++q)
                best[p] = std::min(best[p], best_before[q] + o.own + o.exposed(m, fec_before[q]));
        }
        none += least6;
        fastermoe += least_f;
        best_before = std::move(best);
        fec_before = std::move(fec);
    }
    return std::min({none, fastermoe, *std::min_element(best_before.begin(), best_before.end())});
}

struct SimCase {
    const char* name;
    int D, E;
    std::vector<std::vector<int64_t>> layers;  // [L][D*E]
    Cluster cluster;
    double transfer_bytes_per_s;  // 0: the cluster's
    bool tight;                   // the bound equals the optimum
};

class SimBound : public ::testing::TestWithParam<SimCase> {
  protected:
    // the least Sim sum and trace_bounds' (one iteration)
    // transfers_may_hide: the bound as the sweeps compute it (BoundBudget::sim_transfers_may_hide)
    void solve(double* optimum, double* bound, bool transfers_may_hide = false) const {
        const SimCase& c = GetParam();
        CostModel m = make_model(c.cluster, c.D);
        if (c.transfer_bytes_per_s > 0)
            m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = c.transfer_bytes_per_s;
        std::vector<int64_t> flat;
        for (const auto& layer : c.layers) flat.insert(flat.end(), layer.begin(), layer.end());
        TraceView view;
        view.counts = flat.data();
        view.num_iterations = 1;
        view.num_layers = static_cast<int>(c.layers.size());
        view.num_devices = c.D;
        view.num_experts = c.E;
        BoundBudget budget;
        budget.sim_transfers_may_hide = transfers_may_hide;
        const TraceBounds b = trace_bounds(view, m, budget);
        *bound = 0;
        for (const LayerBound& layer : b.layers) *bound += layer.sim_s;
        if (transfers_may_hide)  // any transfer may hide: the optimum is at least that of free transfers
            m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = 1e30;
        *optimum = sim_optimum(m, c.layers, c.D, c.E);
    }
};

// No schedule, placement sequence or routing beats the sum of the Sim pieces.
TEST_P(SimBound, NoScheduleBeatsTheBound) {
    double optimum = 0, bound = 0;
    solve(&optimum, &bound);
    EXPECT_LE(bound, optimum * (1 + kRel));
    EXPECT_GT(bound, 0.0);
}

// The sweeps' bound (compute beside the MoE ops may hide any transfer) is below the optimum with free transfers.
TEST_P(SimBound, HideableTransfersBoundIsBelowTheFreeTransferOptimum) {
    double optimum = 0, bound = 0;
    solve(&optimum, &bound, /*transfers_may_hide=*/true);
    EXPECT_LE(bound, optimum * (1 + kRel));
    EXPECT_GT(bound, 0.0);
}

// Where the optimum is known to be reached, the bound equals it, and 1% more would exceed it.
TEST_P(SimBound, TightCaseIsReached) {
    if (!GetParam().tight) GTEST_SKIP() << "not a constructed tight case";
    double optimum = 0, bound = 0;
    solve(&optimum, &bound);
    EXPECT_NEAR(bound, optimum, 1e-9 * optimum);
    EXPECT_GT(bound * 1.01, optimum);
}

// The simulator itself (sim::simulate, the Sim column's engine) on every sequence of replica sets (static owners),
// under every schedule and routing rule: its least MoE time is never below the bound's sum. Independent of
// sim_optimum's formulas: it caught the Sim pieces counting each expert's sender on the flat model (the paper's
// Eq 4 count), which the simulator does not move (local_then_replica_exposed: bound 680 against a simulated 640).
TEST_P(SimBound, SimulatorNeverBeatsTheBound) {
    const SimCase& c = GetParam();
    const int L = static_cast<int>(c.layers.size()), slots = c.E * (c.D - 1);
    if (c.E * (c.D - 1) * L > 9) GTEST_SKIP() << "every sequence of replica sets only up to 2^9";
    double optimum = 0, bound = 0;
    solve(&optimum, &bound);
    CostModel m = make_model(c.cluster, c.D);
    if (c.transfer_bytes_per_s > 0) m.cluster.trans_bytes_per_s = m.cluster.agg_bytes_per_s = c.transfer_bytes_per_s;
    std::vector<int64_t> flat;
    for (const auto& layer : c.layers) flat.insert(flat.end(), layer.begin(), layer.end());
    TraceView view{flat.data(), nullptr, 1, L, c.D, c.E};
    const Placement probe = Placement::make_owners(c.D, std::vector<int>(c.E, 0));
    std::vector<int> homes(c.E);
    for (int e = 0; e < c.E; ++e) homes[e] = probe.home(e);
    double least = INFINITY;
    for (int seq = 0; seq < 1 << (slots * L); ++seq) {
        std::vector<Placement> placements;
        for (int l = 0; l < L; ++l) {
            Placement p = Placement::make_owners(c.D, homes);
            for (int bit = 0, slot = 0; bit < c.E * c.D; ++bit)
                if (bit % c.D != homes[bit / c.D] && (seq >> (l * slots + slot++) & 1))
                    p.add_replica(bit / c.D, bit % c.D);
            placements.push_back(p);
        }
        for (sim::ScheduleKind schedule :
             {sim::ScheduleKind::kNone, sim::ScheduleKind::kBlockwise, sim::ScheduleKind::kFasterMoE})
            for (RouteRule rule : {RouteRule::kOwner, RouteRule::kLeastLoaded, RouteRule::kEvenSplit}) {
                sim::SimOptions o;
                o.schedule = schedule;
                o.route_rule = rule;
                o.record_timeline = false;
                const sim::SimResult r = sim::simulate(view, {placements}, m, o);
                double moe = 0;
                for (const sim::BlockResult& b : r.iterations[0].blocks) moe += b.moe_s;
                least = std::min(least, moe);
            }
    }
    RecordProperty("simulated_over_bound", std::to_string(least / bound));
    RecordProperty("bound", std::to_string(bound));
    EXPECT_LE(bound, least * (1 + kRel)) << c.name;
}

const SimCase kSimCases[] = {
    // layer 0 keeps every token local; layer 1 routes all to expert 0: its replica's Trans hides under layer 0's FEC
    // only in part (blockwise), the rest is exposed, and that beats both no replica and the other schedules
    {"local_then_replica_exposed", 2, 2, {{100, 0, 0, 100}, {100, 0, 100, 0}}, Cluster::kUnit, 0.005, true},
    // the same with a free transfer: everything hides
    {"local_then_replica_hidden", 2, 2, {{100, 0, 0, 100}, {100, 0, 100, 0}}, Cluster::kUnit, 1.0, true},
    {"unit_three_layers", 2, 2, {{60, 10, 30, 40}, {90, 5, 70, 0}, {20, 50, 10, 80}}, Cluster::kUnit, 0.05, false},
    {"unit_2x1", 2, 1, {{100, 100}, {40, 160}, {10, 90}}, Cluster::kUnit, 0.02, false},
    {"paper_three_layers",
     2,
     2,
     {{600, 100, 300, 400}, {900, 50, 700, 10}, {200, 500, 100, 800}},
     Cluster::kPaper,
     0,
     false},
    {"star_two_layers", 2, 2, {{300, 20, 250, 40}, {50, 400, 10, 300}}, Cluster::kStar, 0, false},
    {"heavy_4x1", 4, 1, {{100, 0, 100, 0}, {50, 50, 50, 50}}, Cluster::kHeavyExperts, 0, false},
    {"node_per_device_3x1", 3, 1, {{100, 100, 100}, {20, 150, 100}}, Cluster::kNodePerDevice, 0, false},
    // one schedule runs every layer: the optimum (810, 840) is the least of three whole-iteration sums, and a bound
    // that let each layer take its own least schedule (each piece capped by its layer's Eq 6 and fastermoe_s bounds)
    // stayed below it (758.9, 805)
    {"one_schedule_2x1", 2, 1, {{70, 70}, {20, 20}}, Cluster::kUnit, 0.005, true},
    {"one_schedule_2x2", 2, 2, {{30, 80, 30, 30}, {30, 100, 100, 30}}, Cluster::kUnit, 0.02, true},
    // layer 1 routes one token to each expert from each device; a copy of each everywhere pays 2 s each (beyond
    // FNEC, 1 s), so all 4 s of Trans go beside layer 0's FEC (1 s)
    {"no_copy_fits_fnec", 2, 2, {{1, 0, 0, 1}, {1, 1, 1, 1}}, Cluster::kUnit, 0.5, true},
    // layer 1 routes 343 tokens to each of five experts from both one-device nodes: FNEC holds one expert's copy
    // across nodes, the others cross beside layer 0's FEC
    {"node_receivers_beyond_fnec",
     2,
     5,
     {{343, 343, 0, 0, 0, 0, 0, 343, 343, 343}, std::vector<int64_t>(10, 343)},
     Cluster::kNodeWindows,
     0,
     false},
};
INSTANTIATE_TEST_SUITE_P(Bounds, SimBound, ::testing::ValuesIn(kSimCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
