// relabel.cpp: the Hungarian algorithm (potentials and shortest augmenting paths, one row at a time).
#include "balance/relabel.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace prophet {

namespace {

// Feasible starting potentials (row minima, then the column minima of what is left: every reduced cost >= 0) and a
// greedy matching on pairs of reduced cost 0, which the shortest-path rows below then only complete: relabelling's
// move counts are mostly ties, so most rows are matched here in O(n) instead of a Dijkstra each.
void seed_potentials(const std::vector<int64_t>& cost, int n, std::vector<int64_t>& u, std::vector<int64_t>& v,
                     std::vector<int>& match, std::vector<uint8_t>& row_done) {
    auto at = [&](int r, int c) { return cost[static_cast<size_t>(r - 1) * n + (c - 1)]; };
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
}

}  // namespace

std::vector<int> min_cost_assignment(const std::vector<int64_t>& cost, int n) {
    PROPHET_ASSERT(n >= 0 && cost.size() == static_cast<size_t>(n) * n);
    const int64_t inf = std::numeric_limits<int64_t>::max() / 4;
    // 1-based internals: u, v potentials; match[col] = row; column 0 is the virtual start
    std::vector<int64_t> u(n + 1, 0), v(n + 1, 0), reach(n + 1);
    std::vector<int> match(n + 1, 0), previous(n + 1);
    std::vector<uint8_t> used(n + 1), row_done(n + 1, 0);
    seed_potentials(cost, n, u, v, match, row_done);
    for (int row = 1; row <= n; ++row) {
        if (row_done[row]) continue;
        match[0] = row;
        int col = 0;
        std::fill(reach.begin(), reach.end(), inf);
        std::fill(used.begin(), used.end(), 0);
        do {  // Dijkstra step on reduced costs from the columns reached so far
            used[col] = 1;
            const int r = match[col];
            int64_t delta = inf;
            int next = 0;
            for (int c = 1; c <= n; ++c) {
                if (used[c]) continue;
                const int64_t reduced = cost[static_cast<size_t>(r - 1) * n + (c - 1)] - u[r] - v[c];
                if (reduced < reach[c]) reach[c] = reduced, previous[c] = col;
                if (reach[c] < delta) delta = reach[c], next = c;
            }
            for (int c = 0; c <= n; ++c) {
                if (used[c]) {
                    u[match[c]] += delta;
                    v[c] -= delta;
                } else {
                    reach[c] -= delta;
                }
            }
            col = next;
        } while (match[col] != 0);
        do {  // augment along the path back to the start
            const int before = previous[col];
            match[col] = match[before];
            col = before;
        } while (col != 0);
    }
    std::vector<int> col_of_row(n);
    for (int c = 1; c <= n; ++c) col_of_row[match[c] - 1] = c - 1;
    return col_of_row;
}

int64_t min_cost_assignment_brute_force(const std::vector<int64_t>& cost, int n) {
    PROPHET_ASSERT(n >= 0 && n <= 8 && cost.size() == static_cast<size_t>(n) * n);
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    int64_t best = std::numeric_limits<int64_t>::max();
    do {
        int64_t total = 0;
        for (int r = 0; r < n; ++r) total += cost[static_cast<size_t>(r) * n + perm[r]];
        best = std::min(best, total);
    } while (std::next_permutation(perm.begin(), perm.end()));
    return n == 0 ? 0 : best;
}

}  // namespace prophet
