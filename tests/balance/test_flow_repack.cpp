// flow's repacked candidates (balance/flow_repack.h) and the relabelling's Hungarian (balance/relabel.h) against
// slow obvious oracles that must give the same answer, ties included: the packing as a scan of every bin per item
// with move counts from holds(), and the textbook Hungarian that updates every potential at every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "balance/flow_repack.h"
#include "balance/moves.h"
#include "balance/relabel.h"
#include "core/rng.h"

namespace prophet {
namespace {

// The textbook shortest-augmenting-path Hungarian (potentials updated eagerly at every Dijkstra step), with the
// same starting potentials and zero-cost greedy matching as min_cost_assignment.
std::vector<int> textbook_assignment(const std::vector<int64_t>& cost, int n) {
    const int64_t inf = std::numeric_limits<int64_t>::max() / 4;
    auto at = [&](int r, int c) { return cost[static_cast<size_t>(r - 1) * n + (c - 1)]; };
    std::vector<int64_t> u(n + 1, 0), v(n + 1, 0), reach(n + 1);
    std::vector<int> match(n + 1, 0), previous(n + 1);
    std::vector<char> used(n + 1), row_done(n + 1, 0);
    for (int r = 1; r <= n; ++r) {
        u[r] = at(r, 1);
        for (int c = 2; c <= n; ++c) u[r] = std::min(u[r], at(r, c));
    }
    for (int c = 1; c <= n; ++c) {
        v[c] = at(1, c) - u[1];
        for (int r = 2; r <= n; ++r) v[c] = std::min(v[c], at(r, c) - u[r]);
    }
    for (int r = 1; r <= n; ++r)
        for (int c = 1; c <= n; ++c)
            if (match[c] == 0 && at(r, c) - u[r] - v[c] == 0) {
                match[c] = r, row_done[r] = 1;
                break;
            }
    for (int row = 1; row <= n; ++row) {
        if (row_done[row]) continue;
        match[0] = row;
        int col = 0;
        std::fill(reach.begin(), reach.end(), inf);
        std::fill(used.begin(), used.end(), 0);
        do {
            used[col] = 1;
            const int r = match[col];
            int64_t delta = inf;
            int next = 0;
            for (int c = 1; c <= n; ++c) {
                if (used[c]) continue;
                const int64_t reduced = at(r, c) - u[r] - v[c];
                if (reduced < reach[c]) reach[c] = reduced, previous[c] = col;
                if (reach[c] < delta) delta = reach[c], next = c;
            }
            for (int c = 0; c <= n; ++c)
                if (used[c])
                    u[match[c]] += delta, v[c] -= delta;
                else
                    reach[c] -= delta;
            col = next;
        } while (match[col] != 0);
        do {
            const int before = previous[col];
            match[col] = match[before];
            col = before;
        } while (col != 0);
    }
    std::vector<int> col_of_row(n);
    for (int c = 1; c <= n; ++c) col_of_row[match[c] - 1] = c - 1;
    return col_of_row;
}

struct AssignmentCase {
    const char* name;
    int max_n;
    int64_t value_range;  // costs uniform in [0, value_range): small ranges make ties
};

class HungarianOracle : public ::testing::TestWithParam<AssignmentCase> {};

TEST_P(HungarianOracle, SameAssignmentAsTheTextbook) {
    const AssignmentCase c = GetParam();
    Rng rng(static_cast<uint64_t>(c.max_n * 131 + c.value_range));
    for (int trial = 0; trial < 60; ++trial) {
        const int n = 1 + static_cast<int>(rng.below(c.max_n));
        std::vector<int64_t> cost(static_cast<size_t>(n) * n);
        for (int64_t& x : cost) x = static_cast<int64_t>(rng.below(c.value_range));
        EXPECT_EQ(min_cost_assignment(cost, n), textbook_assignment(cost, n)) << "n = " << n << " trial " << trial;
    }
}

INSTANTIATE_TEST_SUITE_P(Table, HungarianOracle,
                         ::testing::Values(AssignmentCase{"binary_ties", 40, 2}, AssignmentCase{"few_values", 70, 4},
                                           AssignmentCase{"spread", 70, 1000}, AssignmentCase{"tiny", 4, 3}),
                         [](const ::testing::TestParamInfo<AssignmentCase>& info) {
                             return std::string(info.param.name);
                         });

// The packing of flow_repack.h the obvious way: every item scans all D bins; moves from holds().
Placement scan_repacked(const std::vector<double>& load, const std::vector<int>& copies, const Placement& current) {
    const int D = current.num_devices, E = current.num_experts;
    std::vector<std::pair<double, int>> items;  // (weight, expert), expert-major
    for (int e = 0; e < E; ++e)
        for (int c = 0; c < copies[e]; ++c) items.emplace_back(load[e] / copies[e], e);
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const int slots = (static_cast<int>(items.size()) + D - 1) / D;
    std::vector<double> weight(D, 0.0);
    std::vector<std::vector<int>> bin(D);
    for (const auto& [w, e] : items) {
        int best = -1;
        for (int b = 0; b < D; ++b) {
            const bool holds = std::find(bin[b].begin(), bin[b].end(), e) != bin[b].end();
            if (static_cast<int>(bin[b].size()) < slots && !holds && (best < 0 || weight[b] < weight[best])) best = b;
        }
        if (best < 0) continue;
        weight[best] += w;
        bin[best].push_back(e);
    }
    std::vector<int64_t> moves(static_cast<size_t>(D) * D, 0);
    for (int b = 0; b < D; ++b)
        for (int e : bin[b])
            for (int d = 0; d < D; ++d)
                moves[static_cast<size_t>(b) * D + d] +=
                    !current.holds(e, d) + static_cast<int64_t>(kTrainingStateCopies) * (current.owner[e] != d);
    const std::vector<int> device = textbook_assignment(moves, D);
    std::vector<int> owner(E, -1);
    for (int b = 0; b < D; ++b)
        for (int e : bin[b])
            if (owner[e] < 0 || device[b] == current.owner[e]) owner[e] = device[b];
    Placement p = Placement::make_owners(D, owner);
    for (int b = 0; b < D; ++b)
        for (int e : bin[b]) p.add_replica(e, device[b]);
    return p;
}

struct RepackCase {
    const char* name;
    int D, E;
    int load_range;       // loads uniform integers in [0, load_range): small ranges make equal items
    int max_extra;        // extra copies per expert at most (copies beyond D are dropped by the packing)
    bool replicated_now;  // the current placement holds replicas too (else static)
};

class RepackOracle : public ::testing::TestWithParam<RepackCase> {};

TEST_P(RepackOracle, SamePlacementAsTheScan) {
    const RepackCase c = GetParam();
    Rng rng(static_cast<uint64_t>(c.D * 1000 + c.E + c.load_range));
    std::vector<double> load(c.E);
    for (double& w : load) w = static_cast<double>(rng.below(c.load_range));
    Placement current = Placement::make_static(c.D, c.E);
    for (int e = 0; e < c.E && c.replicated_now; ++e)
        if (rng.below(3) == 0) current.add_replica(e, static_cast<int>(rng.below(c.D)));
    Repacker repacker(load, current);  // one repacker for every trial, as a plan uses it
    for (int trial = 0; trial < 30; ++trial) {
        std::vector<int> copies(c.E);
        for (int& k : copies) k = 1 + static_cast<int>(rng.below(c.max_extra + 1));
        const Placement fast = repacker.pack(copies), slow = scan_repacked(load, copies, current);
        EXPECT_EQ(fast.owner, slow.owner) << "trial " << trial;
        EXPECT_EQ(fast.replica, slow.replica) << "trial " << trial;
        const std::vector<int> per_device = slow.replicas_per_device();
        EXPECT_EQ(repacker.most_replicas(), *std::max_element(per_device.begin(), per_device.end()));
    }
}

INSTANTIATE_TEST_SUITE_P(Table, RepackOracle,
                         ::testing::Values(RepackCase{"static_distinct", 8, 32, 100000, 2, false},
                                           RepackCase{"static_ties", 8, 16, 3, 3, false},
                                           RepackCase{"replicated_now", 16, 32, 50, 2, true},
                                           RepackCase{"copies_beyond_d", 4, 8, 10, 6, true},
                                           RepackCase{"large", 64, 256, 1000, 1, false}),
                         [](const ::testing::TestParamInfo<RepackCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
