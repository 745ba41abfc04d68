// moe_checks.h: the expert-parallel checks, written once against the Communicator interface so the same body runs
// on LocalGroup threads (test_moe_local.cpp: 1, 2, 4 ranks) and on MPI ranks (test_moe_mpi.cpp, ctest moe_mpi_4:
// mpirun -np 4 test_moe --gtest_filter=Mpi*).
//
// Every rank generates the whole global problem from a seed (all ranks' tokens, routing and gate weights), so it
// can compute any other rank's input and the exact expectation without communication.
//   check_exact_movement: tagged rows (src*1000 + token in every channel), identity experts, dyadic gate weights:
//     every row must land on the rank the routing rule's split names (under flow: the split the executor used,
//     checked to be optimal; rule_split), expected_inputs: a group's i-th assignment in (token, k) order goes to
//     the holder whose part covers i, parts in ascending device order;
//     combine(dispatch(h)) = h * sum_k w_k exactly, Trans copies home's parameters bit for bit into the group, Agg
//     sums integer gradients exactly into home.
//   check_oracle: real experts; out, dh, dgate_w and home expert gradients equal LocalMoeExecutor's on the
//     concatenated global batch within kOracleRtol. staged: the experts run on an arena apart from the executor's
//     storage (StagedExpertCompute, the GPU's host staging on the CPU) and that arena is what is checked;
//     mode: the same under the block-wise schedule (Trans/Agg split, and the staging, on the communication thread)
//     or FasterMoE's (Trans/Agg whole on the communication thread beside an all-to-all each).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "balance/flow_routing.h"
#include "balance/placement.h"
#include "balance/route_split.h"
#include "comm/comm.h"
#include "core/rng.h"
#include "model/moe_executor.h"
#include "moe/ep_executor.h"
#include "moe/trans_agg.h"
#include "staged_compute.h"

namespace prophet::moe_test {

// NOTE: tolerance of the oracle comparison, max |a - b| <= kOracleRtol * max |b| per tensor. out and dgate_w use
// the same arithmetic as the oracle, but an expert's GEMM runs on a different block of rows per rank (OpenBLAS
// may block M differently) and its weight gradient is a sum of per-rank partial GEMMs added in rank order instead
// of one GEMM over all rows: float rounding (eps 6e-8) over sums of at most a few hundred terms stays below 1e-5.
constexpr double kOracleRtol = 1e-5;

enum class PlacementCase { kStatic, kReplicated, kMovedOwners, kMovedOwnersReplicated };

inline const char* case_name(PlacementCase pc) {
    switch (pc) {
        case PlacementCase::kStatic: return "static";
        case PlacementCase::kReplicated: return "replicated";
        case PlacementCase::kMovedOwners: return "moved_owners";
        case PlacementCase::kMovedOwnersReplicated: return "moved_owners_replicated";
    }
    return "?";
}

// Deterministic in (pc, D, E, seed), so every rank's provider returns the same placement.
//   kReplicated: static owners; every expert replicated to one random non-owner plus each other rank w.p. 1/2.
//   kMovedOwners: every owner moved off its home rank (D > 1), no replicas.
//   kMovedOwnersReplicated: moved owners plus replicas as kReplicated (a replica may sit on the home rank).
inline Placement make_case_placement(PlacementCase pc, int D, int E, uint64_t seed) {
    Rng rng(seed * 6364136223846793005ull + 1442695040888963407ull);
    Placement p = Placement::make_static(D, E);
    if (pc == PlacementCase::kStatic || D == 1) return p;
    if (pc == PlacementCase::kMovedOwners || pc == PlacementCase::kMovedOwnersReplicated) {
        std::vector<int> owner(E);
        for (int e = 0; e < E; e++) owner[e] = (moe_home_rank(e, E, D) + 1 + (int)rng.below(D - 1)) % D;
        p = Placement::make_owners(D, owner);
    }
    if (pc == PlacementCase::kReplicated || pc == PlacementCase::kMovedOwnersReplicated) {
        for (int e = 0; e < E; e++) {
            const int first = (p.owner[e] + 1 + (int)rng.below(D - 1)) % D;
            p.add_replica(e, first);
            for (int d = 0; d < D; d++)
                if (d != p.owner[e] && rng.below(2)) p.add_replica(e, d);
        }
    }
    return p;
}

// One MoE layer's global batch. Rank r has N[r] tokens.
struct LayerProblem {
    int D = 0, E = 0, K = 0, C = 0;
    std::vector<int> N;                       // [D]
    std::vector<std::vector<float>> h;        // [D][N_r*C]
    std::vector<std::vector<int>> idx;        // [D][N_r*K] top-K distinct experts, -1 = dropped
    std::vector<std::vector<float>> gate_w;   // [D][N_r*K]
    std::vector<std::vector<float>> dout;     // [D][N_r*C]

