// relabel.cpp: the Hungarian algorithm (potentials and shortest augmenting paths, one row at a time).
#include "balance/relabel.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace prophet {

namespace {

// The Hungarian algorithm's state, 1-based over columns (column 0: the virtual start of a row's path).
struct AssignmentScratch {
    explicit AssignmentScratch(int n)
        : u(n + 1, 0), v(n + 1, 0), reach(n + 1), settled_at(n + 1), match(n + 1, 0), previous(n + 1),
          row_done(n + 1, 0) {
        visited.reserve(n + 1);
        unused.reserve(n);
    }
    std::vector<int64_t> u, v, reach, settled_at;  // row and column potentials; a row's path lengths
    std::vector<int> match, previous, visited;     // match[col] = row; path predecessors; columns reached
    std::vector<int> unused;                       // the columns a row's search has not reached, ascending
    std::vector<uint8_t> row_done;
};

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
    for (int c = 1; c <= n; ++c) v[c] = at(1, c) - u[1];
    for (int r = 2; r <= n; ++r)  // row by row (contiguous): the column minima are the same in any order
        for (int c = 1; c <= n; ++c) v[c] = std::min(v[c], at(r, c) - u[r]);
    for (int r = 1; r <= n; ++r)
        for (int c = 1; c <= n; ++c)
            if (match[c] == 0 && at(r, c) - u[r] - v[c] == 0) {
                match[c] = r, row_done[r] = 1;
                break;
            }
}

// One row's shortest augmenting path (Dijkstra on reduced costs from `row`), the potentials updated and the path
// augmented. The potentials are applied lazily: `reach[c]` holds the path length to column c plus the distance
// settled when c was reached (`settled`), so the textbook's per-step pass that lowers every unreached column by
// the step's delta and raises every reached one is one pass per row at the end; the same columns are chosen in
// the same order (ties to the lower index), so the result is the textbook's, bit for bit.
void augment_row(const std::vector<int64_t>& cost, int n, int row, AssignmentScratch& s) {
    const int64_t inf = std::numeric_limits<int64_t>::max() / 4;
    std::vector<int64_t>&u = s.u, &v = s.v, &reach = s.reach, &settled_at = s.settled_at;
    std::vector<int>&match = s.match, &previous = s.previous, &visited = s.visited;
    s.match[0] = row;
    std::fill(reach.begin(), reach.end(), inf);
    visited.clear();
    s.unused.resize(n);
    std::iota(s.unused.begin(), s.unused.end(), 1);
    int col = 0;
    int64_t settled = 0;  // the sum of the textbook's deltas so far
    do {
        settled_at[col] = settled, visited.push_back(col);
        const int r = match[col];
        const int64_t* cost_row = cost.data() + static_cast<size_t>(r - 1) * n - 1;
        const int64_t base = settled - u[r];
        int64_t best = inf;
        int next = 0;
        size_t next_at = 0;
        for (size_t i = 0; i < s.unused.size(); ++i) {  // ascending: ties go to the lower column, as the textbook's
            const int c = s.unused[i];
            const int64_t length = cost_row[c] - v[c] + base;
            if (length < reach[c]) reach[c] = length, previous[c] = col;
            if (reach[c] < best) best = reach[c], next = c, next_at = i;
        }
        s.unused.erase(s.unused.begin() + static_cast<std::ptrdiff_t>(next_at));
        settled = best;
        col = next;
    } while (match[col] != 0);
    settle_and_augment(visited, settled_at, settled, u, v, match, previous, col);
}

}  // namespace

void settle_and_augment(const std::vector<int>& visited, const std::vector<int64_t>& settled_at, int64_t settled,
                        std::vector<int64_t>& u, std::vector<int64_t>& v, std::vector<int>& match,
                        const std::vector<int>& previous, int col) {
    for (int c : visited) {  // every reached column took each delta from its own step on
        u[match[c]] += settled - settled_at[c];
        v[c] -= settled - settled_at[c];
    }
    do {  // augment along the path back to the start
        const int before = previous[col];
        match[col] = match[before];
        col = before;
    } while (col != 0);
}

std::vector<int> min_cost_assignment(const std::vector<int64_t>& cost, int n) {
    PROPHET_ASSERT(n >= 0 && cost.size() == static_cast<size_t>(n) * n);
    // 1-based internals: u, v potentials; match[col] = row; column 0 is the virtual start
    AssignmentScratch s(n);
    seed_potentials(cost, n, s.u, s.v, s.match, s.row_done);
    for (int row = 1; row <= n; ++row)
        if (!s.row_done[row]) augment_row(cost, n, row, s);
    std::vector<int> col_of_row(n);
    for (int c = 1; c <= n; ++c) col_of_row[s.match[c] - 1] = c - 1;
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
