// relabel_sparse.cpp: relabel.cpp's Hungarian on row constants less listed savings (relabel_sparse.h).
#include "balance/relabel_sparse.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include "balance/relabel.h"
#include "core/error.h"

namespace prophet {

namespace {
constexpr int64_t kUnreached = std::numeric_limits<int64_t>::max() / 4;
}  // namespace

std::vector<int64_t> dense_costs(const SavingsMatrix& m) {
    const int n = m.n;
    std::vector<int64_t> cost(static_cast<size_t>(n) * n);
    for (int r = 0; r < n; ++r) {
        std::fill_n(cost.begin() + static_cast<std::ptrdiff_t>(r) * n, n, m.base[r]);
        for (int i = m.row_start[r]; i < m.row_start[r + 1]; ++i)
            cost[static_cast<size_t>(r) * n + m.col[i]] -= m.saving[i];
    }
    return cost;
}

// the first position at or after `position` of the seed's column order whose column is unmatched (path halving)
int SparseAssignment::unmatched_at(int position) {
    while (skip_[position] != position) position = skip_[position] = skip_[skip_[position]];
    return position;
}

// relabel.cpp's seed_potentials: u[r] = row minimum = base - max saving; v[c] = min over rows of (cost - u), which
// is max_saving[r] for a row that lists nothing for c (the least such row: the first of rows_ by max saving that
// does not list c) and max_saving[r] - saving for a row that does; then the greedy zero-cost matching, row by row,
// each row taking its lowest unmatched column of reduced cost 0: a listed one, or an unlisted one with
// v[c] == max_saving[r] (found in the columns ordered by (v, index), matched ones skipped).
void SparseAssignment::seed(const SavingsMatrix& m) {
    const int n = n_;
    auto listed = [&](int r, int c) { return listed_[static_cast<size_t>(r - 1) * n + (c - 1)] != 0; };
    for (int r = 1; r <= n; ++r) {
        int64_t most = 0;
        for (int i = m.row_start[r - 1]; i < m.row_start[r]; ++i) most = std::max(most, m.saving[i]);
        max_saving_[r] = most, u_[r] = m.base[r - 1] - most;
    }
    rows_.resize(n);
    std::iota(rows_.begin(), rows_.end(), 1);
    std::sort(rows_.begin(), rows_.end(), [&](int a, int b) { return max_saving_[a] < max_saving_[b]; });
    for (int c = 1; c <= n; ++c) {
        int i = 0;
        while (i < n && listed(rows_[i], c)) ++i;
        v_[c] = i < n ? max_saving_[rows_[i]] : kUnreached;
    }
    for (int r = 1; r <= n; ++r)
        for (int i = m.row_start[r - 1]; i < m.row_start[r]; ++i)
            v_[m.col[i] + 1] = std::min(v_[m.col[i] + 1], max_saving_[r] - m.saving[i]);
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 1);
    auto by_v = [&](int a, int b) { return v_[a] < v_[b] || (v_[a] == v_[b] && a < b); };
    std::sort(order_.begin(), order_.end(), by_v);
    skip_.resize(n + 1);
    std::iota(skip_.begin(), skip_.end(), 0);
    for (int i = 0; i < n; ++i) position_[order_[i]] = i;
    for (int r = 1; r <= n; ++r) {
        int best = n + 1;
        for (int i = m.row_start[r - 1]; i < m.row_start[r]; ++i) {
            const int c = m.col[i] + 1;
            if (match_[c] == 0 && max_saving_[r] - m.saving[i] - v_[c] == 0) best = std::min(best, c);
        }
        const int64_t want = max_saving_[r];
        int i = static_cast<int>(
            std::lower_bound(order_.begin(), order_.end(), want, [&](int c, int64_t value) { return v_[c] < value; }) -
            order_.begin());
        for (i = unmatched_at(i); i < n && v_[order_[i]] == want; i = unmatched_at(i + 1))
            if (!listed(r, order_[i])) {
                best = std::min(best, order_[i]);
                break;
            }
        if (best > n) continue;
        match_[best] = r, row_done_[r] = 1;
        skip_[position_[best]] = position_[best] + 1;
    }
}