    std::vector<int64_t> counts() const {     // [D*E] kept assignments per (rank, expert)
        std::vector<int64_t> c((size_t)D * E, 0);
        for (int r = 0; r < D; r++)
            for (int e : idx[r])
                if (e >= 0) c[(size_t)r * E + e]++;
        return c;
    }
    // the global batch, ranks concatenated in rank order
    template <typename T>
    static std::vector<T> concat(const std::vector<std::vector<T>>& parts) {
        std::vector<T> all;
        for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
        return all;
    }
};

// exact: h = src*1000 + token in every channel, gate weights in {0.25, 0.5, 0.75, 1}, dout integers in [-2, 2]
// (all sums the checks form are exact in float). Otherwise normal h and dout, softmax-like positive gate weights.
// Routing is skewed (expert e drawn with weight 1/(e+1)) and each assignment is dropped with probability 1/10.
inline LayerProblem make_layer_problem(uint64_t seed, int D, int E, int K, int C, int N_base, bool exact) {
    Rng rng(seed);
    LayerProblem p;
    p.D = D;
    p.E = E;
    p.K = K;
    p.C = C;
    for (int r = 0; r < D; r++) {
        const int N = N_base + (int)rng.below(N_base / 2 + 1);
        p.N.push_back(N);
        std::vector<float> h((size_t)N * C), dout((size_t)N * C), gate_w((size_t)N * K);
        std::vector<int> idx((size_t)N * K);
        for (int n = 0; n < N; n++) {
            for (int c = 0; c < C; c++) {
                h[(size_t)n * C + c] = exact ? float(r * 1000 + n) : float(rng.normal());
                dout[(size_t)n * C + c] = exact ? float((int)rng.below(5) - 2) : float(rng.normal());
            }
            std::vector<char> taken(E, 0);
            for (int k = 0; k < K; k++) {
                double total = 0;
                for (int e = 0; e < E; e++) total += taken[e] ? 0.0 : 1.0 / (e + 1);
                double u = rng.uniform() * total;
                int pick = -1;
                for (int e = 0; e < E; e++) {
                    if (taken[e]) continue;
                    pick = e;
                    u -= 1.0 / (e + 1);
                    if (u < 0) break;
                }
                taken[pick] = 1;
                idx[(size_t)n * K + k] = rng.below(10) == 0 ? -1 : pick;
                gate_w[(size_t)n * K + k] = exact ? 0.25f * float(1 + rng.below(4)) : float(0.1 + rng.uniform());
            }
        }
        p.h.push_back(std::move(h));
        p.idx.push_back(std::move(idx));
        p.gate_w.push_back(std::move(gate_w));
        p.dout.push_back(std::move(dout));
    }
    return p;
}

// expert (l, e)'s parameters: w1 [C,F] then w2 [F,C]. exact: small integers; otherwise normal * 0.2
inline std::vector<float> expert_params(uint64_t seed, int l, int e, int C, int F, bool exact) {
    Rng rng(seed * 1000003ull + (uint64_t)l * 1009 + (uint64_t)e + 17);
    std::vector<float> w(2 * (size_t)C * F);
    for (auto& v : w) v = exact ? float((int)rng.below(17) - 8) : float(0.2 * rng.normal());
    return w;
}

// Normwise comparison: max |a - b| <= rtol * max |b| + atol (and no NaN).
inline void expect_close(const std::string& what, const float* a, const float* b, size_t n, double rtol,
                         double atol = 0.0) {
    double max_ref = 0, max_err = 0;
    size_t worst = 0;
    bool nan = false;
    for (size_t i = 0; i < n; i++) {
        max_ref = std::max(max_ref, std::fabs((double)b[i]));
        const double err = std::fabs((double)a[i] - (double)b[i]);
        if (std::isnan(a[i]) || std::isnan(b[i])) nan = true;
        if (err > max_err) {
            max_err = err;
            worst = i;
        }
    }
    EXPECT_FALSE(nan) << what << ": NaN";
    EXPECT_LE(max_err, rtol * max_ref + atol)
        << what << ": max |a-b| " << max_err << " at " << worst << " (a " << (n ? a[worst] : 0) << ", b "
        << (n ? b[worst] : 0) << "), max |b| " << max_ref << ", rtol " << rtol << ", atol " << atol;
}

// ---- exact data movement -----------------------------------------------------------------------------------

// The slow oracle of where every row goes: the tags (src*1000 + token) rank r's experts must receive, in sorted
// order (expert, then source, then the source's (token, k) order). Group (src, e)'s assignments are walked in
// (token, k) order and the i-th one goes to the part of split whose running total first exceeds i.
inline std::vector<float> expected_inputs(const LayerProblem& p, const RouteSplit& split, int r) {
    std::vector<float> tags;
    for (int e = 0; e < p.E; e++)
        for (int src = 0; src < p.D; src++) {
            const size_t g = (size_t)src * p.E + e;
            int64_t i = 0;  // index of the assignment within its group
            for (int n = 0; n < p.N[src]; n++)
                for (int k = 0; k < p.K; k++) {
                    if (p.idx[src][(size_t)n * p.K + k] != e) continue;
                    int64_t covered = 0;
                    int device = -1;
                    for (int part = split.group_start[g]; part < split.group_start[g + 1] && device < 0; part++) {
                        covered += split.part_tokens[part];
                        if (i < covered) device = split.part_device[part];
                    }
                    EXPECT_GE(device, 0) << "the split leaves assignment " << i << " of group (" << src << ", " << e
                                         << ") nowhere";
                    if (device == r) tags.push_back(float(src * 1000 + n));
                    i++;
                }
        }
    return tags;
}

// Groups split over two or more devices (a rule that splits must split somewhere, or its cases prove nothing).
inline int split_groups(const RouteSplit& split) {
    int n = 0;
    for (size_t g = 0; g + 1 < split.group_start.size(); g++) n += split.group_start[g + 1] - split.group_start[g] > 1;
    return n;
}

// The split the rows must follow. Deterministic rules: the rule's split, recomputed here. kFlow: the routing LP may
// have several optima and which one it returns depends on the solver's start (lp_clp.cpp solve_lp: warm or cold), so
// the executor solves once on rank 0 and broadcasts; the check takes that split, after checking that it is a split of
// these counts over the placement's holders and as good as a fresh solve (unit prices: the test's pricing) up to
// the rounding of shares to whole tokens (one token per group on any device).
inline RouteSplit rule_split(const ExpertParallelExecutor& ep, int layer, const std::vector<int64_t>& counts,
                             const Placement& placement, RouteRule rule) {
    const RouteSplit fresh = route_split(counts.data(), placement, rule);
    if (rule != RouteRule::kFlow) return fresh;
    const RouteSplit used = ep.layer_stats(layer).route;
    const int D = placement.num_devices, E = placement.num_experts;
    EXPECT_EQ(used.group_start.size(), fresh.group_start.size()) << "layer " << layer;
    if (used.group_start.size() != fresh.group_start.size()) return fresh;
    for (int g = 0; g < D * E; ++g) {
        int64_t sum = 0;
        for (int i = used.group_start[g]; i < used.group_start[g + 1]; ++i) {
            sum += used.part_tokens[i];
            EXPECT_TRUE(placement.holds(g % E, used.part_device[i])) << "layer " << layer << " group " << g;
        }
        EXPECT_EQ(sum, counts[g]) << "layer " << layer << " group " << g;
    }
    const RoutePricing unit = route_pricing(nullptr, D, 0.0);
    const double used_objective = route_objective(unit, flow_of_split(counts.data(), placement, used));
    const double fresh_objective = route_objective(unit, flow_of_split(counts.data(), placement, fresh));
    // each split group's shares are rounded to whole tokens: under one token per split group on a device's H and Q
    const double rounding = 7.0 * (split_groups(used) + split_groups(fresh));  // 7: 3 H + 4 Q
    EXPECT_LE(std::abs(used_objective - fresh_objective), rounding) << "layer " << layer;
    return used;
}

inline void check_exact_movement(Communicator& comm, PlacementCase pc, RouteRule rule, uint64_t seed) {
    const int D = comm.size(), r = comm.rank();
    const int L = 2, E = 8, K = 2, C = 8, F = 4;
    std::vector<LayerProblem> problems;
    for (int l = 0; l < L; l++) problems.push_back(make_layer_problem(seed + 101 * l, D, E, K, C, 12, true));

    // this rank's expert copies: home experts hold the exact pattern, the others NaN (Trans must overwrite them
    // before use; copies Trans does not reach must stay untouched). Grads: every rank holding (l, e) or being its
    // home starts with (rank+1) * pattern so Agg's sum is exact; the rest start at 0.
    std::vector<Placement> placements;
    for (int l = 0; l < L; l++) placements.push_back(make_case_placement(pc, D, E, seed + 7 * l));
    std::vector<std::vector<float>> params((size_t)L * E), grads((size_t)L * E);  // [L*E][2*C*F]
    ExpertStorage storage;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            const size_t i = (size_t)l * E + e;
            const std::vector<float> w = expert_params(seed, l, e, C, F, true);
            const std::vector<int> group = moe_expert_group(placements[l], e, moe_home_rank(e, E, D));
            const bool member = std::find(group.begin(), group.end(), r) != group.end();
            params[i] = moe_home_rank(e, E, D) == r ? w : std::vector<float>(w.size(), nan);
            grads[i].assign(w.size(), 0.0f);
            if (member)
                for (size_t j = 0; j < w.size(); j++) grads[i][j] = float(r + 1) * w[j];
            storage.params.push_back(params[i].data());
            storage.grads.push_back(grads[i].data());
        }

