// The layer-to-layer token path (MoETuner's dispatch, balance/token_path.h): hand-checked bytes and times on a
// 2-device case (ILP 1 alone against ILP 2), and ILP 2 against ILP 2 blind to the traffic and against memory-balanced
// random cluster placements on a generated trace with layer affinity, in and out of sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "balance/evaluate.h"
#include "balance/policies.h"
#include "balance/token_path.h"
#include "balance_fixtures.h"
#include "core/error.h"
#include "core/rng.h"
#include "trace/trace.h"

namespace prophet {
namespace {

using testing::unit_cost_model;

// L = 2 layers, D = 2 devices, E = 2 experts, top-1, 8 tokens: every device sends 2 tokens to each expert at both
// layers; every token of expert 0 at layer 0 goes to expert 1 at layer 1 and vice versa (full affinity).
struct TwoByTwo {
    std::vector<int64_t> counts = {2, 2, 2, 2,    // layer 0: [device][expert]
                                   2, 2, 2, 2};   // layer 1
    std::vector<int64_t> transitions = {0, 4,     // R[e0][e0], R[e0][e1]
                                        4, 0};    // R[e1][e0], R[e1][e1]
    // ILP 1 alone (clusters on GPUs in index order, as static EP): expert e on device e at both layers
    std::vector<Placement> aligned_by_index = {Placement::make_owners(2, {0, 1}), Placement::make_owners(2, {0, 1})};
    // what ILP 2 should pick: layer 1's experts swapped, so every token's layer-1 expert is where it already is
    std::vector<Placement> aligned_by_traffic = {Placement::make_owners(2, {0, 1}), Placement::make_owners(2, {1, 0})};
};

double total_moved(const TokenPathFlow& f) {
    double moved = moved_tokens(f.returned.data(), f.num_devices);
    for (int l = 0; l < f.num_layers; ++l) moved += moved_tokens(f.into(l), f.num_devices);
    return moved;
}

TEST(TokenPath, HandCheckedTwoDevices) {
    const TwoByTwo c;
    const CostModel cost = unit_cost_model(2);  // 1 byte per token, 1 byte/s: an all-to-all = max tokens received
    // ILP 1 alone: layer 0 dispatch moves 2 + 2 (max 2 received), the boundary 4 + 4 (every token changes device),
    // the return home 2 + 2
    const TokenPathFlow by_index = layer_to_layer_flow(c.counts.data(), c.transitions.data(), c.aligned_by_index,
                                                       RouteRule::kOwner);
    EXPECT_DOUBLE_EQ(by_index.into(1)[0 * 2 + 1], 4.0);
    EXPECT_DOUBLE_EQ(by_index.into(1)[1 * 2 + 0], 4.0);
    EXPECT_DOUBLE_EQ(total_moved(by_index), 16.0);
    const std::vector<TokenPathLayer> t_index = token_path_layers(cost, by_index);
    EXPECT_DOUBLE_EQ(t_index[0].in_s, 2.0);
    EXPECT_DOUBLE_EQ(t_index[1].in_s, 4.0);
    EXPECT_DOUBLE_EQ(t_index[1].out_s, 2.0);
    EXPECT_DOUBLE_EQ(t_index[1].in_bytes, 8.0);
    // ILP 2's alignment: nothing crosses the boundary, the return home is still 2 + 2
    const TokenPathFlow by_traffic = layer_to_layer_flow(c.counts.data(), c.transitions.data(), c.aligned_by_traffic,
                                                         RouteRule::kOwner);
    EXPECT_DOUBLE_EQ(by_traffic.into(1)[0 * 2 + 0], 4.0);  // stays on device 0
    EXPECT_DOUBLE_EQ(total_moved(by_traffic), 8.0);
    const std::vector<TokenPathLayer> t_traffic = token_path_layers(cost, by_traffic);
    EXPECT_DOUBLE_EQ(t_traffic[1].in_s, 0.0);  // no transfer, no latency
    EXPECT_DOUBLE_EQ(t_traffic[1].in_bytes, 0.0);
    EXPECT_DOUBLE_EQ(t_traffic[1].out_s, 2.0);

    // on the home path both placements move the same 16 tokens (4 per direction per layer): ILP 2 is invisible
    for (const auto* placements : {&c.aligned_by_index, &c.aligned_by_traffic})
        for (int l = 0; l < 2; ++l) {
            const LayerFlow flow = compute_flow(c.counts.data() + l * 4, 2, 2, (*placements)[l], RouteRule::kOwner);
            const CostBreakdown home = predict_layer(cost, flow, (*placements)[l]);
            EXPECT_DOUBLE_EQ(home.a2a_bytes, 4.0);
            EXPECT_DOUBLE_EQ(home.a2a_s, 2.0);
        }
}

TEST(TokenPath, ApplyReplacesTheAllToAllTerms) {
    const TwoByTwo c;
    const CostModel cost = unit_cost_model(2);
    // layer 1 of the aligned placement (owners only: no Trans or Agg per iteration)
    const LayerFlow flow = compute_flow(c.counts.data() + 4, 2, 2, c.aligned_by_index[1], RouteRule::kOwner);
    CostBreakdown b = predict_layer(cost, flow, c.aligned_by_index[1]);
    const double eq6_home = b.eq6_s, eq8_home = b.eq8_s, fm_home = b.fastermoe_s;
    ASSERT_DOUBLE_EQ(b.a2a_s, 2.0);
    apply_token_path(b, TokenPathLayer{0.0, 2.0, 0.0, 4.0});  // as layer 1 of the aligned placement
    EXPECT_DOUBLE_EQ(b.a2a_s, 1.0);
    EXPECT_DOUBLE_EQ(b.a2a_bytes, 2.0);
    EXPECT_DOUBLE_EQ(b.eq6_s, eq6_home - 4.0);  // 4 T_A2A: 8 s on the home path, 2 (0 + 2) = 4 s now
    EXPECT_DOUBLE_EQ(b.eq8_s, eq8_home - 4.0);
    // FasterMoE: no replicas, so no transfer to hide: only the all-to-all terms change
    EXPECT_DOUBLE_EQ(b.fastermoe_s, fm_home - 4.0);
}

TEST(TokenPath, MoetunerIlp2FindsTheAlignment) {
    const TwoByTwo c;
    const CostModel cost = unit_cost_model(2);
    const std::vector<double> loads = {4, 4, 4, 4};
    const std::vector<double> transitions(c.transitions.begin(), c.transitions.end());
    const std::vector<double> link = {0, 1, 1, 0};
    const std::vector<Placement> planned = plan_moetuner(loads, transitions, 2, 2, 2, link, BalanceOptions());
    const TokenPathFlow f = layer_to_layer_flow(c.counts.data(), c.transitions.data(), planned, RouteRule::kOwner);
    EXPECT_DOUBLE_EQ(moved_tokens(f.into(1), 2), 0.0);
}

TEST(TokenPath, EvaluateScoresEachPolicyOnItsPath) {
    const TwoByTwo c;
    const CostModel cost = unit_cost_model(2);
    TraceView view;
    view.counts = c.counts.data();
    view.transitions = c.transitions.data();
    view.num_iterations = 1;
    view.num_layers = 2;
    view.num_devices = 2;
    view.num_experts = 2;
    EvalSettings s;
    s.plan_repeats = 1;
    s.options.token_path_auto = true;  // moetuner: layer_to_layer, static: home
    const PolicyScore moetuner = evaluate_policy("moetuner", view, cost, s, false);
    const PolicyScore fixed = evaluate_policy("static", view, cost, s, false);
    EXPECT_EQ(moetuner.token_path, "layer_to_layer");
    EXPECT_EQ(fixed.token_path, "home");
    // per layer, one direction: (4 + 0) / 2 and (0 + 4) / 2 tokens moved, against 4 and 4 on the home path
    EXPECT_DOUBLE_EQ(moetuner.mean_a2a_bytes, 2.0);
    EXPECT_DOUBLE_EQ(fixed.mean_a2a_bytes, 4.0);
    // the same placement on the home path: 4 T_A2A per layer falls from 4 * 2 s to 2 * (2 + 0) s and 2 * (0 + 2) s
    s.options.token_path_auto = false;
    s.options.token_path = TokenPath::kHome;
    const PolicyScore moetuner_home = evaluate_policy("moetuner", view, cost, s, false);
    EXPECT_EQ(moetuner_home.token_path, "home");
    EXPECT_DOUBLE_EQ(moetuner_home.mean_a2a_bytes, 4.0);
    EXPECT_DOUBLE_EQ(moetuner_home.mean_eq6_ms - moetuner.mean_eq6_ms, 4.0e3);
    // static on the layer-to-layer path: its index alignment sends all 8 tokens across the boundary
    s.options.token_path = TokenPath::kLayerToLayer;
    const PolicyScore fixed_l2l = evaluate_policy("static", view, cost, s, false);
    EXPECT_DOUBLE_EQ(fixed_l2l.mean_a2a_bytes, (4.0 + 8.0 + 4.0) / 4.0);
    // a forced layer_to_layer needs transitions
    view.transitions = nullptr;
    EXPECT_THROW(evaluate_policy("static", view, cost, s, false), prophet::Error);
}

// A trace with layer-to-layer affinity (the generator's layer_affinity) on 4 devices.
Trace affinity_trace() {
    return generate_trace_from_toml_string(R"([trace]
generator = "zipf"
affinity_mapping = "random"
num_experts = 8
num_devices = 4
top_k = 1
tokens_per_iteration = 4096
num_iterations = 8
num_layers = 6
layer_affinity = 0.9
zipf_s = 0.8
seed = 7
d_model = 1024
d_ffn = 2048
seq_len = 256
)",
                                           "affinity.toml");
}

struct PathTotals {
    double bytes = 0, seconds = 0;  // forward moved bytes and forward all-to-all time, summed over iterations
};

PathTotals path_totals(const Trace& t, const std::vector<Placement>& placements, int first, int last,
                       const CostModel& cost) {
    PathTotals out;
    for (int it = first; it < last; ++it) {
        const TokenPathFlow f =
            layer_to_layer_flow(t.layer_counts(it, 0), t.layer_transitions(it, 0), placements, RouteRule::kOwner);
        for (const TokenPathLayer& l : token_path_layers(cost, f)) {
            out.bytes += l.in_bytes + l.out_bytes;
            out.seconds += l.in_s + l.out_s;
        }
    }
    return out;
}

// Seen (plan on iterations 0-3; forward bytes and all-to-all time summed over 4 iterations): ILP 2 2.07e8 B /
// 6.0 ms in sample and 2.08e8 B / 6.1 ms out of sample (iterations 4-7); ILP 2 blind to the traffic (memory balance
// only) 2.49e8 B / 7.7 ms and 2.50e8 B / 7.7 ms; memory-balanced random placements 3.67e8 B / 9.2 ms and 9.3 ms.
// ILP 1 alone with cluster c on GPU c is no baseline here: it breaks Eq 13 (ILP 2 must move clusters for memory).
TEST(TokenPath, Ilp2BeatsMemoryBalancedRandomPlacementsOnAnySample) {
    const Trace t = affinity_trace();
    const int L = t.meta.num_layers, D = t.meta.num_devices, E = t.meta.num_experts;
    const int profiled = 4;  // plan on iterations 0-3; 4-7 are out of sample
    std::vector<double> loads(static_cast<size_t>(L) * E, 0.0), transitions(static_cast<size_t>(L - 1) * E * E, 0.0);
    for (int it = 0; it < profiled; ++it) {
        for (int l = 0; l < L; ++l) {
            const std::vector<int64_t> x = expert_loads(t, it, l);
            for (int e = 0; e < E; ++e) loads[static_cast<size_t>(l) * E + e] += static_cast<double>(x[e]);
        }
        for (size_t k = 0; k < transitions.size(); ++k)
            transitions[k] += static_cast<double>(t.transitions[static_cast<size_t>(it) * transitions.size() + k]);
    }
    CostModel cost = testing::paper_cost_model(D, 1024);
    std::vector<double> link(static_cast<size_t>(D) * D, 0.0);
    for (int a = 0; a < D; ++a)
        for (int b = 0; b < D; ++b)
            if (a != b) link[static_cast<size_t>(a) * D + b] = 1.0 / cost.cluster.link_bytes_per_s(a, b);
    BalanceOptions o;
    o.ilp_time_limit_s = 2;  // ILP 2 starts from its heuristic incumbent; CBC only improves on it
    const std::vector<Placement> ilp2 = plan_moetuner(loads, transitions, L, D, E, link, o);
    BalanceOptions memory_only = o;  // balance.ilp2_traffic = false: ILP 2 balances memory and ignores the traffic
    memory_only.ilp2_traffic = false;
    const std::vector<Placement> ilp2_blind = plan_moetuner(loads, transitions, L, D, E, link, memory_only);
    // ILP 1 alone: the same clusters, cluster c on GPU c; random: the same clusters on a random GPU per layer
    std::vector<std::vector<int>> clusters(L);
    for (int l = 0; l < L; ++l)
        clusters[l] = moetuner_ilp1_layer(loads.data() + static_cast<size_t>(l) * E, E, D, o).cluster;
    auto place = [&](const std::vector<std::vector<int>>& gpu_of_cluster) {
        std::vector<Placement> p;
        for (int l = 0; l < L; ++l) {
            std::vector<int> owner(E);
            for (int e = 0; e < E; ++e) owner[e] = gpu_of_cluster[l][clusters[l][e]];
            p.push_back(Placement::make_owners(D, owner));
        }
        return p;
    };
    std::vector<std::vector<int>> identity(L, std::vector<int>(D));
    for (auto& g : identity) std::iota(g.begin(), g.end(), 0);
    const std::vector<Placement> ilp1_only = place(identity);
    // ILP 2 kept ILP 1's load balance: the same per-device computed tokens up to relabelling the GPUs
    for (int l = 0; l < L; ++l) {
        std::vector<int64_t> a = compute_flow(t.layer_counts(0, l), D, E, ilp2[l], RouteRule::kOwner).computed;
        std::vector<int64_t> b = compute_flow(t.layer_counts(0, l), D, E, ilp1_only[l], RouteRule::kOwner).computed;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << "layer " << l;
    }
    // random cluster placements that keep Eq 13 (every GPU holds E*L/D experts over all layers, as ILP 2's
    // answer does): ILP 1 alone plus any memory-balanced assignment
    std::vector<int> ilp2_memory(D, 0);
    for (const Placement& p : ilp2)
        for (int g = 0; g < D; ++g) ilp2_memory[g] += p.experts_per_device()[g];
    for (int g = 0; g < D; ++g) EXPECT_EQ(ilp2_memory[g], E * L / D) << "GPU " << g;
    std::vector<int> blind_memory(D, 0);
    for (const Placement& p : ilp2_blind)
        for (int g = 0; g < D; ++g) blind_memory[g] += p.experts_per_device()[g];
    EXPECT_EQ(blind_memory, ilp2_memory);
    Rng rng(11);
    std::vector<std::vector<Placement>> randoms;
    for (int tries = 0; tries < 100000 && randoms.size() < 8; ++tries) {
        std::vector<std::vector<int>> gpu = identity;
        for (auto& g : gpu) rng.shuffle(g.data(), D);
        std::vector<Placement> p = place(gpu);
        std::vector<int> memory(D, 0);
        for (const Placement& layer : p)
            for (int g = 0; g < D; ++g) memory[g] += layer.experts_per_device()[g];
        if (memory == ilp2_memory) randoms.push_back(std::move(p));
    }
    ASSERT_EQ(randoms.size(), 8u);
    for (const auto& [first, last] : {std::pair{0, profiled}, std::pair{profiled, t.meta.num_iterations}}) {
        const PathTotals with_ilp2 = path_totals(t, ilp2, first, last, cost);
        PathTotals random;
        for (const std::vector<Placement>& p : randoms) {
            const PathTotals r = path_totals(t, p, first, last, cost);
            random.bytes += r.bytes / randoms.size();
            random.seconds += r.seconds / randoms.size();
        }
        EXPECT_LT(with_ilp2.bytes, 0.9 * random.bytes) << "iterations " << first << "-" << last;
        EXPECT_LT(with_ilp2.seconds, 0.95 * random.seconds) << "iterations " << first << "-" << last;
        const PathTotals blind = path_totals(t, ilp2_blind, first, last, cost);
        EXPECT_LT(with_ilp2.bytes, 0.9 * blind.bytes) << "iterations " << first << "-" << last;
        EXPECT_LT(with_ilp2.seconds, blind.seconds) << "iterations " << first << "-" << last;
        std::printf("iterations %d-%d: ILP 2 %.4g B %.4g s; memory only %.4g B %.4g s; random %.4g B %.4g s\n", first,
                    last, with_ilp2.bytes, with_ilp2.seconds, blind.bytes, blind.seconds, random.bytes, random.seconds);
    }
}

}  // namespace
}  // namespace prophet