// relabel.cpp's augment_row with the same choices. Row r offers column c the length K - saving(r, c) - v[c], with
// K = base[r] - u[r] + settled; an unlisted column's offer K - v[c] is least for the least K so far (Kmin, from
// the column whose row made it first), so a column's reach is min(Kmin - v[c], its listed offers) and the next
// column is the better of the unused column of largest v (dense_order_) and the heap's least listed offer, ties
// to the lower column. A listed offer no better than Kmin - v[c] when made never decides (a tie goes to the
// earlier offer, and Kmin's is no later), so it is not kept. previous[c]: the earliest offer of c's reach.
void SparseAssignment::augment_row(const SavingsMatrix& m, int row) {
    const int n = n_;
    match_[0] = row;
    dense_order_.resize(n);
    std::iota(dense_order_.begin(), dense_order_.end(), 1);
    std::sort(dense_order_.begin(), dense_order_.end(),
              [&](int a, int b) { return v_[a] > v_[b] || (v_[a] == v_[b] && a < b); });
    std::fill(sparse_reach_.begin(), sparse_reach_.end(), kUnreached);
    std::fill(used_.begin(), used_.end(), 0);
    heap_.clear(), visited_.clear();
    const auto lower_first = std::greater<std::pair<int64_t, int>>();
    int64_t k_min = kUnreached, settled = 0;
    int k_from = 0, col = 0, dense_at = 0;
    for (int step = 0; match_[col] != 0; ++step) {
        settled_at_[col] = settled, visited_.push_back(col), used_[col] = 1, step_of_[col] = step;
        const int r = match_[col];
        const int64_t k = m.base[r - 1] - u_[r] + settled;
        if (k < k_min) k_min = k, k_from = col;
        for (int i = m.row_start[r - 1]; i < m.row_start[r]; ++i) {
            const int c = m.col[i] + 1;
            const int64_t offer = k - m.saving[i] - v_[c];
            if (used_[c] || offer >= sparse_reach_[c] || offer >= k_min - v_[c]) continue;
            sparse_reach_[c] = offer, sparse_from_[c] = col;
            heap_.emplace_back(offer, c), std::push_heap(heap_.begin(), heap_.end(), lower_first);
        }
        while (used_[dense_order_[dense_at]]) ++dense_at;
        while (!heap_.empty() &&
               (used_[heap_.front().second] || heap_.front().first != sparse_reach_[heap_.front().second]))
            std::pop_heap(heap_.begin(), heap_.end(), lower_first), heap_.pop_back();
        const int dense_col = dense_order_[dense_at];
        const int64_t dense_best = k_min - v_[dense_col];
        const int64_t sparse_best = heap_.empty() ? kUnreached : heap_.front().first;
        const int next = dense_best < sparse_best   ? dense_col
                         : sparse_best < dense_best ? heap_.front().second
                                                    : std::min(dense_col, heap_.front().second);
        const int64_t dense_offer = k_min - v_[next], listed_offer = sparse_reach_[next];
        previous_[next] = dense_offer < listed_offer                         ? k_from
                          : listed_offer < dense_offer                       ? sparse_from_[next]
                          : step_of_[k_from] <= step_of_[sparse_from_[next]] ? k_from
                                                                             : sparse_from_[next];
        settled = std::min(dense_best, sparse_best);
        col = next;
    }
    settle_and_augment(visited_, settled_at_, settled, u_, v_, match_, previous_, col);
}

const std::vector<int>& SparseAssignment::solve(const SavingsMatrix& m) {
    const int n = n_ = m.n;
    PROPHET_ASSERT(static_cast<int>(m.base.size()) == n && static_cast<int>(m.row_start.size()) == n + 1);
    if (n <= dense_up_to_) return col_of_row_ = min_cost_assignment(dense_costs(m), n);
    const size_t cells = static_cast<size_t>(n) * n;
    if (listed_.size() < cells) listed_.assign(cells, 0);
    for (int r = 0; r < n; ++r)
        for (int i = m.row_start[r]; i < m.row_start[r + 1]; ++i) {
            PROPHET_ASSERT(m.saving[i] >= 0 && m.col[i] >= 0 && m.col[i] < n);
            PROPHET_ASSERT_MSG(!listed_[static_cast<size_t>(r) * n + m.col[i]], "a saving listed twice in one row");
            listed_[static_cast<size_t>(r) * n + m.col[i]] = 1;
        }
    for (auto* values : {&u_, &v_, &max_saving_, &sparse_reach_, &settled_at_}) values->assign(n + 1, 0);
    for (auto* values : {&match_, &previous_, &position_, &sparse_from_, &step_of_}) values->assign(n + 1, 0);
    row_done_.assign(n + 1, 0), used_.assign(n + 1, 0);
    seed(m);
    for (int row = 1; row <= n; ++row)
        if (!row_done_[row]) augment_row(m, row);
    col_of_row_.resize(n);
    for (int c = 1; c <= n; ++c) col_of_row_[match_[c] - 1] = c - 1;
    for (int r = 0; r < n; ++r)  // cleared for the next matrix
        for (int i = m.row_start[r]; i < m.row_start[r + 1]; ++i) listed_[static_cast<size_t>(r) * n + m.col[i]] = 0;
    return col_of_row_;
}

}  // namespace prophet