    ExpertParallelExecutor ep(&comm, L, E, K, C, F, rule, storage);
    ep.set_identity_experts(true);
    int provider_calls = 0;
    ep.set_placement_provider([&](int layer, const int64_t* counts) {
        provider_calls++;
        const std::vector<int64_t> expected = problems[layer].counts();
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), counts)) << "provider got wrong global counts";
        return placements[layer];
    });

    std::vector<std::vector<float>> out(L), dh(L), dgate_w(L);
    for (int l = 0; l < L; l++) {
        const LayerProblem& p = problems[l];
        const int N = p.N[r];
        out[l].assign((size_t)N * C, nan);
        ep.forward(l, N, p.h[r].data(), p.idx[r].data(), p.gate_w[r].data(), out[l].data());

        // every row on the rank the rule's split names, grouped by expert then source, tags in (token,k) order
        const std::vector<int64_t> counts = p.counts();
        const RouteSplit split = rule_split(ep, l, counts, placements[l], rule);
        // (flow on 2 ranks at unit prices keeps every group whole: both ranks hold every expert, and the
        // LP's optimum computes each rank's tokens locally)
        const bool replicated = pc == PlacementCase::kReplicated || pc == PlacementCase::kMovedOwnersReplicated;
        if (replicated && ((rule == RouteRule::kEvenSplit && D > 1) || (rule == RouteRule::kFlow && D >= 4))) {
            EXPECT_GT(split_groups(split), 0) << "layer " << l << ": the split rule split no group";
        }
        const MoeDispatchLayout& lo = ep.dispatch_layout(l);
        const auto& x = ep.expert_inputs(l);  // [M_recv,C]
        const std::vector<float> tags = expected_inputs(p, split, r);
        ASSERT_EQ(x.size(), tags.size() * C) << "layer " << l << " rank " << r << ": rows arrived " << x.size() / C
                                             << ", the split sends " << tags.size();
        for (size_t row = 0; row < tags.size(); row++)
            for (int c = 0; c < C; c++)
                ASSERT_EQ(x[row * C + c], tags[row])
                    << "layer " << l << " rank " << r << ": sorted row " << row << " channel " << c;
        int64_t num_segments = 0;
        for (int src = 0; src < D; src++)
            for (int e = 0; e < E; e++) num_segments += split.tokens_to(src, e, r) > 0;
        EXPECT_EQ(num_segments, (int64_t)lo.segments.size());
        for (const MoeRecvSegment& seg : lo.segments) EXPECT_EQ(split.tokens_to(seg.src, seg.expert, r), seg.rows);

        // combine(dispatch(h)) = h * sum_k w_k (all terms exact)
        for (int n = 0; n < N; n++) {
            float wsum = 0;
            for (int k = 0; k < K; k++)
                if (p.idx[r][(size_t)n * K + k] >= 0) wsum += p.gate_w[r][(size_t)n * K + k];
            for (int c = 0; c < C; c++)
                ASSERT_EQ(out[l][(size_t)n * C + c], p.h[r][(size_t)n * C + c] * wsum) << "token " << n;
        }

        // Trans: every group member now holds home's exact parameters; other non-home copies are untouched NaN
        for (int e = 0; e < E; e++) {
            const std::vector<float> w = expert_params(seed, l, e, C, F, true);
            const std::vector<int> group = moe_expert_group(placements[l], e, moe_home_rank(e, E, D));
            const bool member = std::find(group.begin(), group.end(), r) != group.end();
            const std::vector<float>& mine = params[(size_t)l * E + e];
            if (member)
                EXPECT_EQ(mine, w) << "layer " << l << " expert " << e << ": Trans did not deliver home's copy";
            else
                EXPECT_TRUE(std::isnan(mine[0])) << "layer " << l << " expert " << e << ": copy outside the group";
        }

        const MoeLayerStats& stats = ep.layer_stats(l);
        EXPECT_EQ(stats.counts, counts);
        EXPECT_EQ(stats.placement.owner, placements[l].owner);
        EXPECT_EQ(stats.route.group_start, split.group_start);
        EXPECT_EQ(stats.route.part_device, split.part_device);
        EXPECT_EQ(stats.route.part_tokens, split.part_tokens);
        EXPECT_EQ(stats.rows_computed, (int64_t)(x.size() / C));
    }
    EXPECT_EQ(provider_calls, L);

    for (int l = L - 1; l >= 0; l--) {
        const LayerProblem& p = problems[l];
        const int N = p.N[r];
        dh[l].assign((size_t)N * C, nan);
        dgate_w[l].assign((size_t)N * K, nan);
        ep.backward(l, N, p.dout[r].data(), dh[l].data(), dgate_w[l].data());
        for (int n = 0; n < N; n++) {
            for (int k = 0; k < K; k++) {
                const size_t a = (size_t)n * K + k;
                float dot = 0;
                if (p.idx[r][a] >= 0)
                    for (int c = 0; c < C; c++) dot += p.dout[r][(size_t)n * C + c] * p.h[r][(size_t)n * C + c];
                ASSERT_EQ(dgate_w[l][a], dot) << "dgate_w token " << n << " k " << k;
            }
            for (int c = 0; c < C; c++) {
                float expected = 0;
                for (int k = 0; k < K; k++)
                    if (p.idx[r][(size_t)n * K + k] >= 0)
                        expected += p.gate_w[r][(size_t)n * K + k] * p.dout[r][(size_t)n * C + c];
                ASSERT_EQ(dh[l][(size_t)n * C + c], expected) << "dh token " << n;
            }
        }
        // Agg: home holds sum over the group of (m+1) * pattern; every other copy is 0
        for (int e = 0; e < E; e++) {
            const int home = moe_home_rank(e, E, D);
            const std::vector<int> group = moe_expert_group(placements[l], e, home);
            const std::vector<float> w = expert_params(seed, l, e, C, F, true);
            float factor = 0;
            for (int m : group) factor += float(m + 1);
            const std::vector<float>& g = grads[(size_t)l * E + e];
            for (size_t j = 0; j < g.size(); j++) {
                const float expected = r == home ? factor * w[j] : 0.0f;
                ASSERT_EQ(g[j], expected) << "layer " << l << " expert " << e << " grad element " << j;
            }
        }
    }
}

// ---- oracle: any placement gives the LocalMoeExecutor result -----------------------------------------------

// resident: the executor keeps replicas between steps (serving); the parameters here never change, so its second
// step must still match the oracle with no Trans at all, or, with placement_changes (each step plans a different
// placement of the same case), with a Trans to the new holders only
inline void check_oracle(Communicator& comm, PlacementCase pc, RouteRule rule, uint64_t seed, bool resident = false,
                         bool placement_changes = false, bool staged = false,
                         EpScheduleMode mode = EpScheduleMode::kBlocking) {
    const int D = comm.size(), r = comm.rank();
    const int L = 2, E = 8, K = 2, C = 16, F = 24, steps = 2;
    const size_t P = 2 * (size_t)C * F;
    const float nan = std::numeric_limits<float>::quiet_NaN();

    // the oracle: one LocalMoeExecutor over the concatenated global batch, grads start at 0.5 (accumulation)
    std::vector<std::vector<float>> ref_params((size_t)L * E), ref_grads((size_t)L * E);  // [L*E][P]
    std::vector<ExpertWeights<float>> ref_weights;
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            const size_t i = (size_t)l * E + e;
            ref_params[i] = expert_params(seed, l, e, C, F, false);
            ref_grads[i].assign(P, 0.5f);
            ref_weights.push_back({ref_params[i].data(), ref_params[i].data() + (size_t)C * F, ref_grads[i].data(),
                                   ref_grads[i].data() + (size_t)C * F});
        }
    LocalMoeExecutor<float> oracle(L, E, K, C, F, ref_weights);

    // this rank: home experts true, others NaN; home grads 0.5 like the oracle's, others 0 (the executor's
    // invariant: a non-home gradient is zero outside a backward)
    std::vector<std::vector<float>> params((size_t)L * E), grads((size_t)L * E);
    ExpertStorage storage;
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            const size_t i = (size_t)l * E + e;
            const bool home = moe_home_rank(e, E, D) == r;
            params[i] = home ? ref_params[i] : std::vector<float>(P, nan);
            grads[i].assign(P, home ? 0.5f : 0.0f);
            storage.params.push_back(params[i].data());
            storage.grads.push_back(grads[i].data());
        }
    ExpertParallelExecutor ep(&comm, L, E, K, C, F, rule, storage);
    std::unique_ptr<StagedExpertCompute> own;  // staged: the experts' own arena, what the checks below read
    if (staged) {
        own = std::make_unique<StagedExpertCompute>(L, E, C, F, storage);
        ep.set_expert_compute(own.get());
    }
    std::vector<std::vector<float>>& checked_params = staged ? own->params : params;
    std::vector<std::vector<float>>& checked_grads = staged ? own->grads : grads;
    int current_step = 0;
    auto placement_of = [&](int layer) {
        return make_case_placement(pc, D, E, seed + 31 * layer + (placement_changes ? 1009 * current_step : 0));
    };
    ep.set_placement_provider([&](int layer, const int64_t*) { return placement_of(layer); });
    ep.set_resident_replicas(resident);
    if (mode == EpScheduleMode::kBlockwise) {  // the same placements, fetched ahead; transfers split in two
        EpSchedule schedule;
        schedule.mode = EpScheduleMode::kBlockwise;
        schedule.fnec_s = schedule.bnec_s = schedule.expert_transfer_s = 1e-3;
        ep.set_schedule(schedule);
        ep.set_ahead_provider(placement_of, [](int, const int64_t*) {});
    } else if (mode == EpScheduleMode::kFasterMoE) {  // the provider's placements; Trans/Agg whole beside the a2a
        EpSchedule schedule;
        schedule.mode = mode;
        ep.set_schedule(schedule);
    }

    for (int step = 0; step < steps; step++) {
        current_step = step;
        std::vector<LayerProblem> problems;
        for (int l = 0; l < L; l++)
            problems.push_back(make_layer_problem(seed * 131 + 977 * step + 101 * l, D, E, K, C, 24, false));
        std::vector<std::vector<float>> ref_out(L), ref_dh(L), ref_dgate(L), out(L), dh(L), dgate(L);
        for (int l = 0; l < L; l++) {
            const LayerProblem& p = problems[l];
            const int N_all = (int)(LayerProblem::concat(p.idx).size() / K);
            ref_out[l].resize((size_t)N_all * C);
            oracle.forward(l, N_all, LayerProblem::concat(p.h).data(), LayerProblem::concat(p.idx).data(),
                           LayerProblem::concat(p.gate_w).data(), ref_out[l].data());
            out[l].assign((size_t)p.N[r] * C, nan);
            ep.block_forward_begin(l);
            ep.forward(l, p.N[r], p.h[r].data(), p.idx[r].data(), p.gate_w[r].data(), out[l].data());
        }
        for (int l = L - 1; l >= 0; l--) {
            const LayerProblem& p = problems[l];
            const int N_all = (int)(LayerProblem::concat(p.idx).size() / K);
            ref_dh[l].resize((size_t)N_all * C);
            ref_dgate[l].resize((size_t)N_all * K);
            oracle.backward(l, N_all, LayerProblem::concat(p.dout).data(), ref_dh[l].data(), ref_dgate[l].data());
            dh[l].assign((size_t)p.N[r] * C, nan);
            dgate[l].assign((size_t)p.N[r] * K, nan);
            ep.backward(l, p.N[r], p.dout[r].data(), dh[l].data(), dgate[l].data());
        }
        ep.finish_backward();
        for (int l = 0; l < L; l++) {
            const LayerProblem& p = problems[l];
            int begin = 0;  // this rank's first token in the global batch
            for (int d = 0; d < r; d++) begin += p.N[d];
            const std::string where = std::string(case_name(pc)) + " step " + std::to_string(step) + " layer " +
                                      std::to_string(l) + " rank " + std::to_string(r) + ": ";
            expect_close(where + "out", out[l].data(), ref_out[l].data() + (size_t)begin * C, out[l].size(),
                         kOracleRtol);
            expect_close(where + "dh", dh[l].data(), ref_dh[l].data() + (size_t)begin * C, dh[l].size(), kOracleRtol);
            expect_close(where + "dgate_w", dgate[l].data(), ref_dgate[l].data() + (size_t)begin * K,
                         dgate[l].size(), kOracleRtol);
            for (int e = 0; e < E; e++) {
                const size_t i = (size_t)l * E + e;
                if (moe_home_rank(e, E, D) == r) {
                    expect_close(where + "home grad of expert " + std::to_string(e), checked_grads[i].data(),
                                 ref_grads[i].data(), P, kOracleRtol);
                    EXPECT_EQ(checked_params[i], ref_params[i]) << where << "home parameters changed";
                } else {
                    for (size_t j = 0; j < P; j++)
                        ASSERT_EQ(checked_grads[i][j], 0.0f) << where << "non-home grad of expert " << e << " not zero";
                }
            }
        }
    }
}

}  // namespace prophet::moe_test
